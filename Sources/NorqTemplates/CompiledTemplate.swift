public import NorqCore
public import OrderedCollections

/// A push template compiled once; immutable, `Sendable`, rendered many times.
public struct CompiledTemplate: Sendable {
    enum Body: Sendable {
        case markdown([BodyNode])
        case json(FrontValue)
    }

    /// The template name (its folder name).
    public let name: String
    /// The path of `push.md` / `push.json`, when loaded from disk.
    public let file: String?
    public let format: TemplateFormat
    /// `false` when the frontmatter says `enabled: false` (or `$norq.enabled` is false): senders skip it.
    public let enabled: Bool
    /// Named data sets from `data.samples.yaml`; the first is the default.
    public let samples: OrderedDictionary<String, JSONValue>
    let body: Body
    let base: PushContent
    let setters: [FieldSetter]
    let titleTemplate: Inline?
    let testsSource: String?
    let testsFile: String?
    /// Findings that do not stop the template: `template/raw-expression` for `{{{raw}}}`,
    /// `push/implausible-expiration`, `template/nullable-access` (with a schema). `norq validate` prints them
    /// and fails on them only with `--strict`.
    public internal(set) var warnings: [NorqError] = []
    /// The data schema (`data.schema.yaml`) when the template has one.
    public internal(set) var schema: DataSchema? = nil
    /// The rules it was compiled with: `runTests()` measures `payload_bytes` with their payload sizers.
    public internal(set) var rules = TemplateRules()

    /// Compiles a template.
    /// - Parameters:
    ///   - source: the text of `push.md` or `push.json`.
    ///   - file: its path, for error locations.
    ///   - partials: where `{{> name}}` finds partials.
    ///   - samplesSource: the text of `data.samples.yaml`, if any.
    ///   - testsSource: the text of `tests.yaml`, if any (parsed by `runTests()`).
    public static func compile(source: String, name: String, file: String? = nil, format: TemplateFormat = .markdown,
                               partials: PartialResolver = .none, samplesSource: String? = nil,
                               samplesFile: String? = nil, testsSource: String? = nil,
                               testsFile: String? = nil, rules: TemplateRules = TemplateRules()) throws(NorqError) -> CompiledTemplate {
        let samples = try samplesSource.map { s throws(NorqError) in try parseSamples(s, file: samplesFile) } ?? [:]
        if format == .json {
            return try compileJSON(source: source, name: name, file: file, partials: partials, samples: samples,
                                   testsSource: testsSource, testsFile: testsFile, rules: rules)
        }
        var text = Substring(source)
        if text.hasPrefix("\u{FEFF}") { text = text.dropFirst() }
        var front = FrontmatterCompiler(file: file, partials: partials, pushTypes: rules.pushTypes)
        var bodyFirstLine = 1
        if text.hasPrefix("---\n") || text.hasPrefix("---\r\n") {
            // find the closing `---`
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            lines.removeFirst()
            var yamlLines: [Substring] = []
            var closed = false
            var consumed = 1
            for line in lines {
                consumed += 1
                let t = line.hasSuffix("\r") ? line.dropLast() : line
                if t == "---" || t == "..." { closed = true; break }
                yamlLines.append(line)
            }
            guard closed else {
                throw NorqError(.templateInvalidFrontmatter, "frontmatter opened with '---' is never closed",
                                at: SourceLocation(file: file, line: 1, column: 1))
            }
            if let tree = try YAMLTree.parse(yamlLines.joined(separator: "\n"), file: file, lineOffset: 1,
                                             errorCode: .templateInvalidFrontmatter) {
                try front.compile(tree)
            }
            let bodyStart = text.split(separator: "\n", maxSplits: consumed, omittingEmptySubsequences: false)
            text = bodyStart.count > consumed ? bodyStart[consumed] : ""
            bodyFirstLine = consumed + 1
        }
        var compiler = BodyCompiler(file: file, partials: partials)
        let nodes = try compiler.compile(String(text), firstLine: bodyFirstLine, scope: Scope())
        var base = front.base
        base.templateName = name
        var compiled = CompiledTemplate(name: name, file: file, format: .markdown, enabled: front.enabled,
                                        samples: samples, body: .markdown(nodes), base: base, setters: front.setters,
                                        titleTemplate: front.titleTemplate, testsSource: testsSource,
                                        testsFile: testsFile)
        compiled.warnings = front.warnings + rawExpressionWarnings(source, file: file) + compiler.missingPartials
        compiled.rules = rules
        return compiled
    }

    /// `template/raw-expression` for each `{{{` (Norq warns: raw output skips escaping). Push output is never
    /// escaped, so `{{{x}}}` renders as `{{x}}` does; the warning keeps templates portable to other channels.
    static func rawExpressionWarnings(_ source: String, file: String?) -> [NorqError] {
        var warnings: [NorqError] = []
        var line = 1
        for text in source.split(separator: "\n", omittingEmptySubsequences: false) {
            var column = 1
            var rest = Substring(text)
            while let range = rest.firstRange(of: "{{{") {
                column += rest.distance(from: rest.startIndex, to: range.lowerBound)
                let end = rest[range.upperBound...].firstRange(of: "}}}")
                let expression = end.map { rest[range.upperBound..<$0.lowerBound].trimmingWhitespace() } ?? ""
                warnings.append(NorqError(.templateRawExpression,
                                          "raw expression {{{\(expression.prefix(40))}}} skips escaping",
                                          at: SourceLocation(file: file, line: line, column: column),
                                          hint: "push output is plain text either way; write {{\(expression.prefix(40))}}"))
                rest = rest[range.upperBound...]
                column += 3
                if warnings.count >= 100 { return warnings }
            }
            line += 1
        }
        return warnings
    }

    private static func compileJSON(source: String, name: String, file: String?, partials: PartialResolver,
                                    samples: OrderedDictionary<String, JSONValue>, testsSource: String?,
                                    testsFile: String?, rules: TemplateRules) throws(NorqError) -> CompiledTemplate {
        let parsed = try JSONValue(parsing: source, file: file, maxDepth: 64)
        guard case .object(var object) = parsed else {
            throw NorqError(.invalidJSON, "push.json must be a JSON object", at: SourceLocation(file: file, line: 1, column: 1))
        }
        var enabled = true
        var front = FrontmatterCompiler(file: file, partials: partials, pushTypes: rules.pushTypes)
        if let meta = object.removeValue(forKey: "$norq") {
            guard case .object(let m) = meta else {
                throw NorqError(.invalidFrontmatterValue, "'$norq' must be an object", at: SourceLocation(file: file))
            }
            for (key, value) in m {
                switch key {
                case "enabled":
                    guard case .bool(let b) = value else {
                        throw NorqError(.invalidFrontmatterValue, "'$norq.enabled' must be true or false",
                                        at: SourceLocation(file: file))
                    }
                    enabled = b
                case "headers":
                    try front.compileHeaders(YAMLTree(json: value, file: file), at: SourceLocation(file: file))
                default:
                    throw FrontmatterCompiler.unknownKey(.unknownFrontmatterKey, "$norq", key,
                                                         allowed: ["enabled", "headers"], at: SourceLocation(file: file))
                }
            }
        }
        let value = try front.compileValue(YAMLTree(json: .object(object), file: file))
        var base = front.base
        base.templateName = name
        if value.isLiteral { base.nativePayload = value.literalValue }
        var compiled = CompiledTemplate(name: name, file: file, format: .json, enabled: enabled, samples: samples,
                                        body: .json(value), base: base, setters: front.setters, titleTemplate: nil,
                                        testsSource: testsSource, testsFile: testsFile)
        compiled.warnings = front.warnings + rawExpressionWarnings(source, file: file)
        compiled.rules = rules
        return compiled
    }

    static func parseSamples(_ source: String, file: String?) throws(NorqError) -> OrderedDictionary<String, JSONValue> {
        guard let tree = try YAMLTree.parse(source, file: file, errorCode: .templateInvalidSamples) else { return [:] }
        guard let top = tree.object else {
            throw NorqError(.templateInvalidSamples, "data.samples.yaml must map sample names to data", at: tree.location)
        }
        // Also accepted: `samples: [{name: ..., data: ...}]`.
        if top.count == 1, let list = top["samples"], case .array(let items) = list.kind {
            var out = OrderedDictionary<String, JSONValue>()
            for item in items {
                guard let o = item.object, let n = o["name"], case .string(let sampleName) = n.kind else {
                    throw NorqError(.templateInvalidSamples, "each sample needs a 'name'", at: item.location)
                }
                out[sampleName] = o["data"]?.json ?? .object([:])
            }
            return out
        }
        return top.mapValues(\.json)
    }

    /// The default sample (the first one), or an empty object.
    public var defaultSample: JSONValue { samples.values.first ?? .object([:]) }

    /// Renders the template against `data`. Errors are `NorqError`s with the template file, line and column.
    public func render(data: JSONValue, options: RenderOptions = .init()) throws(NorqError) -> PushContent {
        var context = RenderContext(data: data, options: options)
        var content = base
        for setter in setters {
            let value = try context.render(setter.value, typed: setter.typed)
            try setter.apply(value, setter.location, &content)
        }
        switch body {
        case .markdown(let nodes):
            var sink = BodySink(maxBytes: options.limits.maxOutputBytes)
            try context.renderNodes(nodes, mode: .body, sink: &sink)
            content.body = sink.body
            content.image = sink.image ?? content.image
            content.actionURL = sink.actionURL ?? content.actionURL
            if let header = sink.header, !header.isEmpty {
                content.title = header
            } else if let heading = sink.heading, !heading.isEmpty {
                content.title = heading
            } else if let titleTemplate {
                content.title = try context.render(titleTemplate).trimmingWhitespace()
            }
            guard content.title.utf8.count <= options.limits.maxOutputBytes else {
                throw NorqError(.templateOutputTooLarge, "the title is larger than \(options.limits.maxOutputBytes) bytes",
                                at: SourceLocation(file: file))
            }
        case .json(let value):
            if content.nativePayload == nil {
                let payload = try context.render(value, typed: true)
                guard payload.serializedCount <= options.limits.maxOutputBytes else {
                    throw NorqError(.templateOutputTooLarge, "the payload is larger than \(options.limits.maxOutputBytes) bytes",
                                    at: SourceLocation(file: file))
                }
                content.nativePayload = payload
            }
            if let alert = content.nativePayload?["aps"]?["alert"] {
                if case .string(let s) = alert { content.body = s }
                content.title = alert["title"]?.stringValue ?? content.title
                content.body = alert["body"]?.stringValue ?? content.body
            }
        }
        try checkLocKeys(content)
        return content
    }

    /// `push/conflicting-loc-key`, located at the `*-loc-key` line of the template (else its file).
    private func checkLocKeys(_ content: PushContent) throws(NorqError) {
        func location(_ key: String) -> SourceLocation {
            file.flatMap { TemplateSourceLocator.locate(keys: [key], in: $0) } ?? SourceLocation(file: file)
        }
        if content.ios.titleLocKey != nil, !content.title.isEmpty {
            throw NorqError(.conflictingLocKey, "ios.title-loc-key and a literal title are both set",
                            at: location("title-loc-key"))
        }
        if content.ios.subtitleLocKey != nil, content.ios.subtitle != nil {
            throw NorqError(.conflictingLocKey, "ios.subtitle-loc-key and ios.subtitle are both set",
                            at: location("subtitle-loc-key"))
        }
        if content.ios.locKey != nil, !content.body.isEmpty {
            throw NorqError(.conflictingLocKey, "ios.loc-key and a literal body are both set", at: location("loc-key"))
        }
    }
}

extension JSONValue {
    var serializedCount: Int { serialized().count }
}

extension YAMLTree {
    /// A tree from JSON (no positions beyond the file).
    init(json: JSONValue, file: String?) {
        let location = SourceLocation(file: file)
        switch json {
        case .null: self.init(kind: .null, location: location)
        case .bool(let b): self.init(kind: .bool(b), location: location)
        case .int(let i): self.init(kind: .int(i), location: location)
        case .double(let d): self.init(kind: .double(d), location: location)
        case .string(let s): self.init(kind: .string(s), location: location)
        case .array(let a): self.init(kind: .array(a.map { YAMLTree(json: $0, file: file) }), location: location)
        case .object(let o):
            self.init(kind: .object(o.mapValues { YAMLTree(json: $0, file: file) }, keyLocations: [:]),
                      location: location)
        }
    }
}
