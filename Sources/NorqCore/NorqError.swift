/// Where in a source file (config, template, data) something happened.
public struct SourceLocation: Sendable, Hashable, CustomStringConvertible {
    /// The file path as given by the caller (relative or absolute), or `nil` for in-memory sources.
    public var file: String?
    /// 1-based line, or 0 when unknown.
    public var line: Int
    /// 1-based column, or 0 when unknown.
    public var column: Int

    public init(file: String? = nil, line: Int = 0, column: Int = 0) {
        self.file = file
        self.line = line
        self.column = column
    }

    /// `path:line:col` as compilers print it; parts that are unknown are left out.
    public var description: String {
        var parts: [String] = [file ?? "<input>"]
        if line > 0 {
            parts.append(String(line))
            if column > 0 { parts.append(String(column)) }
        }
        return parts.joined(separator: ":")
    }
}

/// The one error type of Norq. Its `code` is stable API (`area/kebab-name`), listed in `docs/errors.md`.
public struct NorqError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A stable error code such as `config/missing-key`. An open set: each area adds its own static members.
    public struct Code: Sendable, Hashable, RawRepresentable, ExpressibleByStringLiteral, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public init(stringLiteral value: String) { self.rawValue = value }
        public var description: String { rawValue }
        /// The part before the slash: `config`, `push`, `template`, `apns`, ...
        public var area: Substring { rawValue.split(separator: "/", maxSplits: 1).first ?? "" }
    }

    public var code: Code
    /// A human message. Never contains secrets or whole device tokens.
    public var message: String
    /// File, line and column where that applies.
    public var location: SourceLocation?
    /// A hint shown after the message (for example a did-you-mean suggestion).
    public var hint: String?
    /// For a failed delivery attempt: whether the server may have processed the request. `true` when it was
    /// written and then no definitive answer came (the connection was lost, the stream was reset with a code
    /// other than REFUSED_STREAM, the deadline passed after the write): sending it again may deliver twice.
    /// `false` when it is known not to have been processed (never written, REFUSED_STREAM, a stream above a
    /// GOAWAY's last-stream-id) and for every error that is not a delivery attempt.
    public var possiblyProcessed: Bool
    /// For a failed delivery attempt: `true` when the attempt is known not to have been processed by the server
    /// because the server said so or the request never left (RST_STREAM REFUSED_STREAM, a stream above a GOAWAY's
    /// last-stream-id, a connection that closed or went away before the request was written). Such an attempt is
    /// re-queued without spending the retry budget, bounded by the deadline (`RetryPolicy.decision(afterAttempt:
    /// failure:remaining:randomUnit:collapsible:requeues:)`). `false` otherwise, including for failures that were
    /// not processed for another reason (no connection could be made): those spend the budget. Never true together
    /// with `possiblyProcessed`.
    public var notProcessed: Bool

    public init(_ code: Code, _ message: String, at location: SourceLocation? = nil, hint: String? = nil,
                possiblyProcessed: Bool = false, notProcessed: Bool = false) {
        self.code = code
        self.message = message
        self.location = location
        self.hint = hint
        self.possiblyProcessed = possiblyProcessed
        self.notProcessed = notProcessed && !possiblyProcessed
    }

    /// `path:line:col: error[code]: message` (the location part only when known).
    public var description: String {
        var text = ""
        if let location { text += "\(location): " }
        text += "error[\(code.rawValue)]: \(message)"
        if let hint { text += " (\(hint))" }
        return text
    }
}

extension NorqError.Code {
    // push: token and recipient validation (NorqCore)
    public static let invalidEnvironment: Self = "push/invalid-environment"
    public static let missingPlatform: Self = "push/missing-platform"
    public static let unknownPlatform: Self = "push/unknown-platform"
    public static let emptyToken: Self = "push/empty-token"
    public static let invalidRecipient: Self = "push/invalid-recipient"
    public static let missingVAPIDKeys: Self = "provider/missing-vapid-keys"
    // provider: delivery-level failures
    public static let transportFailed: Self = "provider/transport-failed"
    public static let deadlineExceeded: Self = "provider/deadline-exceeded"
    public static let providerShutDown: Self = "provider/shut-down"
    // json
    public static let invalidJSON: Self = "push/invalid-json"
    // template: a header value that cannot be written (checked by each provider's `prepare`)
    public static let invalidHeaderValue: Self = "template/invalid-header-value"
}

extension NorqError {
    /// `template/invalid-header-value`: the value of request header `header`, made from the template `template`
    /// (or from the send's options), cannot be written on HTTP/2 (RFC 9113 §8.2.1: a CR, LF or NUL, or whitespace
    /// at either end). `problem` says which (the value itself is not quoted: it comes from data). Nothing is sent.
    public static func invalidHeaderValue(_ header: String, template: String?, problem: String) -> NorqError {
        let source = template.map { "of template \"\($0)\"" } ?? "of the push"
        return NorqError(.invalidHeaderValue, "header \(header) \(source) cannot be sent: \(problem)",
                         hint: "HTTP/2 header values may not contain CR, LF or NUL nor start or end with whitespace")
    }
}
