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
            for (index, item) in items.enumerated() {
                do throws(NorqError) {
                    tokens.append(try PushToken(json: item))
                } catch {
                    throw error.at(path: "push.tokens[\(index)]")
                }
            }
        }
        var channels: [ChannelRecipient] = []
        if let value = push["channels"] {
            guard case .array(let items) = value else {
                throw NorqError(.invalidRecipient, "\"push.channels\" must be an array")
            }
            for (index, item) in items.enumerated() {
                guard case .string(let channel)? = item["channel"], !channel.isEmpty else {
                    throw NorqError(.invalidRecipient, "each channel needs a non-empty \"channel\" id")
                        .at(path: "push.channels[\(index)]")
                }
                var environment: PushEnvironment?
                if case .string(let env)? = item["environment"] {
                    do throws(NorqError) {
                        environment = try PushEnvironment.parse(env)
                    } catch {
                        throw error.at(path: "push.channels[\(index)].environment")
                    }
                }
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
            for (index, item) in items.enumerated() {
                do throws(NorqError) {
                    result.append(try Recipient(json: item))
                } catch {
                    throw error.at(path: "[\(index)]")
                }
            }
            return result
        case .object(let object):
            if let inner = object["recipients"] {
                do throws(NorqError) {
                    return try list(from: inner)
                } catch {
                    throw error.at(path: "recipients")
                }
            }
            return [try Recipient(json: json)]
        default:
            throw NorqError(.invalidRecipient, "recipients must be an object or an array of objects")
        }
    }
}

extension NorqError {
    /// The error with the JSON path of the value it is about put before its message (`[3].push.tokens[1]: ...`),
    /// joined to a path already there: a recipient error names the element to fix.
    public func at(path: String) -> NorqError {
        var error = self
        if let first = message.first, first == "[" || message.hasPrefix("push.") || message.hasPrefix("recipients") {
            error.message = path + (first == "[" ? "" : ".") + message
        } else {
            error.message = path + ": " + message
        }
        return error
    }
}
