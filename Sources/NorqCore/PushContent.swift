public import OrderedCollections

/// The APNs `sound` value: a file name, or the critical-alert dictionary.
public struct PushSound: Sendable, Hashable, Codable {
    public var name: String
    public var critical: Bool
    /// 0.0 ... 1.0, only meaningful for critical sounds.
    public var volume: Double?
    public init(name: String, critical: Bool = false, volume: Double? = nil) {
        self.name = name
        self.critical = critical
        self.volume = volume
    }
}

/// When APNs should stop trying to deliver (`apns-expiration`).
public enum PushExpiration: Sendable, Hashable, Codable {
    /// Seconds after the send time.
    case after(seconds: Int64)
    /// An absolute UNIX epoch in seconds.
    case at(epochSeconds: Int64)
    /// `0`: deliver once, do not store.
    case immediately

    /// The header value for a send at `now` (epoch seconds).
    public func epochSeconds(sendTime now: Int64) -> Int64 {
        switch self {
        case .after(let seconds): return now + seconds
        case .at(let epoch): return epoch
        case .immediately: return 0
        }
    }
}

/// Per-message delivery headers, provider-neutral where possible (the names follow APNs).
public struct PushHeaders: Sendable, Hashable, Codable {
    /// `apns-priority`: 1, 5 or 10.
    public var priority: Int?
    /// `apns-push-type` raw value (`alert`, `background`, `liveactivity`, ...).
    public var pushType: String?
    /// `apns-collapse-id` (at most 64 bytes).
    public var collapseID: String?
    public var expiration: PushExpiration?
    /// `apns-topic`: the app (bundle id) this notification is for, when not the provider's own; the push
    /// type's topic suffix (`.voip`, `.push-type.liveactivity`, ...) is still applied by the provider.
    public var topic: String? = nil

    public init(priority: Int? = nil, pushType: String? = nil, collapseID: String? = nil,
                expiration: PushExpiration? = nil) {
        self.priority = priority
        self.pushType = pushType
        self.collapseID = collapseID
        self.expiration = expiration
    }
}

/// iOS-specific fields, mapped by the APNs provider into `aps`.
public struct IOSOverrides: Sendable, Hashable, Codable {
    public var sound: PushSound?
    public var badge: Int?
    public var category: String?
    public var threadID: String?
    public var mutableContent: Bool?
    public var contentAvailable: Bool?
    /// `passive`, `active`, `time-sensitive` or `critical`.
    public var interruptionLevel: String?
    public var subtitle: String?
    /// 0.0 ... 1.0.
    public var relevanceScore: Double?
    public var targetContentID: String?
    public var filterCriteria: String?
    public var launchImage: String?
    public var titleLocKey: String?
    public var titleLocArgs: [String]?
    public var subtitleLocKey: String?
    public var subtitleLocArgs: [String]?
    public var locKey: String?
    public var locArgs: [String]?
    /// `alert.action-loc-key`: the localization key of the alert's action button title.
    public var actionLocKey: String?
    /// `alert.action`: the label of the action button (Safari web push).
    public var action: String?
    /// `url-args` (Safari web push): values filled into the website's URL format string.
    public var urlArgs: [String]?
    /// A plain-string `alert` (`"alert": "Hello"`, as node-apn's `notification.alert = "Hello"`); excludes a
    /// title, subtitle, body and the alert dictionary's keys.
    public var alertText: String?
    // Live Activities
    /// `start`, `update` or `end`.
    public var event: String?
    public var contentState: JSONValue?
    /// Epoch seconds; the provider fills in the send time when absent.
    public var timestamp: Int64?
    public var staleDate: Int64?
    public var dismissalDate: Int64?
    public var attributesType: String?
    public var attributes: JSONValue?
    public var inputPushToken: Bool?
    public var inputPushChannel: String?

    public init() {}
}

/// Android (FCM) fields.
public struct AndroidOverrides: Sendable, Hashable, Codable {
    public var channelID: String?
    /// `normal` or `high`.
    public var priority: String?
    public var color: String?
    public var icon: String?
    public var sound: String?
    public var tag: String?
    /// Seconds.
    public var ttl: Int64?
    public init() {}
}

/// Web Push fields.
public struct WebOverrides: Sendable, Hashable, Codable {
    public var icon: String?
    public var badge: String?
    public var image: String?
    public var requireInteraction: Bool?
    public var actions: JSONValue?
    public var tag: String?
    public var renotify: Bool?
    public init() {}
}

/// A rendered notification, provider-neutral: what a template produces and what providers consume.
public struct PushContent: Sendable, Hashable, Codable {
    public var title: String
    public var body: String
    public var image: String?
    public var actionURL: String?
    public var ios: IOSOverrides
    public var android: AndroidOverrides
    public var web: WebOverrides
    public var headers: PushHeaders
    /// Custom application data, delivered beside `aps` / in FCM `data` / in the web payload.
    public var data: OrderedDictionary<String, JSONValue>
    /// A whole payload written by hand (`push.json`); when set, providers send it as is.
    public var nativePayload: JSONValue?
    /// The template it came from, for logs.
    public var templateName: String?

    public init(title: String = "", body: String = "", image: String? = nil, actionURL: String? = nil,
                ios: IOSOverrides = IOSOverrides(), android: AndroidOverrides = AndroidOverrides(),
                web: WebOverrides = WebOverrides(), headers: PushHeaders = PushHeaders(),
                data: OrderedDictionary<String, JSONValue> = [:], nativePayload: JSONValue? = nil,
                templateName: String? = nil) {
        self.title = title
        self.body = body
        self.image = image
        self.actionURL = actionURL
        self.ios = ios
        self.android = android
        self.web = web
        self.headers = headers
        self.data = data
        self.nativePayload = nativePayload
        self.templateName = templateName
    }
}
