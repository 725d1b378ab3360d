import Norq
import NorqCore
import Foundation

/// Text and JSON forms of rendered content and prepared requests (the dry run).
enum DryRunFormatter {
    // MARK: content

    static func contentJSON(_ content: PushContent, template: String) -> JSONValue {
        var headers: [(String, JSONValue)] = []
        if let priority = content.headers.priority { headers.append(("apns-priority", .int(Int64(priority)))) }
        if let pushType = content.headers.pushType { headers.append(("apns-push-type", .string(pushType))) }
        if let collapse = content.headers.collapseID { headers.append(("apns-collapse-id", .string(collapse))) }
        if let expiration = content.headers.expiration { headers.append(("apns-expiration", .string(describe(expiration)))) }
        var object: [(String, JSONValue)] = [
            ("template", .string(template)),
            ("title", .string(content.title)),
            ("body", .string(content.body)),
            ("image", .optional(content.image)),
            ("actionUrl", .optional(content.actionURL)),
            ("headers", .object(.init(headers, uniquingKeysWith: { a, _ in a }))),
            ("ios", .object(.init(iosFields(content.ios).map { ($0.0, $0.1) }, uniquingKeysWith: { a, _ in a }))),
            ("data", .object(content.data)),
        ]
        if let native = content.nativePayload { object.append(("nativePayload", native)) }
        return .object(.init(object, uniquingKeysWith: { a, _ in a }))
    }

    static func contentText(_ content: PushContent, template: String, style: Style) -> String {
        var out = style.bold("template: ") + template + "\n"
        func line(_ key: String, _ value: String) { out += style.bold(key + ": ") + value + "\n" }
        line("title", content.title.isEmpty ? style.dim("(none)") : content.title)
        line("body", content.body.isEmpty ? style.dim("(none)") : content.body)
        if let image = content.image { line("image", image) }
        if let url = content.actionURL { line("action url", url) }
        var headers: [String] = []
        if let priority = content.headers.priority { headers.append("apns-priority: \(priority)") }
        if let pushType = content.headers.pushType { headers.append("apns-push-type: \(pushType)") }
        if let collapse = content.headers.collapseID { headers.append("apns-collapse-id: \(collapse)") }
        if let expiration = content.headers.expiration { headers.append("apns-expiration: \(describe(expiration))") }
        if !headers.isEmpty {
            out += style.bold("headers:") + "\n"
            for header in headers { out += "  \(header)\n" }
        }
        let ios = iosFields(content.ios)
        if !ios.isEmpty {
            out += style.bold("ios:") + "\n"
            for (key, value) in ios { out += "  \(key): \(value.compactDescription)\n" }
        }
        if !content.data.isEmpty {
            out += style.bold("data:") + "\n"
            for (key, value) in content.data { out += "  \(key): \(value.compactDescription)\n" }
        }
        if let native = content.nativePayload {
            out += style.bold("payload (push.json):") + "\n" + indent(native.prettyPrinted(), by: 2) + "\n"
        }
        return out
    }

    static func describe(_ expiration: PushExpiration) -> String {
        switch expiration {
        case .immediately: "0 (deliver now or never)"
        case .after(let seconds): "\(seconds) s after sending"
        case .at(let epoch): "at \(epoch) (epoch seconds)"
        }
    }

    static func iosFields(_ ios: IOSOverrides) -> [(String, JSONValue)] {
        var fields: [(String, JSONValue)] = []
        if let sound = ios.sound { fields.append(("sound", .string(sound.name + (sound.critical ? " (critical)" : "")))) }
        if let badge = ios.badge { fields.append(("badge", .int(Int64(badge)))) }
        if let subtitle = ios.subtitle { fields.append(("subtitle", .string(subtitle))) }
        if let category = ios.category { fields.append(("category", .string(category))) }
        if let thread = ios.threadID { fields.append(("thread-id", .string(thread))) }
        if let level = ios.interruptionLevel { fields.append(("interruption-level", .string(level))) }
        if let mutable = ios.mutableContent { fields.append(("mutable-content", .bool(mutable))) }
        if let available = ios.contentAvailable { fields.append(("content-available", .bool(available))) }
        if let score = ios.relevanceScore { fields.append(("relevance-score", .double(score))) }
        if let target = ios.targetContentID { fields.append(("target-content-id", .string(target))) }
        if let event = ios.event { fields.append(("event", .string(event))) }
        if let state = ios.contentState { fields.append(("content-state", state)) }
        return fields
    }

    // MARK: requests

    /// The exact body as a string (payloads are UTF-8 JSON); a binary body (a Web Push `aes128gcm` encrypted
    /// record) as `base64url:` and its base64url text.
    static func bodyText(_ body: [UInt8]) -> String {
        if let text = String(validating: body, as: UTF8.self) { return text }
        return "base64url:" + Data(body).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func deliveriesJSON(_ deliveries: [PreparedDelivery], template: String) -> JSONValue {
        let items: [JSONValue] = deliveries.map { delivery in
            var object: [(String, JSONValue)] = [
                ("recipient", .optional(delivery.recipientID)),
                ("target", targetJSON(delivery.target)),
                ("provider", .optional(delivery.provider)),
                ("routing", .string(delivery.routing)),
            ]
            switch delivery.plan {
            case .request(let request):
                let headers: [JSONValue] = request.displayHeaders.map { ["name": .string($0.name), "value": .string($0.value)] }
                let body = (try? JSONValue(parsing: request.body)) ?? .string(bodyText(request.body))
                object.append(("request", .object([
                    "method": .string(request.method),
                    "url": .string(request.url),
                    "authority": .string(request.authority),
                    "path": .string(request.path),
                    "environment": .optional(request.environment?.rawValue),
                    "headers": .array(headers),
                    "body": body,
                    "bodyText": .string(bodyText(request.body)),
                    "bodyBytes": .int(Int64(request.body.count)),
                    "payloadLimit": request.payloadLimit.map { .int(Int64($0)) } ?? .null,
                ])))
            case .noRequest(let result):
                object.append(("outcome", outcomeJSON(result)))
            }
            return .object(.init(object, uniquingKeysWith: { a, _ in a }))
        }
        let requests = deliveries.count { $0.request != nil }
        return [
            "template": .string(template),
            "requests": .int(Int64(requests)),
            "withoutRequest": .int(Int64(deliveries.count - requests)),
            "deliveries": .array(items),
        ]
    }

    static func targetJSON(_ target: DeliveryTarget) -> JSONValue {
        switch target {
        case .token(let token):
            return ["token": .string(token.token), "platform": .string(token.platform.rawValue),
                    "environment": .optional(token.environment?.rawValue)]
        case .channel(let channel):
            return ["channel": .string(channel.channel), "environment": .optional(channel.environment?.rawValue)]
        }
    }

    static func outcomeJSON(_ result: PushOutcome.Result) -> JSONValue {
        switch result {
        case .delivered(let delivered):
            return ["kind": "delivered", "status": .int(Int64(delivered.status)), "apnsId": .optional(delivered.messageID)]
        case .rejected(let rejected):
            return ["kind": "rejected", "status": .int(Int64(rejected.status)), "reason": .optional(rejected.reason),
                    "code": .string(rejected.code.rawValue), "class": .string(rejected.classification.rawValue)]
        case .failed(let error):
            return ["kind": "failed", "code": .string(error.code.rawValue), "message": .string(error.message),
                    "mayHaveBeenDelivered": .bool(error.possiblyProcessed)]
        case .skipped(let skipped):
            return ["kind": "skipped", "code": .string(skipped.code.rawValue), "message": .string(skipped.reason)]
        case .duplicate(let first):
            return ["kind": "duplicate", "of": outcomeJSON(first)]
        }
    }

    static func deliveriesText(_ deliveries: [PreparedDelivery], template: String, style: Style) -> String {
        var out = ""
        for (index, delivery) in deliveries.enumerated() {
            if index > 0 { out += "\n" }
            let who = delivery.recipientID.map { " (recipient \($0))" } ?? ""
            out += style.bold("# \(index + 1)/\(deliveries.count) \(label(delivery.target))\(who)") + "\n"
            out += "routing: " + (delivery.provider.map { "\($0) via \(delivery.routing)" } ?? delivery.routing) + "\n"
            switch delivery.plan {
            case .request(let request):
                out += style.cyan("\(request.method) \(request.url)") + "\n"
                for header in request.displayHeaders { out += "\(header.name): \(header.value)\n" }
                let limit = request.payloadLimit.map { " of \(grouped($0)) allowed" } ?? ""
                out += "\n" + style.dim("body: \(grouped(request.body.count)) bytes\(limit)") + "\n"
                if let json = try? JSONValue(parsing: request.body) {
                    out += json.prettyPrinted() + "\n"
                } else {
                    out += bodyText(request.body) + "\n"
                }
            case .noRequest(let result):
                out += style.yellow("no request: ") + outcomeText(result) + "\n"
            }
        }
        return out
    }

    static func label(_ target: DeliveryTarget) -> String {
        switch target {
        case .token(let token): "\(token.platform.rawValue) token \(token.redacted)"
        case .channel(let channel): "channel \(channel.channel)"
        }
    }

    static func outcomeText(_ result: PushOutcome.Result) -> String {
        switch result {
        case .delivered(let delivered): "delivered \(delivered.status)" + (delivered.messageID.map { " apns-id \($0)" } ?? "")
        case .rejected(let rejected):
            "\(rejected.status) \(rejected.reason ?? "") [\(rejected.code.rawValue), \(rejected.classification.rawValue)]"
        case .failed(let error): "error[\(error.code.rawValue)]: \(error.message)"
        case .skipped(let skipped): "skipped [\(skipped.code.rawValue)]: \(skipped.reason)"
        case .duplicate(let first): "duplicate of an earlier send: " + outcomeText(first)
        }
    }

    static func indent(_ text: String, by spaces: Int) -> String {
        let pad = String(repeating: " ", count: spaces)
        return text.split(separator: "\n", omittingEmptySubsequences: false).map { pad + $0 }.joined(separator: "\n")
    }
}
