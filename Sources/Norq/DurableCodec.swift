import NorqCore
import OrderedCollections

/// How durable delivery writes a send's content, options and targets into the store, and reads them back: JSON,
/// versioned, every field of `PushContent` and `RouterSendOptions` that reaches a provider. The content is
/// rendered once at enqueue, so a re-send (by any instance, after any restart) builds the same request.
enum DurableCodec {
    static let version: Int64 = 1

    // MARK: sends

    struct StoredPlan: Sendable {
        var content: PushContent?
        var templateName: String?
        var options: RouterSendOptions
    }

    static func encode(content: PushContent?, templateName: String?, options: RouterSendOptions) -> String {
        var object: OrderedDictionary<String, JSONValue> = ["v": .int(version)]
        object["template"] = templateName.map(JSONValue.string) ?? .null
        object["content"] = content.map(encode) ?? .null
        object["options"] = encode(options)
        return String(decoding: JSONValue.object(object).serialized(), as: UTF8.self)
    }

    static func decodePlan(_ text: String) throws(NorqError) -> StoredPlan {
        let json = try JSONValue(parsing: text)
        guard case .int(let v)? = json["v"], v <= version else {
            throw NorqError(.storeSchemaTooNew, "a stored send was written by a newer norq (content version \(json["v"]?.compactDescription ?? "?"))")
        }
        let content: PushContent? = json["content"].flatMap { $0.isNull ? nil : decodeContent($0) }
        return StoredPlan(content: content, templateName: json["template"]?.stringValue,
                          options: decodeOptions(json["options"] ?? .null))
    }

    // MARK: options

    static func encode(_ options: RouterSendOptions) -> JSONValue {
        var object: OrderedDictionary<String, JSONValue> = [:]
        object["key"] = options.idempotencyKey.map(JSONValue.string) ?? .null
        object["deadlineMs"] = .int(options.deadline.wholeMilliseconds)
        object["environment"] = options.environment.map { .string($0.rawValue) } ?? .null
        object["priority"] = options.priority.map { .int(Int64($0)) } ?? .null
        object["expiration"] = options.expiration.map(encode) ?? .null
        object["collapseID"] = options.collapseID.map(JSONValue.string) ?? .null
        object["collapse"] = .string(options.collapse.rawValue)
        object["strict"] = .bool(options.strict)
        object["sendTime"] = options.sendTime.map(JSONValue.int) ?? .null
        if options.validateOnly { object["validateOnly"] = .bool(true) }
        return .object(object)
    }

    static func decodeOptions(_ json: JSONValue) -> RouterSendOptions {
        var options = RouterSendOptions()
        options.idempotencyKey = json["key"]?.stringValue
        if case .int(let ms)? = json["deadlineMs"] { options.deadline = .milliseconds(ms) }
        options.environment = json["environment"]?.stringValue.map(PushEnvironment.init(rawValue:))
        options.priority = int(json["priority"]).map(Int.init)
        options.expiration = json["expiration"].flatMap(decodeExpiration)
        options.collapseID = json["collapseID"]?.stringValue
        if let mode = json["collapse"]?.stringValue { options.collapse = .init(rawValue: mode) }
        if case .bool(let strict)? = json["strict"] { options.strict = strict }
        options.sendTime = int(json["sendTime"])
        if case .bool(true)? = json["validateOnly"] { options.validateOnly = true }
        return options
    }

    static func encode(_ expiration: PushExpiration) -> JSONValue {
        switch expiration {
        case .after(let seconds): ["after": .int(seconds)]
        case .at(let epoch): ["at": .int(epoch)]
        case .immediately: "immediately"
        }
    }

    static func decodeExpiration(_ json: JSONValue) -> PushExpiration? {
        if json.stringValue == "immediately" { return .immediately }
        if let seconds = int(json["after"]) { return .after(seconds: seconds) }
        if let epoch = int(json["at"]) { return .at(epochSeconds: epoch) }
        return nil
    }

    // MARK: content

    static func encode(_ content: PushContent) -> JSONValue {
        var o: OrderedDictionary<String, JSONValue> = [:]
        o["title"] = .string(content.title)
        o["body"] = .string(content.body)
        put(&o, "image", content.image)
        put(&o, "actionURL", content.actionURL)
        o["ios"] = encode(content.ios)
        var android: OrderedDictionary<String, JSONValue> = [:]
        put(&android, "channelID", content.android.channelID)
        put(&android, "priority", content.android.priority)
        put(&android, "color", content.android.color)
        put(&android, "icon", content.android.icon)
        put(&android, "sound", content.android.sound)
        put(&android, "tag", content.android.tag)
        put(&android, "ttl", content.android.ttl)
        o["android"] = .object(android)
        var web: OrderedDictionary<String, JSONValue> = [:]
        put(&web, "icon", content.web.icon)
        put(&web, "badge", content.web.badge)
        put(&web, "image", content.web.image)
        put(&web, "requireInteraction", content.web.requireInteraction)
        if let actions = content.web.actions { web["actions"] = actions }
        put(&web, "tag", content.web.tag)
        put(&web, "renotify", content.web.renotify)
        o["web"] = .object(web)
        var headers: OrderedDictionary<String, JSONValue> = [:]
        put(&headers, "priority", content.headers.priority.map(Int64.init))
        put(&headers, "pushType", content.headers.pushType)
        put(&headers, "collapseID", content.headers.collapseID)
        if let expiration = content.headers.expiration { headers["expiration"] = encode(expiration) }
        o["headers"] = .object(headers)
        o["data"] = .object(content.data)
        if let native = content.nativePayload { o["nativePayload"] = native }
        put(&o, "templateName", content.templateName)
        return .object(o)
    }

    static func encode(_ ios: IOSOverrides) -> JSONValue {
        var o: OrderedDictionary<String, JSONValue> = [:]
        if let sound = ios.sound {
            var s: OrderedDictionary<String, JSONValue> = ["name": .string(sound.name), "critical": .bool(sound.critical)]
            if let volume = sound.volume { s["volume"] = .double(volume) }
            o["sound"] = .object(s)
        }
        put(&o, "badge", ios.badge.map(Int64.init))
        put(&o, "category", ios.category)
        put(&o, "threadID", ios.threadID)
        put(&o, "mutableContent", ios.mutableContent)
        put(&o, "contentAvailable", ios.contentAvailable)
        put(&o, "interruptionLevel", ios.interruptionLevel)
        put(&o, "subtitle", ios.subtitle)
        if let score = ios.relevanceScore { o["relevanceScore"] = .double(score) }
        put(&o, "targetContentID", ios.targetContentID)
        put(&o, "filterCriteria", ios.filterCriteria)
        put(&o, "launchImage", ios.launchImage)
        put(&o, "titleLocKey", ios.titleLocKey)
        put(&o, "titleLocArgs", ios.titleLocArgs)
        put(&o, "subtitleLocKey", ios.subtitleLocKey)
        put(&o, "subtitleLocArgs", ios.subtitleLocArgs)
        put(&o, "locKey", ios.locKey)
        put(&o, "locArgs", ios.locArgs)
        put(&o, "event", ios.event)
        if let state = ios.contentState { o["contentState"] = state }
        put(&o, "timestamp", ios.timestamp)
        put(&o, "staleDate", ios.staleDate)
        put(&o, "dismissalDate", ios.dismissalDate)
        put(&o, "attributesType", ios.attributesType)
        if let attributes = ios.attributes { o["attributes"] = attributes }
        put(&o, "inputPushToken", ios.inputPushToken)
        put(&o, "inputPushChannel", ios.inputPushChannel)
        return .object(o)
    }

    static func decodeContent(_ json: JSONValue) -> PushContent {
        var content = PushContent(title: json["title"]?.stringValue ?? "", body: json["body"]?.stringValue ?? "")
        content.image = json["image"]?.stringValue
        content.actionURL = json["actionURL"]?.stringValue
        if let ios = json["ios"] { content.ios = decodeIOS(ios) }
        if let a = json["android"] {
            content.android.channelID = a["channelID"]?.stringValue
            content.android.priority = a["priority"]?.stringValue
            content.android.color = a["color"]?.stringValue
            content.android.icon = a["icon"]?.stringValue
            content.android.sound = a["sound"]?.stringValue
            content.android.tag = a["tag"]?.stringValue
            content.android.ttl = int(a["ttl"])
        }
        if let w = json["web"] {
            content.web.icon = w["icon"]?.stringValue
            content.web.badge = w["badge"]?.stringValue
            content.web.image = w["image"]?.stringValue
            content.web.requireInteraction = bool(w["requireInteraction"])
            content.web.actions = w["actions"]
            content.web.tag = w["tag"]?.stringValue
            content.web.renotify = bool(w["renotify"])
        }
        if let h = json["headers"] {
            content.headers.priority = int(h["priority"]).map(Int.init)
            content.headers.pushType = h["pushType"]?.stringValue
            content.headers.collapseID = h["collapseID"]?.stringValue
            content.headers.expiration = h["expiration"].flatMap(decodeExpiration)
        }
        if case .object(let data)? = json["data"] { content.data = data }
        content.nativePayload = json["nativePayload"]
        content.templateName = json["templateName"]?.stringValue
        return content
    }

    static func decodeIOS(_ j: JSONValue) -> IOSOverrides {
        var ios = IOSOverrides()
        if let sound = j["sound"], let name = sound["name"]?.stringValue {
            ios.sound = PushSound(name: name, critical: bool(sound["critical"]) ?? false, volume: double(sound["volume"]))
        }
        ios.badge = int(j["badge"]).map(Int.init)
        ios.category = j["category"]?.stringValue
        ios.threadID = j["threadID"]?.stringValue
        ios.mutableContent = bool(j["mutableContent"])
        ios.contentAvailable = bool(j["contentAvailable"])
        ios.interruptionLevel = j["interruptionLevel"]?.stringValue
        ios.subtitle = j["subtitle"]?.stringValue
        ios.relevanceScore = double(j["relevanceScore"])
        ios.targetContentID = j["targetContentID"]?.stringValue
        ios.filterCriteria = j["filterCriteria"]?.stringValue
        ios.launchImage = j["launchImage"]?.stringValue
        ios.titleLocKey = j["titleLocKey"]?.stringValue
        ios.titleLocArgs = strings(j["titleLocArgs"])
        ios.subtitleLocKey = j["subtitleLocKey"]?.stringValue
        ios.subtitleLocArgs = strings(j["subtitleLocArgs"])
        ios.locKey = j["locKey"]?.stringValue
        ios.locArgs = strings(j["locArgs"])
        ios.event = j["event"]?.stringValue
        ios.contentState = j["contentState"]
        ios.timestamp = int(j["timestamp"])
        ios.staleDate = int(j["staleDate"])
        ios.dismissalDate = int(j["dismissalDate"])
        ios.attributesType = j["attributesType"]?.stringValue
        ios.attributes = j["attributes"]
        ios.inputPushToken = bool(j["inputPushToken"])
        ios.inputPushChannel = j["inputPushChannel"]?.stringValue
        return ios
    }

    // MARK: targets

    static func encode(_ target: DeliveryTarget) -> String {
        var o: OrderedDictionary<String, JSONValue> = [:]
        switch target {
        case .token(let token):
            o["token"] = .string(token.token)
            o["platform"] = .string(token.platform.rawValue)
            put(&o, "provider", token.provider)
            put(&o, "environment", token.environment?.rawValue)
            if let keys = token.keys { o["keys"] = ["p256dh": .string(keys.p256dh), "auth": .string(keys.auth)] }
        case .channel(let channel):
            o["channel"] = .string(channel.channel)
            put(&o, "provider", channel.provider)
            put(&o, "environment", channel.environment?.rawValue)
            put(&o, "platform", channel.platform?.rawValue)
        }
        return String(decoding: JSONValue.object(o).serialized(), as: UTF8.self)
    }

    static func decodeTarget(_ text: String) throws(NorqError) -> DeliveryTarget {
        let json = try JSONValue(parsing: text)
        let environment = json["environment"]?.stringValue.map(PushEnvironment.init(rawValue:))
        if let channel = json["channel"]?.stringValue {
            return .channel(ChannelRecipient(channel: channel, provider: json["provider"]?.stringValue,
                                             environment: environment,
                                             platform: json["platform"]?.stringValue.map(Platform.init(rawValue:))))
        }
        guard let token = json["token"]?.stringValue, let platform = json["platform"]?.stringValue else {
            throw NorqError(.storeFailed, "a stored target has neither a token nor a channel")
        }
        var keys: WebPushKeys?
        if let p256dh = json["keys"]?["p256dh"]?.stringValue, let auth = json["keys"]?["auth"]?.stringValue {
            keys = WebPushKeys(p256dh: p256dh, auth: auth)
        }
        return .token(PushToken(token: token, platform: Platform(rawValue: platform),
                                provider: json["provider"]?.stringValue, environment: environment, keys: keys))
    }

    // MARK: outcomes

    /// The stored form of a final result.
    static func stored(_ result: PushOutcome.Result, messageID: String?, mayHaveBeenDelivered: Bool) -> StoredOutcome {
        switch result {
        case .delivered(let delivered):
            return StoredOutcome(state: .delivered, status: delivered.status, messageID: delivered.messageID ?? messageID,
                                 mayHaveBeenDelivered: mayHaveBeenDelivered)
        case .rejected(let rejected):
            return StoredOutcome(state: .rejected, status: rejected.status, reason: rejected.reason,
                                 code: rejected.code.rawValue, classification: rejected.classification.rawValue,
                                 invalidSince: rejected.invalidSince, messageID: rejected.messageID ?? messageID,
                                 mayHaveBeenDelivered: mayHaveBeenDelivered)
        case .failed(let error):
            return StoredOutcome(state: .failed, reason: error.message, code: error.code.rawValue, messageID: messageID,
                                 mayHaveBeenDelivered: mayHaveBeenDelivered || error.possiblyProcessed)
        case .skipped(let skipped):
            return StoredOutcome(state: .skipped, reason: skipped.reason, code: skipped.code.rawValue,
                                 mayHaveBeenDelivered: mayHaveBeenDelivered)
        case .duplicate(let first):
            return stored(first, messageID: messageID, mayHaveBeenDelivered: mayHaveBeenDelivered)
        }
    }

    /// The outcome a finished row reports (the same shape a send without a store returns).
    static func outcome(of row: OutboxRow) -> PushOutcome? {
        guard row.state.isFinal, let last = row.last, let target = try? decodeTarget(row.target) else { return nil }
        let result: PushOutcome.Result
        switch row.state {
        case .delivered:
            result = .delivered(PushOutcome.Delivered(status: last.status ?? 200, messageID: last.messageID ?? row.messageID))
        case .rejected:
            result = .rejected(PushOutcome.Rejected(
                status: last.status ?? 0, reason: last.reason, code: last.code.map { NorqError.Code($0) } ?? .rejectedByProvider,
                classification: ResponseClass(rawValue: last.classification ?? "permanent"),
                invalidSince: last.invalidSince, messageID: last.messageID ?? row.messageID))
        case .skipped:
            result = .skipped(PushOutcome.Skipped(code: last.code.map { NorqError.Code($0) } ?? .noProvider,
                                                  reason: last.reason ?? ""))
        default:
            var error = NorqError(last.code.map { NorqError.Code($0) } ?? .transportFailed, last.reason ?? "failed")
            error.possiblyProcessed = row.mayHaveBeenDelivered
            result = .failed(error)
        }
        return PushOutcome(target: target, recipientID: row.recipientID, provider: row.provider,
                           attempts: row.attempts, result: result)
    }

    // MARK: helpers

    private static func put(_ o: inout OrderedDictionary<String, JSONValue>, _ key: String, _ value: String?) {
        if let value { o[key] = .string(value) }
    }
    private static func put(_ o: inout OrderedDictionary<String, JSONValue>, _ key: String, _ value: Int64?) {
        if let value { o[key] = .int(value) }
    }
    private static func put(_ o: inout OrderedDictionary<String, JSONValue>, _ key: String, _ value: Bool?) {
        if let value { o[key] = .bool(value) }
    }
    private static func put(_ o: inout OrderedDictionary<String, JSONValue>, _ key: String, _ value: [String]?) {
        if let value { o[key] = .array(value.map(JSONValue.string)) }
    }
    private static func int(_ json: JSONValue?) -> Int64? {
        switch json {
        case .int(let value)?: value
        case .double(let value)?: Int64(exactly: value)
        default: nil
        }
    }
    private static func double(_ json: JSONValue?) -> Double? {
        switch json {
        case .double(let value)?: value
        case .int(let value)?: Double(value)
        default: nil
        }
    }
    private static func bool(_ json: JSONValue?) -> Bool? {
        if case .bool(let value)? = json { return value }
        return nil
    }
    private static func strings(_ json: JSONValue?) -> [String]? {
        guard case .array(let items)? = json else { return nil }
        return items.compactMap(\.stringValue)
    }
}
