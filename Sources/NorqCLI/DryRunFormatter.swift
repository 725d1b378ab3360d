import Foundation
import Norq
import NorqCore
import Foundation

/// Text and JSON forms of rendered content and prepared requests (the dry run).
enum DryRunFormatter {
    // MARK: content

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
        if let expiration = content.headers.expiration { headers.append("apns-expiration: \(DryRunJSON.describe(expiration))") }
        if let topic = content.headers.topic { headers.append("apns-topic: \(topic) (the push type's suffix is added)") }
        if !headers.isEmpty {
            out += style.bold("headers:") + "\n"
            for header in headers { out += "  \(header)\n" }
        }
        let ios = DryRunJSON.iosFields(content.ios)
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

    // MARK: requests

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
                    out += DryRunJSON.bodyText(request.body) + "\n"
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
        case .delivered(let delivered): "delivered \(delivered.status)" + (delivered.messageID.map { " message id \($0)" } ?? "")
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
