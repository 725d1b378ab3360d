import NorqCore
import NorqStore
import OrderedCollections

/// How durable delivery writes a send's content, options and targets into the store, and reads them back: JSON,
/// versioned, every field of `PushContent` and `RouterSendOptions` that reaches a provider. The content is
/// rendered once at enqueue, so a re-send (by any instance, after any restart) builds the same request.
enum DurableCodec {
    /// The version of a stored send's content. 1: a hand-written field list (it dropped the iOS `alert` text,
    /// `action`, `action-loc-key`, `url-args` and both topics; still read, see `DurableCodec+Version1.swift`).
    /// 2: the synthesized `Codable` form of `StoredPlan`, so every field of `PushContent` and `RouterSendOptions`
    /// is stored by construction.
    static let version: Int64 = 2

    // MARK: sends

    /// What the store keeps of a send: its rendered content once, the template's name and the send's options.
    struct StoredPlan: Sendable, Hashable, Codable {
        var v: Int64 = DurableCodec.version
        var template: String?
        var content: PushContent?
        var options: RouterSendOptions
        /// The trace context of the request that enqueued the send, as its tracer injected it (W3C `traceparent`,
        /// `tracestate` for OpenTelemetry; bounded by `DictionaryInjector`): the worker's claim and attempt spans are
        /// its children (issue 33). Absent when the send was not traced; not part of the idempotency fingerprint.
        var trace: [String: String]?

        init(content: PushContent?, templateName: String?, options: RouterSendOptions,
             trace: [String: String]? = nil) {
            self.template = templateName
            self.content = content
            self.options = options
            self.trace = trace
        }

        var templateName: String? { template }
    }

    static func encode(content: PushContent?, templateName: String?, options: RouterSendOptions,
                       trace: [String: String]? = nil) throws(NorqError) -> String {
        let plan = StoredPlan(content: content, templateName: templateName, options: options)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(1_024)
        do {
            try JSONValueEncoder().encode(plan, into: &bytes)
        } catch {
            throw NorqError(.storeFailed, "a send could not be stored: \(error.message)")
        }
        if let trace, !trace.isEmpty { appendTrace(trace, to: &bytes) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Writes `trace` as the stored plan's last member, `"trace":{...}` (keys sorted), into its encoded object:
    /// what `StoredPlan`'s `Codable` form writes for it (`decodePlan` reads it so), without the generic encoder's
    /// dictionary path, which cost a traced `norq serve` a measurable share of a send (Benchmarks/README.md,
    /// "Stop 37").
    static func appendTrace(_ trace: [String: String], to bytes: inout [UInt8]) {
        guard bytes.last == UInt8(ascii: "}") else { return }
        bytes.removeLast()
        if bytes.last != UInt8(ascii: "{") { bytes.append(UInt8(ascii: ",")) }
        bytes.append(contentsOf: #""trace":{"#.utf8)
        func member(_ key: String, _ value: String) {
            JSONValue.string(key).write(into: &bytes)
            bytes.append(UInt8(ascii: ":"))
            JSONValue.string(value).write(into: &bytes)
        }
        if trace.count == 1, let (key, value) = trace.first {
            member(key, value)  // W3C `traceparent` alone: the usual case, without sorting
        } else {
            var first = true
            for key in trace.keys.sorted() {
                if !first { bytes.append(UInt8(ascii: ",")) }
                first = false
                member(key, trace[key] ?? "")
            }
        }
        bytes.append(contentsOf: "}}".utf8)
    }

    static func decodePlan(_ text: String) throws(NorqError) -> StoredPlan {
        let json = try JSONValue(parsing: text)
        guard case .int(let v)? = json["v"], v <= version else {
            throw NorqError(.storeSchemaTooNew, "a stored send was written by a newer norq (content version \(json["v"]?.compactDescription ?? "?"))")
        }
        if v < 2 { return Version1.decodePlan(json) }
        do {
            return try JSONValueDecoder().decode(StoredPlan.self, from: json)
        } catch {
            throw NorqError(.storeFailed, "a stored send could not be read: \(error.message)")
        }
    }

    /// The bytes a send's content and options add to its idempotency fingerprint (the same encoding as stored).
    static func fingerprint<T: Encodable>(_ value: T, into bytes: inout [UInt8]) throws(NorqError) {
        try JSONValueEncoder().encode(value, into: &bytes)
    }

    // MARK: targets

    /// The separator of the stored target's fields (a control character no platform, provider or environment name
    /// and no Web Push key contains; a value that does is stored in the JSON form instead).
    private static let separator: Character = "\u{1F}"

    /// A target as the store keeps it beside its identity (`DeliveryTarget.identity`, stored once, hex-packed by the
    /// segment codec): everything but the token or channel id. A token: `t` and its platform, provider,
    /// environment, Web Push keys, separated by U+001F, trailing absent fields left out (`tios` for a plain iOS
    /// token); a channel: `c` and its provider, environment, platform. Values that cannot be written so (empty, or
    /// containing the separator) fall back to the whole target as JSON, which is also how rows written before
    /// segments (stop 30) stored every target; `decodeTarget` reads both.
    static func encode(_ target: DeliveryTarget) -> String {
        let kind: Character
        let fields: [String?]
        switch target {
        case .token(let token):
            kind = "t"
            fields = [token.platform.rawValue, token.provider, token.environment?.rawValue, token.keys?.p256dh,
                      token.keys?.auth]
        case .channel(let channel):
            kind = "c"
            fields = [channel.provider, channel.environment?.rawValue, channel.platform?.rawValue]
        }
        var present = fields
        while let last = present.last, last == nil { present.removeLast() }
        for case let field? in present where field.isEmpty || field.contains(separator) {
            return json(target)
        }
        return String(kind) + present.map { $0 ?? "" }.joined(separator: String(separator))
    }

    /// The JSON form of a target (the token or channel inside).
    static func json(_ target: DeliveryTarget) -> String {
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

    /// The target of a stored row: `text` (`encode(_:)`'s form, or JSON) with the row's `identity`.
    static func decodeTarget(_ text: String, identity: String) throws(NorqError) -> DeliveryTarget {
        guard let kind = text.utf8.first, kind != UInt8(ascii: "{") else { return try decodeTarget(json: text) }
        // The common case, a token with a platform only (`tios`): no fields to split (an array per target less).
        if kind == UInt8(ascii: "t"), text.utf8.count > 1, !text.utf8.contains(0x1F) {
            return .token(PushToken(token: identity, platform: Platform(rawValue: String(text.dropFirst()))))
        }
        let fields = text.dropFirst().split(separator: separator, omittingEmptySubsequences: false)
            .map { $0.isEmpty ? nil : String($0) }
        func field(_ index: Int) -> String? { index < fields.count ? fields[index] : nil }
        switch kind {
        case UInt8(ascii: "t"):
            guard let platform = field(0) else { break }
            var keys: WebPushKeys?
            if let p256dh = field(3), let auth = field(4) { keys = WebPushKeys(p256dh: p256dh, auth: auth) }
            return .token(PushToken(token: identity, platform: Platform(rawValue: platform), provider: field(1),
                                    environment: field(2).map(PushEnvironment.init(rawValue:)), keys: keys))
        case UInt8(ascii: "c"):
            guard identity.hasPrefix(channelPrefix) else { break }
            return .channel(ChannelRecipient(channel: String(identity.dropFirst(channelPrefix.count)), provider: field(0),
                                             environment: field(1).map(PushEnvironment.init(rawValue:)),
                                             platform: field(2).map(Platform.init(rawValue:))))
        default:
            break
        }
        throw NorqError(.storeFailed, "a stored target could not be read")
    }

    /// The prefix of a channel's identity (`DeliveryTarget.identity`).
    private static let channelPrefix = "channel:"

    static func decodeTarget(json text: String) throws(NorqError) -> DeliveryTarget {
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

    // MARK: message ids

    /// `rows` with the message id each attempt sent: the row's own (rows enqueued before stop 31 stored it), else
    /// the one made from the send's key and the row's identity, as the worker makes it. A delivered row's answer
    /// keeps its own id when the provider chose one (FCM names its messages), else the one sent.
    static func withMessageIDs(_ rows: [OutboxRow], of send: StoredSend) -> [OutboxRow] {
        guard rows.contains(where: { $0.messageID == nil }),
              let key = (try? decodePlan(send.content))?.options.idempotencyKey else { return rows }
        return rows.map { row in
            guard row.messageID == nil else { return row }
            var row = row
            let id = RequestID.make(idempotencyKey: key, token: row.identity)
            row.messageID = id
            // An answer's id: only of a target that was sent (not one finished at enqueue, nor skipped).
            if var last = row.last, last.messageID == nil, row.attempts > 0, last.state != .skipped {
                last.messageID = id
                row.last = last
            }
            return row
        }
    }

    // MARK: outcomes

    /// The stored form of a final result.
    static func stored(_ result: PushOutcome.Result, messageID: String?, mayHaveBeenDelivered: Bool) -> StoredOutcome {
        switch result {
        case .delivered(let delivered):
            return StoredOutcome(state: .delivered, status: delivered.status,
                                 classification: delivered.accepted ? StoredOutcome.acceptedClassification : nil,
                                 messageID: delivered.messageID ?? messageID, mayHaveBeenDelivered: mayHaveBeenDelivered)
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
        guard row.state.isFinal, let last = row.last, let target = try? decodeTarget(row.target, identity: row.identity) else { return nil }
        let result: PushOutcome.Result
        switch row.state {
        case .delivered, .accepted:
            // `accepted`: waiting for its receipt in a receipt segment; its last answer is the accepted one.
            result = .delivered(PushOutcome.Delivered(status: last.status ?? 200, messageID: last.messageID ?? row.messageID,
                                                      accepted: last.isAccepted || row.state == .accepted))
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

    private static func put(_ o: inout OrderedDictionary<String, JSONValue>, _ key: String, _ value: String?) {
        if let value { o[key] = .string(value) }
    }
}
