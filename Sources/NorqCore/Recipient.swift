/// A broadcast channel addressed like a token (APNs iOS 18 broadcast push).
public struct ChannelRecipient: Sendable, Hashable {
    /// The base64 channel id APNs returned at creation.
    public var channel: String
    public var provider: String?
    public var environment: PushEnvironment?
    /// The platform whose routing (`push.<platform>`) applies when `provider` is nil, as for a token (an FCM
    /// topic for Android apps: `android`). Nil: the channel goes to `routing push`, else to the only provider.
    public var platform: Platform?

    public init(channel: String, provider: String? = nil, environment: PushEnvironment? = nil,
                platform: Platform? = nil) {
        self.channel = channel
        self.provider = provider
        self.environment = environment
        self.platform = platform
    }
}

/// A recipient in Norq's JSON shape: `{"id": "u1", "push": {"tokens": [...], "channels": [...]}}`.
public struct Recipient: Sendable, Hashable {
    public var id: String?
    public var tokens: [PushToken]
    public var channels: [ChannelRecipient]

    public init(id: String? = nil, tokens: [PushToken], channels: [ChannelRecipient] = []) {
        self.id = id
        self.tokens = tokens
        self.channels = channels
    }

    /// Decodes one recipient from Norq's JSON shape. Every token is validated.
    public init(json: JSONValue) throws(NorqError) {
        guard case .object(let object) = json else {
            throw NorqError(.invalidRecipient, "a recipient must be a JSON object with a \"push\" key")
        }
        var id: String?
        if case .string(let value)? = object["id"] { id = value }
        guard case .object(let push)? = object["push"] else {
            throw NorqError(.invalidRecipient, "a recipient needs \"push\": {\"tokens\": [...]}")
        }
        var tokens: [PushToken] = []
        if let value = push["tokens"] {
            guard case .array(let items) = value else {
                throw NorqError(.invalidRecipient, "\"push.tokens\" must be an array")
            }
            tokens.reserveCapacity(items.count)
            for item in items { tokens.append(try PushToken(json: item)) }
        }
        var channels: [ChannelRecipient] = []
        if let value = push["channels"] {
            guard case .array(let items) = value else {
                throw NorqError(.invalidRecipient, "\"push.channels\" must be an array")
            }
            for item in items {
                guard case .string(let channel)? = item["channel"], !channel.isEmpty else {
                    throw NorqError(.invalidRecipient, "each channel needs a non-empty \"channel\" id")
                }
                var environment: PushEnvironment?
                if case .string(let env)? = item["environment"] { environment = try PushEnvironment.parse(env) }
                var platform: Platform?
                if case .string(let name)? = item["platform"] {
                    guard Platform.known.contains(Platform(rawValue: name)) else {
                        throw NorqError(.invalidRecipient, "channel platform \"\(name.prefix(40))\" is not ios, android or web")
                    }
                    platform = Platform(rawValue: name)
                }
                channels.append(ChannelRecipient(channel: channel, provider: item["provider"]?.stringValue,
                                                 environment: environment, platform: platform))
            }
        }
        if tokens.isEmpty && channels.isEmpty {
            throw NorqError(.invalidRecipient, "a recipient needs at least one push token or channel")
        }
        self.init(id: id, tokens: tokens, channels: channels)
    }

    /// Decodes a recipient list: one recipient object, an array of them, or `{"recipients": [...]}`.
    public static func list(from json: JSONValue) throws(NorqError) -> [Recipient] {
        switch json {
        case .array(let items):
            var result: [Recipient] = []
            for item in items { result.append(try Recipient(json: item)) }
            return result
        case .object(let object):
            if let inner = object["recipients"] { return try list(from: inner) }
            return [try Recipient(json: json)]
        default:
            throw NorqError(.invalidRecipient, "recipients must be an object or an array of objects")
        }
    }
}
