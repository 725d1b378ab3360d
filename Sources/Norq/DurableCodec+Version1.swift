import NorqCore

extension DurableCodec {
    /// Sends stored by norq before content version 2 (a hand-written field list): read as they were written.
    /// Nothing writes this form any more; it goes away with the last database that holds such a send.
    enum Version1 {
        static func decodePlan(_ json: JSONValue) -> StoredPlan {
            let content: PushContent? = json["content"].flatMap { $0.isNull ? nil : decodeContent($0) }
            return StoredPlan(content: content, templateName: json["template"]?.stringValue,
                              options: decodeOptions(json["options"] ?? .null))
        }

        static func decodeOptions(_ json: JSONValue) -> RouterSendOptions {
            var options = RouterSendOptions()
            options.idempotencyKey = json["key"]?.stringValue
            if case .int(let ms)? = json["deadlineMs"] { options.deadline = .milliseconds(ms) }
            options.environment = json["environment"]?.stringValue.map(PushEnvironment.init(rawValue:))
            options.priority = int(json["priority"]).map(Int.init)
            options.expiration = json["expiration"].flatMap(decodeExpiration)
            options.collapseID = json["collapseID"]?.stringValue
            if let mode = json["collapse"]?.stringValue { options.collapse = .init(rawValue: mode) }
            if case .bool(let strict)? = json["strict"] { options.strict = strict }
            options.sendTime = int(json["sendTime"])
            if case .bool(true)? = json["validateOnly"] { options.validateOnly = true }
            return options
        }

        static func decodeExpiration(_ json: JSONValue) -> PushExpiration? {
            if json.stringValue == "immediately" { return .immediately }
            if let seconds = int(json["after"]) { return .after(seconds: seconds) }
            if let epoch = int(json["at"]) { return .at(epochSeconds: epoch) }
            return nil
        }

        static func decodeContent(_ json: JSONValue) -> PushContent {
            var content = PushContent(title: json["title"]?.stringValue ?? "", body: json["body"]?.stringValue ?? "")
            content.image = json["image"]?.stringValue
            content.actionURL = json["actionURL"]?.stringValue
            if let ios = json["ios"] { content.ios = decodeIOS(ios) }
            if let a = json["android"] {
                content.android.channelID = a["channelID"]?.stringValue
                content.android.priority = a["priority"]?.stringValue
                content.android.color = a["color"]?.stringValue
                content.android.icon = a["icon"]?.stringValue
                content.android.sound = a["sound"]?.stringValue
                content.android.tag = a["tag"]?.stringValue
                content.android.ttl = int(a["ttl"])
            }
            if let w = json["web"] {
                content.web.icon = w["icon"]?.stringValue
                content.web.badge = w["badge"]?.stringValue
                content.web.image = w["image"]?.stringValue
                content.web.requireInteraction = bool(w["requireInteraction"])
                content.web.actions = w["actions"]
                content.web.tag = w["tag"]?.stringValue
                content.web.renotify = bool(w["renotify"])
            }
            if let h = json["headers"] {
                content.headers.priority = int(h["priority"]).map(Int.init)
                content.headers.pushType = h["pushType"]?.stringValue
                content.headers.collapseID = h["collapseID"]?.stringValue
                content.headers.expiration = h["expiration"].flatMap(decodeExpiration)
            }
            if case .object(let data)? = json["data"] { content.data = data }
            content.nativePayload = json["nativePayload"]
            content.templateName = json["templateName"]?.stringValue
            return content
        }

        static func decodeIOS(_ j: JSONValue) -> IOSOverrides {
            var ios = IOSOverrides()
            if let sound = j["sound"], let name = sound["name"]?.stringValue {
                ios.sound = PushSound(name: name, critical: bool(sound["critical"]) ?? false, volume: double(sound["volume"]))
            }
            ios.badge = int(j["badge"]).map(Int.init)
            ios.category = j["category"]?.stringValue
            ios.threadID = j["threadID"]?.stringValue
            ios.mutableContent = bool(j["mutableContent"])
            ios.contentAvailable = bool(j["contentAvailable"])
            ios.interruptionLevel = j["interruptionLevel"]?.stringValue
            ios.subtitle = j["subtitle"]?.stringValue
            ios.relevanceScore = double(j["relevanceScore"])
            ios.targetContentID = j["targetContentID"]?.stringValue
            ios.filterCriteria = j["filterCriteria"]?.stringValue
            ios.launchImage = j["launchImage"]?.stringValue
            ios.titleLocKey = j["titleLocKey"]?.stringValue
            ios.titleLocArgs = strings(j["titleLocArgs"])
            ios.subtitleLocKey = j["subtitleLocKey"]?.stringValue
            ios.subtitleLocArgs = strings(j["subtitleLocArgs"])
            ios.locKey = j["locKey"]?.stringValue
            ios.locArgs = strings(j["locArgs"])
            ios.event = j["event"]?.stringValue
            ios.contentState = j["contentState"]
            ios.timestamp = int(j["timestamp"])
            ios.staleDate = int(j["staleDate"])
            ios.dismissalDate = int(j["dismissalDate"])
            ios.attributesType = j["attributesType"]?.stringValue
            ios.attributes = j["attributes"]
            ios.inputPushToken = bool(j["inputPushToken"])
            ios.inputPushChannel = j["inputPushChannel"]?.stringValue
            return ios
        }

        private static func int(_ json: JSONValue?) -> Int64? {
            switch json {
            case .int(let value)?: value
            case .double(let value)?: Int64(exactly: value)
            default: nil
            }
        }
        private static func double(_ json: JSONValue?) -> Double? {
            switch json {
            case .double(let value)?: value
            case .int(let value)?: Double(value)
            default: nil
            }
        }
        private static func bool(_ json: JSONValue?) -> Bool? {
            if case .bool(let value)? = json { return value }
            return nil
        }
        private static func strings(_ json: JSONValue?) -> [String]? {
            guard case .array(let items)? = json else { return nil }
            return items.compactMap(\.stringValue)
        }
    }
}
