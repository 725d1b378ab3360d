public import NorqCore

/// Which authentication a push type accepts.
public struct APNsAuthConstraint: Sendable, Hashable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Token (JWT) or certificate.
    public static let any = APNsAuthConstraint(rawValue: "any")
    /// Token (JWT) auth only (`location`, `widgets`).
    public static let tokenOnly = APNsAuthConstraint(rawValue: "token-only")
    /// Certificate auth only (`mdm`).
    public static let certificateOnly = APNsAuthConstraint(rawValue: "certificate-only")
    public var description: String { rawValue }
}

/// An `apns-push-type`: its topic suffix, priorities, auth constraint and payload limit.
/// An open set modelled as a struct with static members for the eleven documented types.
public struct APNsPushType: Sendable, Hashable, CustomStringConvertible {
    /// The `apns-push-type` header value.
    public var rawValue: String
    /// Appended to the bundle id to form `apns-topic` (`.voip`, `.push-type.liveactivity`, ...).
    public var topicSuffix: String
    /// Priorities APNs accepts for this type.
    public var allowedPriorities: Set<Int>
    /// Priority sent when neither the content nor the options name one.
    public var defaultPriority: Int
    public var authConstraint: APNsAuthConstraint
    /// Largest payload in bytes (4096; 5120 for VoIP).
    public var payloadLimit: Int
    /// True when APNs requires `apns-expiration: 0` (`pushtotalk`); sent as 0 when absent.
    public var requiresZeroExpiration: Bool

    public init(rawValue: String, topicSuffix: String = "", allowedPriorities: Set<Int> = [1, 5, 10],
                defaultPriority: Int = 10, authConstraint: APNsAuthConstraint = .any, payloadLimit: Int = 4096,
                requiresZeroExpiration: Bool = false) {
        self.rawValue = rawValue
        self.topicSuffix = topicSuffix
        self.allowedPriorities = allowedPriorities
        self.defaultPriority = defaultPriority
        self.authConstraint = authConstraint
        self.payloadLimit = payloadLimit
        self.requiresZeroExpiration = requiresZeroExpiration
    }

    public var description: String { rawValue }

    /// The visible notification: alert, sound, badge.
    public static let alert = APNsPushType(rawValue: "alert")
    /// A silent `content-available` update; priority must be 5.
    public static let background = APNsPushType(rawValue: "background", allowedPriorities: [5], defaultPriority: 5)
    /// PushKit VoIP; 5120-byte payload.
    public static let voip = APNsPushType(rawValue: "voip", topicSuffix: ".voip", payloadLimit: 5120)
    /// watchOS complication update.
    public static let complication = APNsPushType(rawValue: "complication", topicSuffix: ".complication")
    /// File Provider change signal.
    public static let fileprovider = APNsPushType(rawValue: "fileprovider", topicSuffix: ".pushkit.fileprovider")
    /// MDM check-in request; certificate auth only (the topic is the MDM certificate's UID, set as `bundleId`).
    public static let mdm = APNsPushType(rawValue: "mdm", authConstraint: .certificateOnly)
    /// Location Push Service Extension query; token auth only.
    public static let location = APNsPushType(rawValue: "location", topicSuffix: ".location-query",
                                              allowedPriorities: [5, 10], authConstraint: .tokenOnly)
    /// Live Activity start / update / end.
    public static let liveactivity = APNsPushType(rawValue: "liveactivity", topicSuffix: ".push-type.liveactivity",
                                                  allowedPriorities: [5, 10])
    /// Push to Talk; priority 10 and `apns-expiration: 0`.
    public static let pushtotalk = APNsPushType(rawValue: "pushtotalk", topicSuffix: ".voip-ptt", allowedPriorities: [10],
                                                requiresZeroExpiration: true)
    /// WidgetKit reload (`content-changed`); token auth only.
    public static let widgets = APNsPushType(rawValue: "widgets", topicSuffix: ".push-type.widgets",
                                             allowedPriorities: [5, 10], defaultPriority: 5, authConstraint: .tokenOnly)
    /// Control Center control reload (`content-changed`).
    public static let controls = APNsPushType(rawValue: "controls", topicSuffix: ".push-type.controls",
                                              allowedPriorities: [5, 10])

    /// The eleven documented push types.
    public static let all: [APNsPushType] = [
        .alert, .background, .voip, .complication, .fileprovider, .mdm, .location, .liveactivity, .pushtotalk,
        .widgets, .controls,
    ]

    /// The known type with this header value, or nil.
    public static func named(_ rawValue: String) -> APNsPushType? {
        all.first(where: { $0.rawValue == rawValue })
    }

    /// The `apns-topic` for an app.
    public func topic(bundleID: String) -> String { bundleID + topicSuffix }

    /// The `apns-topic` for a per-notification topic (the frontmatter's `headers.apns-topic` or the send's
    /// `topic` option): the suffix of this push type is appended unless the topic already ends with it. A topic
    /// that is not a bundle identifier, or that ends with another push type's suffix, is `apns/invalid-topic`.
    public func topic(given topic: String) throws(NorqError) -> String {
        guard Self.isTopic(topic) else {
            throw NorqError(.apnsInvalidTopic,
                            "apns-topic \"\(topic.prefix(80))\" is not a bundle identifier (letters, digits, \".\" and \"-\", at most 255 bytes)")
        }
        if !topicSuffix.isEmpty, topic.hasSuffix(topicSuffix) { return topic }
        if let other = Self.all.first(where: { $0 != self && !$0.topicSuffix.isEmpty && topic.hasSuffix($0.topicSuffix)
                                              && !topicSuffix.hasSuffix($0.topicSuffix) }) {
            throw NorqError(.apnsInvalidTopic,
                            "apns-topic \"\(topic.prefix(80))\" ends with the suffix of push type \(other) (\(other.topicSuffix)), but the push type is \(self)",
                            hint: "give the app's bundle id; the suffix of the push type is added for you")
        }
        return topic + topicSuffix
    }

    /// A bundle identifier as APNs topics use it: 1-255 bytes of ASCII letters, digits, `.`, `-` and `_`
    /// (`_` appears in some MDM UIDs), not starting or ending with `.`.
    public static func isTopic(_ topic: String) -> Bool {
        let bytes = Array(topic.utf8)
        guard !bytes.isEmpty, bytes.count <= 255, bytes.first != 46, bytes.last != 46 else { return false }
        return bytes.allSatisfy { ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57)
            || $0 == 46 || $0 == 45 || $0 == 95 }
    }

    /// The push type of a content: the one it names (`headers.pushType`), else inferred from the content
    /// (a Live Activity event -> liveactivity; `content-available` without anything visible -> background;
    /// otherwise alert).
    public static func resolve(for content: PushContent) throws(NorqError) -> APNsPushType {
        if let name = content.headers.pushType {
            guard let type = named(name) else {
                throw NorqError(.apnsInvalidPushType,
                                "unknown apns-push-type \"\(name.prefix(40))\"; expected one of \(all.map(\.rawValue).joined(separator: ", "))")
            }
            return type
        }
        if let native = content.nativePayload {
            guard case .object(let aps)? = native["aps"] else { return .alert }
            if aps["event"] != nil { return .liveactivity }
            if aps["content-changed"] != nil { return .widgets }
            let visible = aps["alert"] != nil || aps["sound"] != nil || aps["badge"] != nil
            if !visible, let available = aps["content-available"], available != .int(0) { return .background }
            return .alert
        }
        if content.ios.event != nil { return .liveactivity }
        let visible = !content.title.isEmpty || !content.body.isEmpty || content.ios.sound != nil
            || content.ios.badge != nil || content.ios.subtitle != nil || content.ios.locKey != nil
            || content.ios.titleLocKey != nil || content.ios.alertText != nil
        if !visible && content.ios.contentAvailable == true { return .background }
        return .alert
    }
}
