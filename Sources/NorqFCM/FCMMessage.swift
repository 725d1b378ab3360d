public import NorqCore
public import OrderedCollections
import NorqAPNs

/// Builds FCM HTTP v1 `message` objects from `PushContent` (the mapping table is in `providers/fcm.md`).
///
/// Which platform blocks a message carries follows its target: a token of an iOS app gets the `apns` block only
/// (its payload exactly what an APNs send would carry, custom data typed beside `aps`); an Android token gets
/// `notification`, `data` and `android`; a web token `notification`, `data` and `webpush`; a topic or a condition
/// (any platform may listen) all of them.
public enum FCMMessage {
    /// The largest message FCM accepts, in bytes of the serialized message without its target.
    public static let payloadLimit = 4096
    /// The largest message FCM accepts for a topic or a condition (Google: 2,048 bytes for topic messages),
    /// measured the same way.
    public static let topicPayloadLimit = 2048

    /// The limit for a message to `target`: `topicPayloadLimit` for a topic or a condition, else `payloadLimit`.
    public static func payloadLimit(for target: FCMTarget) -> Int {
        switch target {
        case .token: payloadLimit
        case .topic, .condition: topicPayloadLimit
        }
    }
    /// The longest `android.ttl` FCM accepts: four weeks.
    public static let maximumTTL: Int64 = 2_419_200
    /// The keys of a hand-written (`push.json`) message.
    public static let messageKeys: Set<String> = [
        "notification", "data", "android", "apns", "webpush", "fcm_options", "name",
    ]

    /// Which blocks to build.
    struct Blocks: OptionSet, Hashable {
        let rawValue: Int
        static let android = Blocks(rawValue: 1)
        static let apns = Blocks(rawValue: 2)
        static let webpush = Blocks(rawValue: 4)
        static let all: Blocks = [.android, .apns, .webpush]

        static func `for`(_ target: FCMTarget) -> Blocks {
            switch target {
            case .token(_, let platform):
                if platform == .ios { return .apns }
                if platform == .web { return .webpush }
                return .android
            case .topic, .condition: return .all
            }
        }
    }

    /// Per-send values that shape the message besides the content.
    public struct Options: Sendable, Hashable {
        /// `apns-priority`-style number (10 high, 5 or 1 normal), when the send names one.
        public var priority: Int?
        public var expiration: PushExpiration?
        public var collapseID: String?
        /// Epoch seconds of the send (relative expirations).
        public var sendTime: Int64

        public init(priority: Int? = nil, expiration: PushExpiration? = nil, collapseID: String? = nil, sendTime: Int64) {
            self.priority = priority
            self.expiration = expiration
            self.collapseID = collapseID
            self.sendTime = sendTime
        }
    }

    /// The `message` object without its target, for `content` sent to `target`.
    public static func object(for content: PushContent, target: FCMTarget,
                              options: Options) throws(NorqError) -> OrderedDictionary<String, JSONValue> {
        try object(for: content, blocks: .for(target), options: options)
    }

    static func object(for content: PushContent, blocks: Blocks,
                       options: Options) throws(NorqError) -> OrderedDictionary<String, JSONValue> {
        if let native = content.nativePayload { return try nativeMessage(native, blocks: blocks) }
        var message: OrderedDictionary<String, JSONValue> = [:]
        let sendsSharedFields = blocks != .apns
        if sendsSharedFields {
            var notification: OrderedDictionary<String, JSONValue> = [:]
            if !content.title.isEmpty { notification["title"] = .string(content.title) }
            if !content.body.isEmpty { notification["body"] = .string(content.body) }
            if let image = content.image, !image.isEmpty { notification["image"] = .string(image) }
            if !notification.isEmpty { message["notification"] = .object(notification) }
            var data = try dataStrings(content.data)
            if let url = content.actionURL, data["url"] == nil { data["url"] = .string(url) }
            if !data.isEmpty { message["data"] = .object(data) }
        } else {
            try checkReservedKeys(content.data.keys)
        }
        let ttl = try ttlSeconds(content, options: options)
        if blocks.contains(.android) { message["android"] = .object(try android(content, options: options, ttl: ttl)) }
        if blocks.contains(.apns) { message["apns"] = .object(try apns(content, options: options, withData: !sendsSharedFields)) }
        if blocks.contains(.webpush) { message["webpush"] = .object(webpush(content, options: options, ttl: ttl)) }
        return message
    }

    // MARK: data

    /// FCM `data` is a map of strings: strings pass, numbers and booleans become their JSON text (`3`, `true`),
    /// `null` becomes `"null"`, objects and arrays their compact JSON encoding. Reserved keys are refused.
    public static func dataStrings(_ data: OrderedDictionary<String, JSONValue>) throws(NorqError) -> OrderedDictionary<String, JSONValue> {
        try checkReservedKeys(data.keys)
        var result: OrderedDictionary<String, JSONValue> = [:]
        result.reserveCapacity(data.count)
        for (key, value) in data {
            if case .string = value { result[key] = value } else { result[key] = .string(value.compactDescription) }
        }
        return result
    }

    /// Whether FCM reserves `key` for itself: `from`, `message_type`, or a key starting with `google` or `gcm`
    /// (case-insensitive).
    public static func isReservedDataKey(_ key: String) -> Bool {
        let lower = key.lowercased()
        return lower == "from" || lower == "message_type" || lower.hasPrefix("google") || lower.hasPrefix("gcm")
    }

    static func checkReservedKeys(_ keys: some Sequence<String>) throws(NorqError) {
        for key in keys where isReservedDataKey(key) {
            throw NorqError(.fcmReservedDataKey,
                            "data key \"\(key.prefix(40))\" is reserved by FCM (from, message_type, google*, gcm*); rename it")
        }
    }

    // MARK: android

    /// The `android.priority` for the content: `android.priority` (`normal` / `high`, lowercase as Norq writes it),
    /// else the send's numeric priority (10 -> HIGH, below -> NORMAL), else none (FCM's default).
    static func androidPriority(_ content: PushContent, options: Options) throws(NorqError) -> String? {
        if let priority = content.android.priority {
            switch priority {
            case "high": return "HIGH"
            case "normal": return "NORMAL"
            default:
                throw NorqError(.fcmInvalidPriority,
                                "android priority \"\(priority.prefix(20))\" is not normal or high (lowercase)")
            }
        }
        guard let numeric = options.priority ?? content.headers.priority else { return nil }
        return numeric >= 10 ? "HIGH" : "NORMAL"
    }

    /// Seconds the message may wait: `android.ttl`, else the expiration (relative to the send time), else nil.
    static func ttlSeconds(_ content: PushContent, options: Options) throws(NorqError) -> Int64? {
        var ttl = content.android.ttl
        if ttl == nil, let expiration = options.expiration ?? content.headers.expiration {
            switch expiration {
            case .immediately: ttl = 0
            case .after(let seconds): ttl = seconds
            case .at(let epoch): ttl = max(0, epoch - options.sendTime)
            }
        }
        if let ttl, !(0...maximumTTL).contains(ttl) {
            throw NorqError(.fcmInvalidTTL, "ttl \(ttl) s is outside FCM's 0...\(maximumTTL) s (four weeks)")
        }
        return ttl
    }

    static func android(_ content: PushContent, options: Options,
                        ttl: Int64?) throws(NorqError) -> OrderedDictionary<String, JSONValue> {
        var android: OrderedDictionary<String, JSONValue> = [:]
        if let collapse = options.collapseID ?? content.headers.collapseID { android["collapse_key"] = .string(collapse) }
        if let priority = try androidPriority(content, options: options) { android["priority"] = .string(priority) }
        if let ttl { android["ttl"] = .string("\(ttl)s") }
        var notification: OrderedDictionary<String, JSONValue> = [:]
        let a = content.android
        if let v = a.channelID { notification["channel_id"] = .string(v) }
        if let v = a.icon { notification["icon"] = .string(v) }
        if let v = a.color { notification["color"] = .string(v) }
        if let v = a.sound { notification["sound"] = .string(v) }
        if let v = a.tag { notification["tag"] = .string(v) }
        if !notification.isEmpty { android["notification"] = .object(notification) }
        return android
    }

    // MARK: apns

    /// `apns.headers` and `apns.payload` as the APNs provider would send them (NorqAPNs's push-type, priority,
    /// expiration and payload rules). With `withData` the custom data rides typed in the payload (an iOS token);
    /// otherwise it travels in `message.data` (strings), which FCM adds beside `aps`.
    static func apns(_ content: PushContent, options: Options,
                     withData: Bool) throws(NorqError) -> OrderedDictionary<String, JSONValue> {
        let pushType = try APNsPushType.resolve(for: content)
        let priority = options.priority ?? content.headers.priority ?? pushType.defaultPriority
        guard pushType.allowedPriorities.contains(priority) else {
            throw NorqError(.apnsBadPriority,
                            "priority \(priority) is not allowed for push type \(pushType); allowed: \(pushType.allowedPriorities.sorted().map(String.init).joined(separator: ", "))")
        }
        var expiration = (options.expiration ?? content.headers.expiration).map { $0.epochSeconds(sendTime: options.sendTime) }
        if pushType.requiresZeroExpiration { expiration = 0 }
        let collapseID = options.collapseID ?? content.headers.collapseID
        if let collapseID, collapseID.utf8.count > 64 {
            throw NorqError(.apnsBadCollapseID, "apns-collapse-id is \(collapseID.utf8.count) bytes; at most 64 are allowed")
        }
        var headers: OrderedDictionary<String, JSONValue> = [:]
        headers["apns-push-type"] = .string(pushType.rawValue)
        headers["apns-priority"] = .string(String(priority))
        if let expiration { headers["apns-expiration"] = .string(String(expiration)) }
        if let collapseID { headers["apns-collapse-id"] = .string(collapseID) }
        var payloadContent = content
        if !withData {
            payloadContent.data = [:]
            payloadContent.actionURL = nil
        }
        let payload = try APNsPayload.object(for: payloadContent, pushType: pushType, sendTime: options.sendTime)
        var apns: OrderedDictionary<String, JSONValue> = ["headers": .object(headers), "payload": payload]
        if let image = content.image, !image.isEmpty { apns["fcm_options"] = ["image": .string(image)] }
        return apns
    }

    // MARK: webpush

    static func webpush(_ content: PushContent, options: Options, ttl: Int64?) -> OrderedDictionary<String, JSONValue> {
        var webpush: OrderedDictionary<String, JSONValue> = [:]
        var headers: OrderedDictionary<String, JSONValue> = [:]
        if let ttl { headers["TTL"] = .string(String(ttl)) }
        let high = content.android.priority == "high" || (options.priority ?? content.headers.priority ?? 0) >= 10
        let normal = content.android.priority == "normal" || (options.priority ?? content.headers.priority).map { $0 < 10 } == true
        if high { headers["Urgency"] = "high" } else if normal { headers["Urgency"] = "normal" }
        // RFC 8030 Topic: at most 32 characters of the URL-safe base64 alphabet; other collapse ids are not sent.
        if let collapse = options.collapseID ?? content.headers.collapseID, isWebPushTopic(collapse) {
            headers["Topic"] = .string(collapse)
        }
        if !headers.isEmpty { webpush["headers"] = .object(headers) }
        var notification: OrderedDictionary<String, JSONValue> = [:]
        if !content.title.isEmpty { notification["title"] = .string(content.title) }
        if !content.body.isEmpty { notification["body"] = .string(content.body) }
        let w = content.web
        if let v = w.icon { notification["icon"] = .string(v) }
        if let v = w.badge { notification["badge"] = .string(v) }
        if let v = w.image ?? content.image { notification["image"] = .string(v) }
        if let v = w.requireInteraction { notification["requireInteraction"] = .bool(v) }
        if let v = w.actions { notification["actions"] = v }
        if let v = w.tag { notification["tag"] = .string(v) }
        if let v = w.renotify { notification["renotify"] = .bool(v) }
        if !notification.isEmpty { webpush["notification"] = .object(notification) }
        // FCM accepts only an HTTPS link.
        if let link = content.actionURL, link.hasPrefix("https://") { webpush["fcm_options"] = ["link": .string(link)] }
        return webpush
    }

    static func isWebPushTopic(_ text: String) -> Bool {
        (1...32).contains(text.utf8.count) && text.utf8.allSatisfy { c in
            (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 45 || c == 95
        }
    }

    // MARK: native (push.json)

    /// A hand-written message: `{"message": {...}}`, or the message object itself, or an APNs payload
    /// (`{"aps": ...}`, iOS tokens only, sent as `apns.payload`). The target comes from the recipient, so the
    /// message must not name one; `data` must hold strings only and no reserved key.
    static func nativeMessage(_ native: JSONValue, blocks: Blocks) throws(NorqError) -> OrderedDictionary<String, JSONValue> {
        guard case .object(var object) = native else {
            throw NorqError(.fcmInvalidMessage, "a native FCM message must be a JSON object")
        }
        if case .object(let inner)? = object["message"], object.count == 1 { object = inner }
        if object["aps"] != nil {
            guard blocks == .apns else {
                throw NorqError(.fcmInvalidMessage, "a native APNs payload ({\"aps\": ...}) can only go to iOS tokens")
            }
            return ["apns": ["payload": .object(object)]]
        }
        for key in object.keys {
            if key == "token" || key == "topic" || key == "condition" {
                throw NorqError(.fcmInvalidMessage,
                                "a native FCM message must not name its target (\"\(key)\"): it comes from the recipient")
            }
            guard messageKeys.contains(key) else {
                throw NorqError(.fcmInvalidMessage,
                                "unknown key \"\(key.prefix(40))\" in a native FCM message; expected \(messageKeys.sorted().joined(separator: ", "))")
            }
        }
        try checkStringMap(object["data"], name: "data")
        if case .object(let android)? = object["android"] {
            try checkStringMap(android["data"], name: "android.data")
            if let priority = android["priority"] {
                guard priority == "NORMAL" || priority == "HIGH" else {
                    throw NorqError(.fcmInvalidPriority, "android.priority must be \"NORMAL\" or \"HIGH\" in a native FCM message")
                }
            }
            if let ttl = android["ttl"] {
                guard case .string(let text) = ttl, text.hasSuffix("s"), let seconds = Double(text.dropLast()),
                      seconds >= 0, seconds <= Double(maximumTTL) else {
                    throw NorqError(.fcmInvalidTTL, "android.ttl must be a duration such as \"3600s\" within four weeks")
                }
            }
        }
        return object
    }

    static func checkStringMap(_ value: JSONValue?, name: String) throws(NorqError) {
        guard let value else { return }
        guard case .object(let map) = value else {
            throw NorqError(.fcmInvalidMessage, "\(name) must be an object of strings")
        }
        try checkReservedKeys(map.keys)
        for (key, item) in map {
            guard case .string = item else {
                throw NorqError(.fcmInvalidMessage,
                                "\(name).\(key.prefix(40)) is not a string; FCM data values are strings only")
            }
        }
    }

    // MARK: wire

    /// A serialized message object (without target) and what follows a registration token in a body made of it.
    struct Encoded: Sendable {
        var bytes: [UInt8]
        /// The token's closing quote, the rest of the message object, the body's closing brace: see `requestBody`.
        var tokenTail: [UInt8]

        init(_ bytes: [UInt8]) {
            self.bytes = bytes
            var tail: [UInt8] = [UInt8(ascii: "\"")]
            tail.reserveCapacity(bytes.count + 3)
            FCMMessage.appendRest(of: bytes, to: &tail)
            self.tokenTail = tail
        }
    }

    static let tokenHead = Array(#"{"message":{"token":""#.utf8)
    static let validateOnlyTokenHead = Array(#"{"validate_only":true,"message":{"token":""#.utf8)

    /// The request body for `message` sent to `target`: the bytes of `body(message:target:validateOnly:)`. For a
    /// registration token that needs no JSON escape (every valid one) it is spliced: the shared head, the token,
    /// the message's `tokenTail`, written by the transport part by part (no array of ~1 KB per token).
    static func requestBody(_ message: Encoded, target: FCMTarget, validateOnly: Bool) -> RequestBody {
        if case .token(var token, _) = target, !token.withUTF8({ ByteScan.mayNeedJSONEscape($0) }) {
            return .spliced(head: validateOnly ? validateOnlyTokenHead : tokenHead, middle: token,
                            tail: message.tokenTail)
        }
        return .bytes(body(message: message.bytes, target: target, validateOnly: validateOnly))
    }

    /// The request body for a message object (without target) sent to `target`:
    /// `{["validate_only":true,]"message":{"<token|topic|condition>":"…",…}}`. `message` is the serialized object.
    static func body(message: [UInt8], target: FCMTarget, validateOnly: Bool) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(message.count + target.value.utf8.count + 48)
        out.append(contentsOf: validateOnly ? #"{"validate_only":true,"message":{""#.utf8 : #"{"message":{""#.utf8)
        out.append(contentsOf: target.key.utf8)
        out.append(contentsOf: #"":"#.utf8)
        JSONValue.writeString(target.value, into: &out)
        appendRest(of: message, to: &out)
        return out
    }

    /// What follows the target in a body: the rest of the message object (after the target, its closing brace
    /// included), then the body's closing brace.
    static func appendRest(of message: [UInt8], to out: inout [UInt8]) {
        if message.count > 2 {
            out.append(UInt8(ascii: ","))
            out.append(contentsOf: message[1...])
        } else {
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "}"))
    }
}

extension NorqError.Code {
    /// `android.priority` is not `normal` or `high` (the code Norq's template checker uses for the same mistake).
    public static let fcmInvalidPriority: Self = "push/invalid-priority"
}
