public import NorqCore

/// What one FCM message is addressed to: exactly one of a registration token, a topic or a condition.
public enum FCMTarget: Sendable, Hashable {
    /// A registration token of an app on `platform` (which decides the platform blocks sent).
    case token(String, platform: Platform)
    /// A topic name (`news`), without `/topics/`.
    case topic(String)
    /// A condition over topics: `'dogs' in topics && ('cats' in topics || 'birds' in topics)`.
    case condition(String)

    /// The `message` key naming the target.
    var key: String {
        switch self {
        case .token: "token"
        case .topic: "topic"
        case .condition: "condition"
        }
    }

    var value: String {
        switch self {
        case .token(let token, _): token
        case .topic(let topic): topic
        case .condition(let condition): condition
        }
    }

    /// The target of a device token, checked to look like an FCM registration token: 1-4,096 characters of
    /// letters, digits, `-`, `_`, `:` and `.` (a Web Push endpoint URL or a token with spaces is refused).
    public static func token(_ token: PushToken) throws(NorqError) -> FCMTarget {
        var text = token.token
        let valid = text.withUTF8 { bytes in
            !bytes.isEmpty && bytes.count <= 4096 && bytes.allSatisfy { c in
                (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122)
                    || c == 45 || c == 95 || c == 58 || c == 46
            }
        }
        guard valid else {
            throw NorqError(.fcmInvalidTokenFormat,
                            "\(token.redacted) is not an FCM registration token (letters, digits, '-', '_', ':' and '.' only)")
        }
        return .token(token.token, platform: token.platform)
    }

    /// The target of a channel recipient: a condition when it contains a quote (`'a' in topics`), otherwise a
    /// topic (`news` or `/topics/news`), whose name FCM restricts to `[a-zA-Z0-9-_.~%]{1,900}`.
    public static func channel(_ channel: ChannelRecipient) throws(NorqError) -> FCMTarget {
        let text = channel.channel
        if text.contains("'") {
            guard text.utf8.count <= 4096, text.contains("in topics") else {
                throw NorqError(.fcmInvalidTarget,
                                "an FCM condition must look like 'a' in topics && 'b' in topics, got \"\(text.prefix(60))\"")
            }
            return .condition(text)
        }
        let name = text.hasPrefix("/topics/") ? String(text.dropFirst("/topics/".count)) : text
        let valid = !name.isEmpty && name.utf8.count <= 900 && name.utf8.allSatisfy { c in
            (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122)
                || c == 45 || c == 95 || c == 46 || c == 126 || c == 37
        }
        guard valid else {
            throw NorqError(.fcmInvalidTarget,
                            "\"\(name.prefix(60))\" is not an FCM topic name (1-900 of a-z, A-Z, 0-9, - _ . ~ %)")
        }
        return .topic(name)
    }
}
