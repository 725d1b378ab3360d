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
            // Eight bytes at a time (this runs for every FCM token sent).
            !bytes.isEmpty && bytes.count <= 4096 && ByteScan.allTokenCharacters(bytes)
        }
        guard valid else {
            throw NorqError(.fcmInvalidTokenFormat,
                            "\(token.redacted) is not an FCM registration token (letters, digits, '-', '_', ':' and '.' only)")
        }
        return .token(token.token, platform: token.platform)
    }

    /// The most topics one condition may name (FCM: "up to five topics in your conditional expression").
    public static let maximumConditionTopics = 5

    /// The target of a channel recipient: a condition when it contains a quote (`'a' in topics`), otherwise a
    /// topic (`news` or `/topics/news`), whose name FCM restricts to `[a-zA-Z0-9-_.~%]{1,900}`.
    public static func channel(_ channel: ChannelRecipient) throws(NorqError) -> FCMTarget {
        let text = channel.channel
        if text.contains("'") {
            try checkCondition(text)
            return .condition(text)
        }
        let name = text.hasPrefix("/topics/") ? String(text.dropFirst("/topics/".count)) : text
        guard isTopicName(Substring(name)) else {
            throw NorqError(.fcmInvalidTarget,
                            "\"\(name.prefix(60))\" is not an FCM topic name (1-900 of a-z, A-Z, 0-9, - _ . ~ %)")
        }
        return .topic(name)
    }
}

extension FCMTarget {
    /// `[a-zA-Z0-9-_.~%]{1,900}`: FCM's topic name rule.
    static func isTopicName(_ name: Substring) -> Bool {
        !name.isEmpty && name.utf8.count <= 900 && name.utf8.allSatisfy { c in
            (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122)
                || c == 45 || c == 95 || c == 46 || c == 126 || c == 37
        }
    }

    /// Checks an FCM condition: terms `'<topic>' in topics` joined by `&&` / `||`, each term possibly negated
    /// with `!`, grouped with balanced parentheses; every topic name valid; at most
    /// ``maximumConditionTopics`` topics; at most 4,096 bytes. Anything else is `fcm/invalid-target`.
    static func checkCondition(_ text: String) throws(NorqError) {
        func invalid(_ why: String) -> NorqError {
            NorqError(.fcmInvalidTarget, "the FCM condition \"\(text.prefix(60))\" \(why)",
                      hint: "write terms like 'news' in topics joined by && or ||, with ! and parentheses, at most \(maximumConditionTopics) topics")
        }
        guard text.utf8.count <= 4096 else { throw invalid("is longer than 4,096 bytes") }
        let bytes = Array(text.utf8)
        var index = 0
        var topics = 0
        var depth = 0
        var expectTerm = true  // a term (or `!` / `(`) comes next; otherwise an operator or `)`
        func skipSpaces() { while index < bytes.count, bytes[index] == 32 { index += 1 } }
        func consume(_ literal: String) -> Bool {
            let word = Array(literal.utf8)
            guard index + word.count <= bytes.count, Array(bytes[index..<(index + word.count)]) == word else { return false }
            index += word.count
            return true
        }
        while true {
            skipSpaces()
            guard index < bytes.count else { break }
            if expectTerm {
                if bytes[index] == UInt8(ascii: "!") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "(") { index += 1; depth += 1; continue }
                guard bytes[index] == UInt8(ascii: "'"),
                      let close = bytes[(index + 1)...].firstIndex(of: UInt8(ascii: "'")) else {
                    throw invalid("expects a 'topic' in topics term at byte \(index + 1)")
                }
                let name = Substring(String(decoding: bytes[(index + 1)..<close], as: UTF8.self))
                guard isTopicName(name) else { throw invalid("names '\(name.prefix(40))', not an FCM topic name") }
                index = close + 1
                skipSpaces()
                guard consume("in"), index < bytes.count, bytes[index] == 32 else {
                    throw invalid("expects 'in topics' after '\(name.prefix(40))'")
                }
                skipSpaces()
                guard consume("topics") else { throw invalid("expects 'in topics' after '\(name.prefix(40))'") }
                topics += 1
                guard topics <= maximumConditionTopics else {
                    throw invalid("names more than \(maximumConditionTopics) topics")
                }
                expectTerm = false
            } else if bytes[index] == UInt8(ascii: ")") {
                guard depth > 0 else { throw invalid("closes a parenthesis it never opened") }
                depth -= 1
                index += 1
            } else if consume("&&") || consume("||") {
                expectTerm = true
            } else {
                throw invalid("expects && or || at byte \(index + 1)")
            }
        }
        guard !expectTerm, topics > 0 else { throw invalid("ends where a term is expected") }
        guard depth == 0 else { throw invalid("leaves a parenthesis open") }
    }
}
