public import NorqCore

/// A Live Activity `event`: `start` (push-to-start), `update` or `end`.
public struct APNsLiveActivityEvent: Sendable, Hashable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let start = APNsLiveActivityEvent(rawValue: "start")
    public static let update = APNsLiveActivityEvent(rawValue: "update")
    public static let end = APNsLiveActivityEvent(rawValue: "end")
    public var description: String { rawValue }
}

/// The optional alert of a Live Activity push (shown on devices without the Dynamic Island, and on the watch).
public struct APNsLiveActivityAlert: Sendable, Hashable {
    public var title: String
    public var body: String
    public var sound: PushSound?
    public init(title: String = "", body: String = "", sound: PushSound? = nil) {
        self.title = title
        self.body = body
        self.sound = sound
    }
}

extension APNsNotification {
    /// A push-to-start (`event: start`): the `ActivityAttributes` type name and static attributes, the initial
    /// content state, and optionally `input-push-token` (ask the new activity for an update token) or
    /// `input-push-channel` (subscribe it to a broadcast channel); the two are mutually exclusive.
    public static func liveActivityStart(attributesType: String, attributes: JSONValue, contentState: JSONValue,
                                         timestamp: Int64? = nil, staleDate: Int64? = nil,
                                         relevanceScore: Double? = nil, alert: APNsLiveActivityAlert? = nil,
                                         inputPushToken: Bool = false, inputPushChannel: String? = nil) -> APNsNotification {
        liveActivity(.start, contentState: contentState, timestamp: timestamp, staleDate: staleDate, dismissalDate: nil,
                     relevanceScore: relevanceScore, alert: alert) { ios in
            ios.attributesType = attributesType
            ios.attributes = attributes
            ios.inputPushToken = inputPushToken ? true : nil
            ios.inputPushChannel = inputPushChannel
        }
    }

    /// An update of a running activity's content state.
    public static func liveActivityUpdate(contentState: JSONValue, timestamp: Int64? = nil, staleDate: Int64? = nil,
                                          relevanceScore: Double? = nil, alert: APNsLiveActivityAlert? = nil) -> APNsNotification {
        liveActivity(.update, contentState: contentState, timestamp: timestamp, staleDate: staleDate, dismissalDate: nil,
                     relevanceScore: relevanceScore, alert: alert)
    }

    /// Ends an activity, optionally with a final content state and a `dismissal-date` (epoch seconds; the system
    /// keeps an ended activity up to four hours by default).
    public static func liveActivityEnd(contentState: JSONValue? = nil, timestamp: Int64? = nil,
                                       dismissalDate: Int64? = nil, staleDate: Int64? = nil,
                                       relevanceScore: Double? = nil, alert: APNsLiveActivityAlert? = nil) -> APNsNotification {
        liveActivity(.end, contentState: contentState, timestamp: timestamp, staleDate: staleDate,
                     dismissalDate: dismissalDate, relevanceScore: relevanceScore, alert: alert)
    }

    private static func liveActivity(_ event: APNsLiveActivityEvent, contentState: JSONValue?, timestamp: Int64?,
                                      staleDate: Int64?, dismissalDate: Int64?, relevanceScore: Double?,
                                      alert: APNsLiveActivityAlert?,
                                      extra: (inout IOSOverrides) -> Void = { _ in }) -> APNsNotification {
        var content = PushContent()
        content.headers.pushType = APNsPushType.liveactivity.rawValue
        content.ios.event = event.rawValue
        content.ios.contentState = contentState
        content.ios.timestamp = timestamp
        content.ios.staleDate = staleDate
        content.ios.dismissalDate = dismissalDate
        content.ios.relevanceScore = relevanceScore
        if let alert {
            content.title = alert.title
            content.body = alert.body
            content.ios.sound = alert.sound
        }
        extra(&content.ios)
        return APNsNotification(content: content)
    }
}

/// Checks of a hand-written (`push.json`, native) Live Activity payload, which does not go through the typed
/// builder: the same rules, plus a `timestamp` that must be present (nothing fills it in).
enum APNsLiveActivityRules {
    static func validateNative(_ payload: JSONValue) throws(NorqError) {
        guard case .object(let aps)? = payload["aps"] else {
            throw NorqError(.apnsInvalidLiveActivity, "a Live Activity payload needs an \"aps\" object")
        }
        guard case .string(let event)? = aps["event"] else {
            throw NorqError(.apnsInvalidLiveActivity, "a Live Activity payload needs aps.event (start, update or end)")
        }
        guard ["start", "update", "end"].contains(event) else {
            throw NorqError(.apnsInvalidLiveActivity, "Live Activity event must be start, update or end, got \"\(event.prefix(20))\"")
        }
        switch aps["timestamp"] {
        case .int(let value)? where value >= 0: break
        case nil:
            throw NorqError(.apnsInvalidLiveActivity, "a Live Activity payload needs aps.timestamp (epoch seconds); older timestamps are ignored by the device")
        default:
            throw NorqError(.apnsInvalidLiveActivity, "aps.timestamp must be epoch seconds (a non-negative integer)")
        }
        try check(event: event, has: { aps[$0] != nil }, inputPushToken: aps["input-push-token"].map { $0 != .int(0) && $0 != .bool(false) } ?? false)
    }

    /// The rules shared by typed and native payloads.
    static func check(event: String, has: (String) -> Bool, inputPushToken: Bool) throws(NorqError) {
        if event != "start" && (has("attributes") || has("attributes-type")) {
            throw NorqError(.apnsInvalidLiveActivity, "attributes and attributes-type are only allowed with event start, not \(event)")
        }
        if event == "start" && (!has("attributes") || !has("attributes-type")) {
            throw NorqError(.apnsInvalidLiveActivity, "a Live Activity start needs attributes-type and attributes")
        }
        if inputPushToken && has("input-push-channel") {
            throw NorqError(.apnsInvalidLiveActivity, "input-push-token and input-push-channel are mutually exclusive")
        }
        if event != "start" && (has("input-push-token") || has("input-push-channel")) {
            throw NorqError(.apnsInvalidLiveActivity, "input-push-token and input-push-channel are only allowed with event start")
        }
        if event != "end" && !has("content-state") {
            throw NorqError(.apnsInvalidLiveActivity, "a Live Activity \(event) needs content-state")
        }
    }
}
