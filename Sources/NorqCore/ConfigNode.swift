/// A YAML node with its source location, provider-neutral: `NorqConfig` builds it from YAML and each
/// provider type parses its own `config:` block from it.
public struct ConfigNode: Sendable, Hashable {
    public indirect enum Value: Sendable, Hashable {
        case null
        /// A scalar as written; `quoted` when it was a quoted string (so `"true"` is not a boolean).
        case scalar(String, quoted: Bool)
        case sequence([ConfigNode])
        /// Key nodes and value nodes in document order.
        case mapping([(key: ConfigNode, value: ConfigNode)])

        public static func == (lhs: Value, rhs: Value) -> Bool {
            switch (lhs, rhs) {
            case (.null, .null): return true
            case let (.scalar(a, qa), .scalar(b, qb)): return a == b && qa == qb
            case let (.sequence(a), .sequence(b)): return a == b
            case let (.mapping(a), .mapping(b)):
                return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
            default: return false
            }
        }

        public func hash(into hasher: inout Hasher) {
            switch self {
            case .null: hasher.combine(0)
            case .scalar(let s, let q): hasher.combine(s); hasher.combine(q)
            case .sequence(let items): hasher.combine(items)
            case .mapping(let pairs):
                for pair in pairs { hasher.combine(pair.key); hasher.combine(pair.value) }
            }
        }
    }

    public var value: Value
    public var location: SourceLocation

    public init(_ value: Value, at location: SourceLocation = SourceLocation()) {
        self.value = value
        self.location = location
    }
}

extension NorqError.Code {
    public static let configUnknownKey: Self = "config/unknown-key"
    public static let configMissingKey: Self = "config/missing-key"
    public static let configInvalidType: Self = "config/invalid-type"
    public static let configInvalidValue: Self = "config/invalid-value"
}

extension ConfigNode {
    /// Describes the node's kind for messages.
    public var kindName: String {
        switch value {
        case .null: "null"
        case .scalar: "a scalar"
        case .sequence: "a list"
        case .mapping: "a mapping"
        }
    }

    /// The scalar text, or nil.
    public var scalar: String? {
        if case .scalar(let text, _) = value { return text }
        return nil
    }

    /// A mapping whose keys are checked against `allowed`; an unknown key is `config/unknown-key` with a
    /// did-you-mean suggestion. `path` names the block in messages (`providers.apns.config`).
    public func mapping(allowedKeys allowed: [String]? = nil, path: String) throws(NorqError) -> [String: ConfigNode] {
        let pairs = try orderedMapping(allowedKeys: allowed, path: path)
        var result: [String: ConfigNode] = [:]
        for pair in pairs { result[pair.key] = pair.value }
        return result
    }

    /// Like `mapping(allowedKeys:path:)`, keeping document order and key locations.
    public func orderedMapping(allowedKeys allowed: [String]? = nil,
                               path: String) throws(NorqError) -> [(key: String, keyNode: ConfigNode, value: ConfigNode)] {
        if case .null = value { return [] }
        guard case .mapping(let pairs) = value else {
            throw NorqError(.configInvalidType, "\(path) must be a mapping, found \(kindName)", at: location)
        }
        var result: [(key: String, keyNode: ConfigNode, value: ConfigNode)] = []
        var seen = Set<String>()
        for pair in pairs {
            guard let key = pair.key.scalar else {
                throw NorqError(.configInvalidType, "keys of \(path) must be strings", at: pair.key.location)
            }
            if let allowed, !allowed.contains(key) {
                let suggestion = Self.suggestion(for: key, among: allowed)
                throw NorqError(.configUnknownKey, "unknown key \"\(key)\" in \(path)", at: pair.key.location,
                                hint: suggestion.map { "did you mean \"\($0)\"?" }
                                    ?? "allowed keys: \(allowed.joined(separator: ", "))")
            }
            if !seen.insert(key).inserted {
                throw NorqError(.configInvalidValue, "duplicate key \"\(key)\" in \(path)", at: pair.key.location)
            }
            result.append((key, pair.key, pair.value))
        }
        return result
    }

    /// A non-empty string scalar.
    public func string(path: String) throws(NorqError) -> String {
        guard case .scalar(let text, _) = value else {
            throw NorqError(.configInvalidType, "\(path) must be a string, found \(kindName)", at: location)
        }
        guard !text.isEmpty else {
            throw NorqError(.configInvalidValue, "\(path) must not be empty", at: location)
        }
        return text
    }

    /// A boolean (`true`/`false`, also `yes`/`no`, `on`/`off` unquoted).
    public func bool(path: String) throws(NorqError) -> Bool {
        if case .scalar(let text, let quoted) = value, !quoted {
            switch text.lowercased() {
            case "true", "yes", "on": return true
            case "false", "no", "off": return false
            default: break
            }
        }
        throw NorqError(.configInvalidType, "\(path) must be true or false, found \(describe)", at: location)
    }

    /// An integer.
    public func int(path: String) throws(NorqError) -> Int {
        if case .scalar(let text, _) = value, let number = Int(text) { return number }
        throw NorqError(.configInvalidType, "\(path) must be an integer, found \(describe)", at: location)
    }

    /// A duration: `500ms`, `2s`, `1m`, `1h`, or a bare number of milliseconds.
    public func duration(path: String) throws(NorqError) -> Duration {
        if case .scalar(let text, _) = value, let duration = Self.parseDuration(text) { return duration }
        throw NorqError(.configInvalidValue,
                        "\(path) must be a duration such as 500ms, 2s or 1m, found \(describe)", at: location)
    }

    /// Parses `500ms`, `2s`, `1.5s`, `1m`, `1h` or a bare millisecond count. Nil when malformed or negative.
    public static func parseDuration(_ text: String) -> Duration? {
        let trimmed = text.trimmingWhitespace()
        let units: [(suffix: String, millis: Double)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000)]
        for unit in units where trimmed.hasSuffix(unit.suffix) {
            let number = trimmed.dropLast(unit.suffix.count)
            guard let value = Double(number), value >= 0, value.isFinite, value < 1e12 else { return nil }
            return .milliseconds(Int64(value * unit.millis))
        }
        guard let value = Int64(trimmed), value >= 0 else { return nil }
        return .milliseconds(value)
    }

    /// A short description of the value for messages (scalars quoted and truncated).
    public var describe: String {
        if case .scalar(let text, _) = value { return "\"\(text.prefix(40))\"" }
        return kindName
    }

    /// The closest candidate within edit distance 2 (or a prefix match), for did-you-mean hints.
    public static func suggestion(for word: String, among candidates: [String]) -> String? {
        var best: (String, Int)?
        for candidate in candidates {
            let distance = editDistance(word.lowercased(), candidate.lowercased())
            if distance <= max(2, candidate.count / 3), best == nil || distance < best!.1 {
                best = (candidate, distance)
            }
        }
        return best?.0
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.utf8), b = Array(b.utf8)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}

extension StringProtocol {
    /// The string without leading and trailing spaces, tabs and newlines (no Foundation).
    public func trimmingWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        guard let start = firstIndex(where: { !isSpace($0) }) else { return "" }
        let end = lastIndex(where: { !isSpace($0) })!
        return String(self[start...end])
    }
}
