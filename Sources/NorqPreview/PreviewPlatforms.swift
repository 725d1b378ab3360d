import Norq
import NorqCore
import OrderedCollections

/// The notification as each platform draws it: the fields each one shows and where it cuts text. The cuts are
/// the usual ones of a phone held upright and a desktop browser (characters of a proportional font, so an
/// estimate): an iOS lock-screen banner shows one line of title and of subtitle and four lines of body; an
/// Android notification, collapsed, one line of title and one of body; Chrome's desktop notification about two
/// lines of title and three of body.
package enum PreviewPlatforms {
    /// The characters shown before the ellipsis, per platform and field.
    package struct Cuts: Sendable {
        package var title: Int
        package var subtitle: Int
        package var body: Int
    }

    package static let iosCuts = Cuts(title: 38, subtitle: 38, body: 178)
    package static let androidCuts = Cuts(title: 40, subtitle: 40, body: 48)
    package static let webCuts = Cuts(title: 60, subtitle: 0, body: 120)

    /// `text` cut at `limit` characters with an ellipsis (whitespace before the cut trimmed), and whether it was.
    package static func cut(_ text: String, _ limit: Int) -> (text: String, truncated: Bool) {
        // Line breaks are drawn as spaces on a banner.
        let flat = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        guard flat.count > limit, limit > 0 else { return (flat, false) }
        var kept = String(flat.prefix(limit))
        while kept.last?.isWhitespace == true { kept.removeLast() }
        return (kept + "…", true)
    }

    static func field(_ text: String?, _ limit: Int) -> JSONValue {
        guard let text, !text.isEmpty else { return .null }
        let (shown, truncated) = cut(text, limit)
        return ["full": .string(text), "shown": .string(shown), "truncated": .bool(truncated), "limit": .int(Int64(limit))]
    }

    /// The views of the three platforms. Each is drawn from the request its routed provider would send when that
    /// request says it (`aps.alert`, FCM's `android.notification`), else from the rendered content.
    static func views(_ content: PushContent, requests: [PreviewRenderer.PlatformRequest]) -> JSONValue {
        func routed(_ platform: Platform) -> PreviewRenderer.PlatformRequest? {
            requests.first { $0.platform == platform && $0.delivery.request != nil }
        }
        func shownFields(_ platform: Platform) -> [String: String] {
            guard case .object(let fields)? = routed(platform).flatMap({ shown(in: $0.bodyJSON) }) else { return [:] }
            var result: [String: String] = [:]
            for (key, value) in fields { if case .string(let text) = value { result[key] = text } }
            return result
        }
        /// What the routed provider of `platform` decided instead of a request (it refuses this content), if so.
        func refused(_ platform: Platform) -> JSONValue {
            guard let first = requests.first(where: { $0.platform == platform }),
                  case .noRequest(let result) = first.delivery.plan else { return .null }
            return DryRunJSON.outcomeJSON(result)
        }
        let ios = shownFields(.ios)
        let iosTitle = ios["title"] ?? content.title
        let iosSubtitle = ios["subtitle"] ?? content.ios.subtitle
        let iosBody = ios["body"] ?? content.body
        let silent = content.ios.contentAvailable == true && iosTitle.isEmpty && iosBody.isEmpty
        var iosView: OrderedDictionary<String, JSONValue> = [
            "title": field(iosTitle, iosCuts.title),
            "subtitle": field(iosSubtitle, iosCuts.subtitle),
            "body": field(iosBody, iosCuts.body),
            "threadId": optional(content.ios.threadID),
            "interruptionLevel": .string(content.ios.interruptionLevel ?? "active"),
            "badge": content.ios.badge.map { .int(Int64($0)) } ?? .null,
            "sound": optional(content.ios.sound.map { $0.name + ($0.critical ? " (critical)" : "") }),
            "category": optional(content.ios.category),
            "image": optional(content.image),
            "silent": .bool(silent),
            "source": .string(routed(.ios).map { "request of \($0.delivery.provider ?? "?")" } ?? "rendered content"),
        ]
        if silent { iosView["note"] = "background push (content-available): the system shows nothing" }
        iosView["refused"] = refused(.ios)

        let android = shownFields(.android)
        let androidTitle = android["title"] ?? content.title, androidBody = android["body"] ?? content.body
        var androidView: OrderedDictionary<String, JSONValue> = [
            "title": field(androidTitle, androidCuts.title),
            "body": field(androidBody, androidCuts.body),
            "channelId": optional(android["channel_id"] ?? content.android.channelID),
            "priority": .string(content.android.priority ?? "normal"),
            "image": optional(android["image"] ?? content.image),
            "color": optional(content.android.color),
            "icon": optional(content.android.icon),
            "tag": optional(content.android.tag),
            "source": .string(routed(.android).map { "request of \($0.delivery.provider ?? "?")" } ?? "rendered content"),
        ]
        if androidTitle.isEmpty && androidBody.isEmpty {
            androidView["note"] = "data message (no notification block): the app decides what to show, if anything"
        }
        androidView["refused"] = refused(.android)

        var webView: OrderedDictionary<String, JSONValue> = [
            "title": field(content.title, webCuts.title),
            "body": field(content.body, webCuts.body),
            "icon": optional(content.web.icon),
            "badge": optional(content.web.badge),
            "image": optional(content.web.image ?? content.image),
            "actionUrl": optional(content.actionURL),
            "requireInteraction": .bool(content.web.requireInteraction ?? false),
            "tag": optional(content.web.tag),
            "source": "rendered content (the Web Push body is encrypted)",
        ]
        if content.title.isEmpty && content.body.isEmpty {
            webView["note"] = "no title or body: the site's service worker decides what to show, if anything"
        }
        webView["refused"] = refused(.web)
        return ["ios": .object(iosView), "android": .object(androidView), "web": .object(webView)]
    }

    /// What a request body makes the device show, read from the body itself: APNs' `aps.alert` (a string is the
    /// body), FCM's `message.notification` overlaid by `message.android.notification` or, for an Apple device
    /// through FCM, `message.apns.payload.aps.alert`; an Expo message's `title`, `subtitle`, `body`,
    /// `richContent.image` and `channelId`. Nil when the body says nothing shown (or is not JSON).
    static func shown(in body: JSONValue?) -> JSONValue? {
        guard let body else { return nil }
        var fields: OrderedDictionary<String, JSONValue> = [:]
        func take(_ alert: JSONValue?) {
            switch alert {
            case .string(let text)?: fields["body"] = .string(text)
            case .object(let object)?:
                for key in ["title", "subtitle", "body", "image", "channel_id"] {
                    if case .string(let text)? = object[key] { fields[key] = .string(text) }
                }
            default: break
            }
        }
        if let aps = body["aps"] {
            take(aps["alert"])
        } else if let message = body["message"] {
            take(message["notification"])
            take(message["android"]?["notification"])
            take(message["apns"]?["payload"]?["aps"]?["alert"])
        } else if body["to"] != nil {
            // An Expo message: its own fields, named as Expo names them.
            take(body)
            if case .string(let image)? = body["richContent"]?["image"] { fields["image"] = .string(image) }
            if case .string(let channel)? = body["channelId"] { fields["channel_id"] = .string(channel) }
        }
        return fields.isEmpty ? nil : .object(fields)
    }

    static func optional(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
}
