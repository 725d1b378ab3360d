public import NorqCore
import OrderedCollections

extension PushContent {
    /// An approximate APNs payload for this content (`aps` + custom data), for `payload_bytes` checks.
    ///
    /// This mirrors the usual APNs mapping (alert title/subtitle/body, sound, badge, thread-id, category,
    /// mutable-content, content-available, interruption-level, relevance-score, Live Activity fields, custom data
    /// beside `aps`) but it is not the provider's exact payload: NorqTemplates does not depend on NorqAPNs.
    /// For `push.json` templates it is exactly the native payload.
    public var approximateAPNsPayload: JSONValue {
        if let nativePayload { return nativePayload }
        var aps = OrderedDictionary<String, JSONValue>()
        var alert = OrderedDictionary<String, JSONValue>()
        if !title.isEmpty { alert["title"] = .string(title) }
        if let s = ios.subtitle { alert["subtitle"] = .string(s) }
        if !body.isEmpty { alert["body"] = .string(body) }
        if let k = ios.titleLocKey { alert["title-loc-key"] = .string(k) }
        if let a = ios.titleLocArgs { alert["title-loc-args"] = .array(a.map(JSONValue.string)) }
        if let k = ios.subtitleLocKey { alert["subtitle-loc-key"] = .string(k) }
        if let a = ios.subtitleLocArgs { alert["subtitle-loc-args"] = .array(a.map(JSONValue.string)) }
        if let k = ios.locKey { alert["loc-key"] = .string(k) }
        if let a = ios.locArgs { alert["loc-args"] = .array(a.map(JSONValue.string)) }
        if let l = ios.launchImage { alert["launch-image"] = .string(l) }
        if !alert.isEmpty { aps["alert"] = .object(alert) }
        if let b = ios.badge { aps["badge"] = .int(Int64(b)) }
        if let s = ios.sound {
            if s.critical || s.volume != nil {
                var o: OrderedDictionary<String, JSONValue> = ["critical": .int(s.critical ? 1 : 0), "name": .string(s.name)]
                if let v = s.volume { o["volume"] = .double(v) }
                aps["sound"] = .object(o)
            } else {
                aps["sound"] = .string(s.name)
            }
        }
        if let t = ios.threadID { aps["thread-id"] = .string(t) }
        if let c = ios.category { aps["category"] = .string(c) }
        if ios.contentAvailable == true { aps["content-available"] = .int(1) }
        if ios.mutableContent == true { aps["mutable-content"] = .int(1) }
        if let t = ios.targetContentID { aps["target-content-id"] = .string(t) }
        if let l = ios.interruptionLevel { aps["interruption-level"] = .string(l) }
        if let r = ios.relevanceScore { aps["relevance-score"] = .double(r) }
        if let f = ios.filterCriteria { aps["filter-criteria"] = .string(f) }
        if let e = ios.event { aps["event"] = .string(e) }
        if let cs = ios.contentState { aps["content-state"] = cs }
        if ios.event != nil || ios.timestamp != nil { aps["timestamp"] = .int(ios.timestamp ?? 1_700_000_000) }
        if let s = ios.staleDate { aps["stale-date"] = .int(s) }
        if let d = ios.dismissalDate { aps["dismissal-date"] = .int(d) }
        if let t = ios.attributesType { aps["attributes-type"] = .string(t) }
        if let a = ios.attributes { aps["attributes"] = a }
        var payload = OrderedDictionary<String, JSONValue>()
        payload["aps"] = .object(aps)
        for (k, v) in data where k != "aps" { payload[k] = v }
        return .object(payload)
    }

    /// The UTF-8 size of `approximateAPNsPayload` serialized compactly.
    public var approximatePayloadBytes: Int { approximateAPNsPayload.serialized().count }
}
