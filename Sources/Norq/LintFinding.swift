public import NorqCore

/// One finding of `norq lint` / `norq validate` (``TemplateLinter``): what is wrong, how bad, and where the author
/// fixes it. Printed as `path:line:col: severity[code]: message`; the structured fields are what tools (the
/// preview page, an editor) read.
public struct LintFinding: Sendable, Hashable, CustomStringConvertible {
    /// How bad a finding is. An error is what `send` refuses (or a broken file); a warning is likely trouble in
    /// production and fails a run only under `--strict`.
    public enum Severity: String, Sendable, Hashable, Comparable {
        case warning
        case error

        public static func < (lhs: Severity, rhs: Severity) -> Bool { lhs == .warning && rhs == .error }
    }

    public var severity: Severity
    /// The stable error code (`apns/bad-priority`, `template/nullable-access`, ...), as in `docs/errors.md`.
    public var code: NorqError.Code
    public var message: String
    public var hint: String?
    /// The file the author edits (the template, its samples or schema, the config), when known.
    public var file: String?
    /// 1-based line, 0 when unknown.
    public var line: Int
    /// 1-based column, 0 when unknown.
    public var column: Int
    /// The template id the finding is about; nil for configuration findings.
    public var template: String?
    /// The sample (`data.samples.yaml` entry) it was found with, when it depends on data.
    public var sample: String?
    /// The provider instance whose rules found it (a `prepare` error, a credential that cannot be loaded).
    public var provider: String?
    /// The token platform the provider was preparing for.
    public var platform: Platform?

    public init(severity: Severity, code: NorqError.Code, message: String, hint: String? = nil,
                file: String? = nil, line: Int = 0, column: Int = 0, template: String? = nil,
                sample: String? = nil, provider: String? = nil, platform: Platform? = nil) {
        self.severity = severity
        self.code = code
        self.message = message
        self.hint = hint
        self.file = file
        self.line = line
        self.column = column
        self.template = template
        self.sample = sample
        self.provider = provider
        self.platform = platform
    }

    /// A finding from an error (its code, message, hint and location).
    public init(_ error: NorqError, severity: Severity, template: String? = nil, sample: String? = nil,
                provider: String? = nil, platform: Platform? = nil) {
        self.init(severity: severity, code: error.code, message: error.message, hint: error.hint,
                  file: error.location?.file, line: error.location?.line ?? 0, column: error.location?.column ?? 0,
                  template: template, sample: sample, provider: provider, platform: platform)
    }

    /// The location, when a file is known.
    public var location: SourceLocation? {
        file == nil && line == 0 ? nil : SourceLocation(file: file, line: line, column: column)
    }

    /// The finding as a `NorqError` (code, message, hint, location).
    public var error: NorqError { NorqError(code, message, at: location, hint: hint) }

    /// `path:line:col: severity[code]: message (hint)`; the location part only when known.
    public var description: String {
        var text = ""
        if let location { text += "\(location): " }
        text += "\(severity.rawValue)[\(code.rawValue)]: \(message)"
        if let hint { text += " (\(hint))" }
        return text
    }

    /// Norq's code for the same finding where Norq names it differently, else nil: a template that does not parse
    /// is Norq's `parse/error` and our `template/syntax-error`, `template/unbalanced-block`,
    /// `template/unknown-directive` or `template/invalid-frontmatter` (ours are stable API and say which).
    public var norqCode: String? {
        Self.parseErrorCodes.contains(code) ? "parse/error" : nil
    }

    static let parseErrorCodes: Set<NorqError.Code> = [
        "template/syntax-error", "template/unbalanced-block", "template/unknown-directive",
        "template/invalid-frontmatter",
    ]

    /// The finding as JSON (`norq lint --json`): every field, null when unknown.
    public var json: JSONValue {
        [
            "severity": .string(severity.rawValue),
            "code": .string(code.rawValue),
            "norqCode": norqCode.map(JSONValue.string) ?? .null,
            "message": .string(message),
            "hint": hint.map(JSONValue.string) ?? .null,
            "file": file.map(JSONValue.string) ?? .null,
            "line": .int(Int64(line)),
            "column": .int(Int64(column)),
            "template": template.map(JSONValue.string) ?? .null,
            "sample": sample.map(JSONValue.string) ?? .null,
            "provider": provider.map(JSONValue.string) ?? .null,
            "platform": platform.map { .string($0.rawValue) } ?? .null,
        ]
    }
}

/// The findings of one template (``TemplateLinter``).
public struct TemplateLintResult: Sendable, Hashable {
    /// The template id.
    public var template: String
    /// Its `push.md` / `push.json`, when it compiled.
    public var file: String?
    /// The samples it was rendered with (`(no sample: empty data)` when it has none).
    public var samples: [String]
    /// For a notification without a push template: its other channels' files (not served by this router).
    public var otherChannels: [String]?
    public var findings: [LintFinding]

    public init(template: String, file: String? = nil, samples: [String] = [], otherChannels: [String]? = nil,
                findings: [LintFinding] = []) {
        self.template = template
        self.file = file
        self.samples = samples
        self.otherChannels = otherChannels
        self.findings = findings
    }

    public var errors: [LintFinding] { findings.filter { $0.severity == .error } }
    public var warnings: [LintFinding] { findings.filter { $0.severity == .warning } }
}

/// What ``TemplateLinter/lint(_:)`` found: configuration findings (provider credentials) and one result
/// per template, sorted by template id.
public struct LintReport: Sendable, Hashable {
    /// Findings about the configuration: a provider instance that cannot be made (its credentials cannot be read).
    public var configuration: [LintFinding]
    public var templates: [TemplateLintResult]

    public init(configuration: [LintFinding] = [], templates: [TemplateLintResult] = []) {
        self.configuration = configuration
        self.templates = templates
    }

    /// Every finding, configuration first, then by template.
    public var findings: [LintFinding] { configuration + templates.flatMap(\.findings) }
    public var errorCount: Int { findings.count { $0.severity == .error } }
    public var warningCount: Int { findings.count { $0.severity == .warning } }

    /// Whether a run passes: no error, and under `strict` no warning either.
    public func passes(strict: Bool) -> Bool { errorCount == 0 && (!strict || warningCount == 0) }
}
