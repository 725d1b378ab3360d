public import NorqCore
public import OrderedCollections

/// A typed way to build APNs notifications in code, one constructor per push type. Produces a `PushContent`
/// that `APNsProvider.prepare` (or the router) sends like a rendered template.
public struct APNsNotification: Sendable, Hashable {
    /// The provider-neutral content, with `headers.pushType` set.
    public var content: PushContent

    public init(content: PushContent) { self.content = content }

    private init(type: APNsPushType, _ build: (inout PushContent) -> Void = { _ in }) {
        var content = PushContent()
        content.headers.pushType = type.rawValue
        build(&content)
        self.content = content
    }

    /// A visible alert.
    public static func alert(title: String = "", subtitle: String? = nil, body: String = "", sound: PushSound? = nil,
                             badge: Int? = nil, threadID: String? = nil, category: String? = nil,
                             interruptionLevel: String? = nil, image: String? = nil, url: String? = nil,
                             data: OrderedDictionary<String, JSONValue> = [:]) -> APNsNotification {
        APNsNotification(type: .alert) { c in
            c.title = title
            c.body = body
            c.ios.subtitle = subtitle
            c.ios.sound = sound
            c.ios.badge = badge
            c.ios.threadID = threadID
            c.ios.category = category
            c.ios.interruptionLevel = interruptionLevel
            c.image = image
            c.actionURL = url
            c.data = data
        }
    }

    /// A silent background update (`content-available: 1`, priority 5).
    public static func background(data: OrderedDictionary<String, JSONValue> = [:]) -> APNsNotification {
        APNsNotification(type: .background) { c in
            c.ios.contentAvailable = true
            c.data = data
        }
    }

    /// A PushKit VoIP push: the whole payload as the app defines it.
    public static func voip(_ payload: OrderedDictionary<String, JSONValue>) -> APNsNotification {
        APNsNotification(type: .voip) { c in c.nativePayload = .object(payload) }
    }

    /// A Push to Talk push (priority 10, expiration 0).
    public static func pushToTalk(_ payload: OrderedDictionary<String, JSONValue> = [:]) -> APNsNotification {
        APNsNotification(type: .pushtotalk) { c in
            c.data = payload
            c.headers.expiration = .immediately
        }
    }

    /// A watchOS complication update.
    public static func complication(data: OrderedDictionary<String, JSONValue> = [:]) -> APNsNotification {
        APNsNotification(type: .complication) { c in c.data = data }
    }

    /// A File Provider change signal.
    public static func fileProvider(data: OrderedDictionary<String, JSONValue> = [:]) -> APNsNotification {
        APNsNotification(type: .fileprovider) { c in c.data = data }
    }

    /// A Location Push Service Extension query (token auth only).
    public static func location(data: OrderedDictionary<String, JSONValue> = [:]) -> APNsNotification {
        APNsNotification(type: .location) { c in c.data = data }
    }

    /// An MDM check-in request (certificate auth only): `{"mdm": "<PushMagic>"}`.
    public static func mdm(pushMagic: String) -> APNsNotification {
        APNsNotification(type: .mdm) { c in c.nativePayload = .object(["mdm": .string(pushMagic)]) }
    }

    /// A WidgetKit reload (`content-changed: true`, token auth only).
    public static func widgets() -> APNsNotification { APNsNotification(type: .widgets) }

    /// A control reload (`content-changed: true`).
    public static func controls() -> APNsNotification { APNsNotification(type: .controls) }

    /// A Live Activity `start`, `update` or `end`. `timestamp` defaults to the send time.
    public static func liveActivity(event: String, contentState: JSONValue?, timestamp: Int64? = nil,
                                    staleDate: Int64? = nil, dismissalDate: Int64? = nil,
                                    attributesType: String? = nil, attributes: JSONValue? = nil,
                                    inputPushToken: Bool = false, inputPushChannel: String? = nil,
                                    alertTitle: String = "", alertBody: String = "",
                                    relevanceScore: Double? = nil) -> APNsNotification {
        APNsNotification(type: .liveactivity) { c in
            c.ios.event = event
            c.ios.contentState = contentState
            c.ios.timestamp = timestamp
            c.ios.staleDate = staleDate
            c.ios.dismissalDate = dismissalDate
            c.ios.attributesType = attributesType
            c.ios.attributes = attributes
            c.ios.inputPushToken = inputPushToken ? true : nil
            c.ios.inputPushChannel = inputPushChannel
            c.ios.relevanceScore = relevanceScore
            c.title = alertTitle
            c.body = alertBody
        }
    }

    /// Sets `apns-priority`.
    public func priority(_ priority: Int) -> APNsNotification {
        var copy = self
        copy.content.headers.priority = priority
        return copy
    }

    /// Sets `apns-expiration`.
    public func expiration(_ expiration: PushExpiration) -> APNsNotification {
        var copy = self
        copy.content.headers.expiration = expiration
        return copy
    }

    /// Sets `apns-collapse-id`.
    public func collapseID(_ id: String) -> APNsNotification {
        var copy = self
        copy.content.headers.collapseID = id
        return copy
    }
}
