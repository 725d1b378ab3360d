public import NorqCore
import Synchronization

extension NorqError.Code {
    /// A broadcast channel id is empty, too long or not base64 (checked before sending).
    public static let apnsInvalidChannelID: Self = "apns/invalid-channel-id"
    /// A `message-storage-policy` that is neither 0 (no messages stored) nor 1 (most recent message stored).
    public static let apnsInvalidStoragePolicy: Self = "apns/invalid-storage-policy"
    /// A broadcast push whose push type is not `liveactivity` (broadcast carries Live Activities only).
    public static let apnsBroadcastRequiresLiveActivity: Self = "apns/broadcast-requires-live-activity"
    /// A channel-management answer APNs should not send (a 201 without `apns-channel-id`, a body that is not JSON).
    public static let apnsUnexpectedChannelResponse: Self = "apns/unexpected-channel-response"
}

/// A broadcast channel's `message-storage-policy`. An open set: APNs documents 0 and 1.
public struct APNsChannelStoragePolicy: Sendable, Hashable, CustomStringConvertible {
    public var rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// `0`: No Messages Stored. A higher publishing budget; every broadcast must carry `apns-expiration: 0`.
    public static let noMessageStored = APNsChannelStoragePolicy(rawValue: 0)
    /// `1`: Most Recent Message Stored. APNs keeps the latest message for devices that come online later.
    public static let mostRecentMessageStored = APNsChannelStoragePolicy(rawValue: 1)

    public var description: String {
        switch rawValue {
        case 0: "0 (no messages stored)"
        case 1: "1 (most recent message stored)"
        default: String(rawValue)
        }
    }

    /// Parses `0`, `1`, `none` / `no-messages-stored`, `most-recent` / `most-recent-message-stored`.
    public static func parse(_ text: String) throws(NorqError) -> APNsChannelStoragePolicy {
        switch text.lowercased() {
        case "0", "none", "no-messages-stored", "no-message-stored", "nostorage", "no-storage": return .noMessageStored
        case "1", "most-recent", "most-recent-message-stored", "mostrecent", "latest": return .mostRecentMessageStored
        default:
            throw NorqError(.apnsInvalidStoragePolicy,
                            "message-storage-policy must be 0 (no messages stored) or 1 (most recent message stored), got \"\(text.prefix(40))\"")
        }
    }

    /// Checks that APNs documents this value.
    public func validated() throws(NorqError) -> APNsChannelStoragePolicy {
        guard rawValue == 0 || rawValue == 1 else {
            throw NorqError(.apnsInvalidStoragePolicy,
                            "message-storage-policy must be 0 or 1, got \(rawValue)")
        }
        return self
    }
}

/// What APNs answered about one channel (create or read), with the `apns-request-id` of the exchange.
public struct APNsChannelInfo: Sendable, Hashable {
    /// The base64 channel id (`apns-channel-id`).
    public var id: String
    /// The storage policy, when APNs reported it (read) or the request set it (create).
    public var storagePolicy: APNsChannelStoragePolicy?
    /// `LiveActivity`, when reported.
    public var pushType: String?
    public var environment: PushEnvironment
    /// `apns-request-id` APNs answered (the one sent, or one it generated).
    public var requestID: String?
    /// HTTP status of the answer (201 create, 200 read).
    public var status: Int

    public init(id: String, storagePolicy: APNsChannelStoragePolicy? = nil, pushType: String? = nil,
                environment: PushEnvironment, requestID: String? = nil, status: Int) {
        self.id = id
        self.storagePolicy = storagePolicy
        self.pushType = pushType
        self.environment = environment
        self.requestID = requestID
        self.status = status
    }

    /// The channel as a router recipient target.
    public func recipient(provider: String? = nil) -> ChannelRecipient {
        ChannelRecipient(channel: id, provider: provider, environment: environment)
    }
}

/// The answer to `GET /1/apps/<bundleId>/all-channels`.
public struct APNsChannelList: Sendable, Hashable {
    /// Channel ids, as APNs listed them.
    public var channels: [String]
    public var environment: PushEnvironment
    public var requestID: String?
    public init(channels: [String], environment: PushEnvironment, requestID: String? = nil) {
        self.channels = channels
        self.environment = environment
        self.requestID = requestID
    }
}

/// The answer to a channel delete (204).
public struct APNsChannelDeletion: Sendable, Hashable {
    public var id: String
    public var environment: PushEnvironment
    public var requestID: String?
    public init(id: String, environment: PushEnvironment, requestID: String? = nil) {
        self.id = id
        self.environment = environment
        self.requestID = requestID
    }
}

/// One channel-management operation.
public enum APNsChannelOperation: Sendable, Hashable {
    case create(APNsChannelStoragePolicy)
    case read(channelID: String)
    case delete(channelID: String)
    case list

    /// `create`, `read`, `delete`, `list`.
    public var name: String {
        switch self {
        case .create: "create"
        case .read: "read"
        case .delete: "delete"
        case .list: "list"
        }
    }
}

/// Storage policies of channels this process created or read, per environment, so that a broadcast to a
/// no-storage channel gets the `apns-expiration: 0` APNs requires. Bounded: the oldest half is forgotten past
/// `capacity` entries.
public final class APNsChannelPolicyCache: Sendable {
    private struct Key: Hashable {
        var environment: PushEnvironment
        var channel: String
    }
    private let entries = Mutex<[Key: APNsChannelStoragePolicy]>([:])
    private let capacity: Int

    public init(capacity: Int = 20_000) { self.capacity = max(1, capacity) }

    /// The known policy of a channel, or nil.
    public func policy(of channel: String, environment: PushEnvironment) -> APNsChannelStoragePolicy? {
        entries.withLock { $0[Key(environment: environment, channel: channel)] }
    }

    /// Remembers (or, with nil, forgets) a channel's policy.
    public func remember(_ channel: String, environment: PushEnvironment, policy: APNsChannelStoragePolicy?) {
        entries.withLock { entries in
            let key = Key(environment: environment, channel: channel)
            guard let policy else {
                entries.removeValue(forKey: key)
                return
            }
            if entries.count >= capacity && entries[key] == nil {
                for old in entries.keys.prefix(max(1, capacity / 2)) { entries.removeValue(forKey: old) }
            }
            entries[key] = policy
        }
    }
}

enum APNsChannelID {
    /// Non-empty, at most 256 characters of the base64 alphabet (standard or URL-safe) with `=` padding only at the end.
    static func validate(_ id: String) throws(NorqError) {
        let utf8 = id.utf8
        var padding = false
        var valid = !utf8.isEmpty && utf8.count <= 256
        if valid {
            for c in utf8 {
                let alphabet = (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57)
                    || c == 43 || c == 47 || c == 45 || c == 95
                if c == 61 {
                    padding = true
                } else if !alphabet || padding {
                    valid = false
                    break
                }
            }
        }
        guard valid else {
            throw NorqError(.apnsInvalidChannelID,
                            "broadcast channel id \"\(id.prefix(12))…\" is not a base64 channel id as APNs returns it")
        }
    }
}
