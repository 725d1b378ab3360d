public import NorqCore
import OrderedCollections

/// Builds APNs JSON payloads from `PushContent` without Foundation.
public enum APNsPayload {
    /// The payload object for a content and push type. `sendTime` (epoch seconds) fills a Live Activity's
    /// missing `timestamp`. A `nativePayload` is returned as is.
    public static func object(for content: PushContent, pushType: APNsPushType,
                              sendTime: Int64) throws(NorqError) -> JSONValue {
        if let native = content.nativePayload {
            guard case .object = native else {
                throw NorqError(.apnsInvalidPayload, "a native APNs payload must be a JSON object")
            }
            if pushType == .liveactivity { try APNsLiveActivityRules.validateNative(native) }
            return native
        }
        let ios = content.ios
        var aps: OrderedDictionary<String, JSONValue> = [:]

        var alert: OrderedDictionary<String, JSONValue> = [:]
        if !content.title.isEmpty { alert["title"] = .string(content.title) }
        if let subtitle = ios.subtitle, !subtitle.isEmpty { alert["subtitle"] = .string(subtitle) }
        if !content.body.isEmpty { alert["body"] = .string(content.body) }
        if let v = ios.launchImage { alert["launch-image"] = .string(v) }
        if let v = ios.titleLocKey { alert["title-loc-key"] = .string(v) }
        if let v = ios.titleLocArgs { alert["title-loc-args"] = .array(v.map(JSONValue.string)) }
        if let v = ios.subtitleLocKey { alert["subtitle-loc-key"] = .string(v) }
        if let v = ios.subtitleLocArgs { alert["subtitle-loc-args"] = .array(v.map(JSONValue.string)) }
        if let v = ios.locKey { alert["loc-key"] = .string(v) }
        if let v = ios.locArgs { alert["loc-args"] = .array(v.map(JSONValue.string)) }
        if let v = ios.actionLocKey { alert["action-loc-key"] = .string(v) }
        if let v = ios.action { alert["action"] = .string(v) }
        let alertValue: JSONValue?
        if let text = ios.alertText {
            guard alert.isEmpty else {
                throw NorqError(.apnsInvalidPayload,
                                "ios.alert (a plain-string alert) cannot be combined with a title, subtitle, body or other alert keys (\(alert.keys.joined(separator: ", ")))")
            }
            alertValue = .string(text)
        } else {
            alertValue = alert.isEmpty ? nil : .object(alert)
        }

        switch pushType.rawValue {
        case APNsPushType.background.rawValue:
            if alertValue != nil || ios.sound != nil || ios.badge != nil {
                throw NorqError(.apnsInvalidPayload,
                                "a background push cannot carry an alert, sound or badge; use push type alert")
            }
            aps["content-available"] = 1
        case APNsPushType.widgets.rawValue, APNsPushType.controls.rawValue:
            aps["content-changed"] = true
        case APNsPushType.liveactivity.rawValue:
            try liveActivity(ios, into: &aps, sendTime: sendTime)
            if let alertValue { aps["alert"] = alertValue }
            if let sound = ios.sound { aps["sound"] = soundValue(sound) }
            if let v = ios.relevanceScore { aps["relevance-score"] = .double(v) }
        default:
            if let alertValue { aps["alert"] = alertValue }
            if let badge = ios.badge { aps["badge"] = .int(Int64(badge)) }
            if let sound = ios.sound { aps["sound"] = soundValue(sound) }
            if let v = ios.threadID { aps["thread-id"] = .string(v) }
            if let v = ios.category { aps["category"] = .string(v) }
            if ios.contentAvailable == true { aps["content-available"] = 1 }
            if ios.mutableContent == true || (ios.mutableContent == nil && content.image != nil && alertValue != nil) {
                aps["mutable-content"] = 1
            }
            if let v = ios.targetContentID { aps["target-content-id"] = .string(v) }
            if let v = ios.interruptionLevel { aps["interruption-level"] = .string(v) }
            if let v = ios.relevanceScore { aps["relevance-score"] = .double(v) }
            if let v = ios.filterCriteria { aps["filter-criteria"] = .string(v) }
            if let v = ios.urlArgs { aps["url-args"] = .array(v.map(JSONValue.string)) }
        }

        var root: OrderedDictionary<String, JSONValue> = [:]
        root["aps"] = .object(aps)
        for (key, value) in content.data where key != "aps" { root[key] = value }
        if let image = content.image, content.data["image"] == nil { root["image"] = .string(image) }
        if let url = content.actionURL, content.data["url"] == nil { root["url"] = .string(url) }
        return .object(root)
    }

    /// The payload bytes (compact JSON, keys in order).
    public static func encode(_ content: PushContent, pushType: APNsPushType, sendTime: Int64) throws(NorqError) -> [UInt8] {
        try object(for: content, pushType: pushType, sendTime: sendTime).serialized()
    }

    static func soundValue(_ sound: PushSound) -> JSONValue {
        guard sound.critical || sound.volume != nil else { return .string(sound.name) }
        var dict: OrderedDictionary<String, JSONValue> = [:]
        if sound.critical { dict["critical"] = 1 }
        dict["name"] = .string(sound.name)
        if let volume = sound.volume { dict["volume"] = .double(volume) }
        return .object(dict)
    }

    static func liveActivity(_ ios: IOSOverrides, into aps: inout OrderedDictionary<String, JSONValue>,
                             sendTime: Int64) throws(NorqError) {
        guard let event = ios.event else {
            throw NorqError(.apnsInvalidLiveActivity, "a Live Activity push needs an event (start, update or end)")
        }
        guard ["start", "update", "end"].contains(event) else {
            throw NorqError(.apnsInvalidLiveActivity, "Live Activity event must be start, update or end, got \"\(event.prefix(20))\"")
        }
        if event != "start" && (ios.attributes != nil || ios.attributesType != nil) {
            throw NorqError(.apnsInvalidLiveActivity, "attributes and attributes-type are only allowed with event start")
        }
        if event == "start" && (ios.attributes == nil || ios.attributesType == nil) {
            throw NorqError(.apnsInvalidLiveActivity, "a Live Activity start needs attributes-type and attributes")
        }
        if ios.inputPushToken == true && ios.inputPushChannel != nil {
            throw NorqError(.apnsInvalidLiveActivity, "input-push-token and input-push-channel are mutually exclusive")
        }
        if event != "start" && (ios.inputPushToken != nil || ios.inputPushChannel != nil) {
            throw NorqError(.apnsInvalidLiveActivity, "input-push-token and input-push-channel are only allowed with event start")
        }
        if event != "end" && ios.contentState == nil {
            throw NorqError(.apnsInvalidLiveActivity, "a Live Activity \(event) needs content-state")
        }
        aps["timestamp"] = .int(ios.timestamp ?? sendTime)
        aps["event"] = .string(event)
        if let v = ios.contentState { aps["content-state"] = v }
        if let v = ios.staleDate { aps["stale-date"] = .int(v) }
        if let v = ios.dismissalDate { aps["dismissal-date"] = .int(v) }
        if let v = ios.attributesType { aps["attributes-type"] = .string(v) }
        if let v = ios.attributes { aps["attributes"] = v }
        if ios.inputPushToken == true { aps["input-push-token"] = 1 }
        if let v = ios.inputPushChannel { aps["input-push-channel"] = .string(v) }
    }
}
