import Foundation
import NorqCore
import NorqStore
import OrderedCollections

/// The dry run as JSON: rendered content and the exact prepared requests (authorization shown redacted by the
/// provider's `displayHeaders`). One formatter for `norq render --json` / `norq send --dry-run --json` and
/// `POST /v1/render`.
package enum DryRunJSON {
    package static func contentJSON(_ content: PushContent, template: String) -> JSONValue {
        var headers: [(String, JSONValue)] = []
        if let priority = content.headers.priority { headers.append(("apns-priority", .int(Int64(priority)))) }
        if let pushType = content.headers.pushType { headers.append(("apns-push-type", .string(pushType))) }
        if let collapse = content.headers.collapseID { headers.append(("apns-collapse-id", .string(collapse))) }
        if let expiration = content.headers.expiration { headers.append(("apns-expiration", .string(describe(expiration)))) }
        if let topic = content.headers.topic { headers.append(("apns-topic", .string(topic))) }
        var object: [(String, JSONValue)] = [
            ("template", .string(template)),
            ("title", .string(content.title)),
            ("body", .string(content.body)),
            ("image", optional(content.image)),
            ("actionUrl", optional(content.actionURL)),
            ("headers", .object(.init(headers, uniquingKeysWith: { a, _ in a }))),
            ("ios", .object(.init(iosFields(content.ios).map { ($0.0, $0.1) }, uniquingKeysWith: { a, _ in a }))),
            ("data", .object(content.data)),
        ]
        if let native = content.nativePayload { object.append(("nativePayload", native)) }
        return .object(.init(object, uniquingKeysWith: { a, _ in a }))
    }

    package static func describe(_ expiration: PushExpiration) -> String {
        switch expiration {
        case .immediately: "0 (deliver now or never)"
        case .after(let seconds): "\(seconds) s after sending"
        case .at(let epoch): "at \(epoch) (UNIX epoch, sent as written)"
        }
    }

    package static func iosFields(_ ios: IOSOverrides) -> [(String, JSONValue)] {
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
        if let alert = ios.alertText { fields.append(("alert", .string(alert))) }
        if let key = ios.actionLocKey { fields.append(("action-loc-key", .string(key))) }
        if let action = ios.action { fields.append(("action", .string(action))) }
        if let args = ios.urlArgs { fields.append(("url-args", .array(args.map(JSONValue.string)))) }
        return fields
    }

    /// The exact body as a string (payloads are UTF-8 JSON); a binary body (a Web Push `aes128gcm` encrypted
    /// record) as `base64url:` and its base64url text.
    package static func bodyText(_ body: [UInt8]) -> String {
        if let text = String(validating: body, as: UTF8.self) { return text }
        return "base64url:" + Base64URL.encode(body)
    }

    /// - Parameter redactTokens: show device tokens shortened (the server's answers), not whole (the CLI's).
    package static func deliveriesJSON(_ deliveries: [PreparedDelivery], template: String,
                                       redactTokens: Bool = false) -> JSONValue {
        let items: [JSONValue] = deliveries.map { delivery in
            var object: [(String, JSONValue)] = [
                ("recipient", optional(delivery.recipientID)),
                ("target", targetJSON(delivery.target, redactTokens: redactTokens)),
                ("provider", optional(delivery.provider)),
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
                    "environment": optional(request.environment?.rawValue),
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

    package static func targetJSON(_ target: DeliveryTarget, redactTokens: Bool = false) -> JSONValue {
        switch target {
        case .token(let token):
            return ["token": .string(redactTokens ? token.redacted : token.token), "platform": .string(token.platform.rawValue),
                    "environment": optional(token.environment?.rawValue)]
        case .channel(let channel):
            return ["channel": .string(channel.channel), "environment": optional(channel.environment?.rawValue)]
        }
    }

    /// The one JSON form of an outcome's result, for every printer (`norq send --json`, `norq render`'s outcomes,
    /// the server's `outcomes`): a provider-neutral `messageId` (APNs' `apns-id`, FCM's message name, Web Push's
    /// `Location`), and `mayHaveBeenDelivered` on every kind.
    package static func outcomeJSON(_ result: PushOutcome.Result) -> JSONValue {
        var object: OrderedDictionary<String, JSONValue>
        switch result {
        case .delivered(let delivered):
            object = ["kind": .string(delivered.accepted ? "accepted" : "delivered"), "status": .int(Int64(delivered.status)),
                      "messageId": optional(delivered.messageID)]
            if let unique = delivered.uniqueID { object["uniqueId"] = .string(unique) }
        case .rejected(let rejected):
            object = ["kind": "rejected", "status": .int(Int64(rejected.status)), "reason": optional(rejected.reason),
                      "code": .string(rejected.code.rawValue), "class": .string(rejected.classification.rawValue),
                      "messageId": optional(rejected.messageID),
                      "invalidSince": rejected.invalidSince.map { .int($0) } ?? .null,
                      "invalidSinceISO": optional(rejected.invalidSince.map(isoDate(milliseconds:)))]
        case .failed(let error):
            object = ["kind": "failed", "code": .string(error.code.rawValue), "message": .string(error.message)]
        case .skipped(let skipped):
            object = ["kind": "skipped", "code": .string(skipped.code.rawValue), "message": .string(skipped.reason)]
        case .duplicate(let first):
            object = ["kind": "duplicate", "of": outcomeJSON(first)]
        }
        object["mayHaveBeenDelivered"] = .bool(result.mayHaveBeenDelivered)
        return .object(object)
    }

    /// The one JSON form of an outcome with its target (tokens shortened when `redactTokens`).
    package static func outcomeEntryJSON(_ outcome: PushOutcome, redactTokens: Bool) -> JSONValue {
        ["target": targetJSON(outcome.target, redactTokens: redactTokens), "recipient": optional(outcome.recipientID),
         "provider": optional(outcome.provider), "attempts": .int(Int64(outcome.attempts)),
         "requeues": .int(Int64(outcome.requeues)), "result": outcomeJSON(outcome.result)]
    }

    /// The one JSON form of a durable target's row (`norq status --json`, `GET /v1/sends/{id}`); the token shortened.
    package static func rowJSON(_ row: OutboxRow) -> JSONValue {
        [
            "position": .int(Int64(row.position)),
            "token": .string(PushToken.redact(row.identity)),
            "recipient": optional(row.recipientID),
            "provider": optional(row.provider),
            "state": .string(row.state.rawValue),
            "attempts": .int(Int64(row.attempts)),
            "messageId": optional(row.messageID),
            "status": row.last?.status.map { .int(Int64($0)) } ?? .null,
            "code": optional(row.last?.code),
            "reason": optional(row.last?.reason),
            "mayHaveBeenDelivered": .bool(row.mayHaveBeenDelivered),
        ]
    }

    /// `1700000000123` (ms since the epoch, APNs' 410 timestamp) -> `2023-11-14T22:13:20.123Z`.
    package static func isoDate(milliseconds: Int64) -> String {
        let seconds = Double(milliseconds) / 1000
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: seconds))
    }


    static func optional(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
}
