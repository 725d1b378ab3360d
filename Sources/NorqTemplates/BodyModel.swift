import NorqCore

/// A piece of inline output.
enum Segment: Sendable {
    case text(String)
    case expr(Expr)
    /// An inline `{{> partial}}`: its lines joined by newlines.
    case partial([BodyNode])
    /// `{{> name}}` that could not be resolved: an error in strict mode, the literal tag otherwise.
    case missingPartial(tag: String, location: SourceLocation)
}

/// Text with interpolations, compiled.
struct Inline: Sendable {
    var segments: [Segment]

    static let empty = Inline(segments: [])

    /// The literal text when there is no interpolation at all.
    var staticText: String? {
        if segments.isEmpty { return "" }
        if segments.count == 1, case .text(let t) = segments[0] { return t }
        return nil
    }

    /// The only expression when the text is exactly one `{{ }}` (used to keep JSON types in data blocks).
    var singleExpression: Expr? {
        if segments.count == 1, case .expr(let e) = segments[0] { return e }
        return nil
    }
}

enum LineKind: Sendable { case paragraph, heading }

/// One body line after Markdown was reduced to plain text (at compile time).
struct BodyLine: Sendable {
    var kind: LineKind
    var text: Inline
    var links: [Inline]
    var images: [Inline]
}

enum DirectiveKind: String, Sendable, CaseIterable {
    case header, footer, action, hero, callout, fields, list, highlight, centered, media, columns, col, raw
    case table, divider, spacer
}

indirect enum BodyNode: Sendable {
    case line(BodyLine)
    case blank
    case conditional(branches: [(Condition, [BodyNode])], otherwise: [BodyNode])
    case each(list: Expr, slot: Int, body: [BodyNode])
    case directive(DirectiveKind, [BodyNode])
    case group([BodyNode])
    case missingPartial(tag: String, location: SourceLocation)
}

/// Where partials come from: `templates/_shared/<name>.md`, a dictionary, or nowhere.
public struct PartialResolver: Sendable {
    /// The source text and file path of a partial, or `nil` when there is none of that name.
    public let resolve: @Sendable (String) -> (source: String, file: String?)?

    public init(_ resolve: @escaping @Sendable (String) -> (source: String, file: String?)?) {
        self.resolve = resolve
    }

    /// No partials.
    public static let none = PartialResolver { _ in nil }

    /// In-memory partials, by name.
    public static func dictionary(_ partials: [String: String]) -> PartialResolver {
        PartialResolver { name in partials[name].map { ($0, "_shared/\(name).md") } }
    }
}

/// How a template is written: `push.md` (Markdown with frontmatter) or `push.json` (the payload itself).
public struct TemplateFormat: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let markdown = TemplateFormat(rawValue: "markdown")
    public static let json = TemplateFormat(rawValue: "json")
    public var description: String { rawValue }
}

/// Limits that keep one render bounded whatever the data.
public struct RenderLimits: Sendable, Hashable {
    /// Maximum UTF-8 bytes of the title, the body, or any one rendered value.
    public var maxOutputBytes: Int = 64 * 1024
    /// Maximum `::: each` iterations in one render, all loops together.
    public var maxLoopIterations: Int = 10_000
    public init(maxOutputBytes: Int = 64 * 1024, maxLoopIterations: Int = 10_000) {
        self.maxOutputBytes = maxOutputBytes
        self.maxLoopIterations = maxLoopIterations
    }
}

/// Options of one render.
public struct RenderOptions: Sendable {
    /// Strict (the default): a missing variable or an unknown pipe is an error. Otherwise they render as "".
    public var strict: Bool = true
    public var limits: RenderLimits = RenderLimits()
    public init(strict: Bool = true, limits: RenderLimits = RenderLimits()) {
        self.strict = strict
        self.limits = limits
    }
}

/// Maximum nesting of partials.
let maxPartialDepth = 10
