public import NorqCore
public import OrderedCollections

/// Expo's message format: the mapping from `PushContent` (and the send's options) to one element of the
/// `POST /--/api/v2/push/send` array. Pure; `providers/expo.md` documents the table.
public enum ExpoMessage {
    /// Expo's limit on the payload it passes to APNs/FCM (`MessageTooBig` above it), checked on the message
    /// without its `to`.
    public static let payloadLimit = 4096
    /// The most recipients of one send request (`PUSH_TOO_MANY_NOTIFICATIONS` above it).
    public static let maxRecipientsPerRequest = 100
    /// The most ids of one `getReceipts` request (`PUSH_TOO_MANY_RECEIPTS` above it).
    public static let maxReceiptIDsPerRequest = 1000

    /// The message for `content` to a token of `platform`, without `to` (its fields in a stable order).
    /// `push.json` content (a native payload) is sent as written: it must be a JSON object.
    public static func object(for content: PushContent, platform: Platform,
                              options: SendOptions) throws(NorqError) -> OrderedDictionary<String, JSONValue> {
        if let native = content.nativePayload {
            guard case .object(var object) = native else {
                throw NorqError(.expoInvalidMessage,
                                "the push.json of \(content.templateName.map { "template \"\($0)\"" } ?? "the push") must be a JSON object (one Expo message)")
            }
            object.removeValue(forKey: "to")
            return object
        }
        var message: OrderedDictionary<String, JSONValue> = [:]
        if !content.title.isEmpty { message["title"] = .string(content.title) }
        if !content.body.isEmpty { message["body"] = .string(content.body) }
        var data = content.data
        if let url = content.actionURL, data["url"] == nil { data["url"] = .string(url) }
        if !data.isEmpty { message["data"] = .object(data) }
        if let image = content.image { message["richContent"] = .object(["image": .string(image)]) }

        // Lifetime: android.ttl (Android tokens), else the send's or template's expiration.
        if platform == .android, let ttl = content.android.ttl {
            message["ttl"] = .int(ttl)
        } else if let expiration = options.expiration ?? content.headers.expiration {
            switch expiration {
            case .after(let seconds): message["ttl"] = .int(max(0, seconds))
            case .at(let epoch): message["expiration"] = .int(epoch)
            case .immediately: message["ttl"] = .int(0)
            }
        }
        // Priority: android.priority (Android tokens), else apns-priority 10 -> high, 1 or 5 -> normal.
        if platform == .android, let priority = content.android.priority {
            message["priority"] = .string(priority == "high" ? "high" : "normal")
        } else if let priority = options.priority ?? content.headers.priority {
            message["priority"] = .string(priority >= 10 ? "high" : "normal")
        }
        if let collapse = options.collapseID ?? content.headers.collapseID { message["collapseId"] = .string(collapse) }

        switch platform {
        case .ios:
            let ios = content.ios
            if let subtitle = ios.subtitle { message["subtitle"] = .string(subtitle) }
            if let sound = ios.sound {
                if sound.critical {
                    var critical: OrderedDictionary<String, JSONValue> = ["critical": true, "name": .string(sound.name)]
                    if let volume = sound.volume { critical["volume"] = .double(volume) }
                    message["sound"] = .object(critical)
                } else {
                    message["sound"] = .string(sound.name)
                }
            }
            if let badge = ios.badge { message["badge"] = .int(Int64(badge)) }
            if let level = ios.interruptionLevel { message["interruptionLevel"] = .string(level) }
            if let category = ios.category { message["categoryId"] = .string(category) }
            if let thread = ios.threadID { message["threadId"] = .string(thread) }
            if let mutable = ios.mutableContent { message["mutableContent"] = .bool(mutable) }
            if let available = ios.contentAvailable { message["contentAvailable"] = .bool(available) }
            if let target = ios.targetContentID { message["targetContentId"] = .string(target) }
            if let score = ios.relevanceScore { message["relevanceScore"] = .double(score) }
            if let criteria = ios.filterCriteria { message["filterCriteria"] = .string(criteria) }
        case .android:
            let android = content.android
            if let channel = android.channelID { message["channelId"] = .string(channel) }
            if let icon = android.icon { message["icon"] = .string(icon) }
            if let tag = android.tag { message["tag"] = .string(tag) }
            if let sound = android.sound { message["sound"] = .string(sound) }
        default:
            break
        }
        return message
    }

    /// The whole message for one token: `to` first, then `object(for:platform:options:)`'s fields.
    public static func message(to token: String, _ object: OrderedDictionary<String, JSONValue>) -> JSONValue {
        var message: OrderedDictionary<String, JSONValue> = ["to": .string(token)]
        message.reserveCapacity(object.count + 1)
        for (key, value) in object { message[key] = value }
        return .object(message)
    }
}
