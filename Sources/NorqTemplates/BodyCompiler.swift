import NorqCore

/// A raw `{{ }}` found by the first pass, compiled later with the scope of its line.
struct RawTag {
    enum Kind { case expr, partial, comment }
    var kind: Kind
    var content: Substring
    var location: SourceLocation
}

/// Compiles a Markdown body (with `:::` blocks and `{{ }}`) into body nodes.
struct BodyCompiler {
    static let placeholderBase: UInt32 = 0xF0000
    static let maxTags = 0xFFFD

    let file: String?
    let partials: PartialResolver
    var partialStack: [String]
    var tags: [RawTag] = []
    /// `{{> name}}` calls with no `_shared/name.md`: rendered as the literal tag, as Norq does; the template
    /// gets a `template/missing-partial` warning for each.
    var missingPartials: [NorqError] = []

    init(file: String?, partials: PartialResolver, partialStack: [String] = []) {
        self.file = file
        self.partials = partials
        self.partialStack = partialStack
    }

    func location(_ line: Int, _ column: Int) -> SourceLocation {
        SourceLocation(file: file, line: line, column: column)
    }

    // MARK: pass 1: tags -> placeholders

    /// Replaces every `{{ }}` / `{{{ }}}` with one placeholder scalar; returns lines with their source numbers.
    mutating func extractTags(_ source: String, firstLine: Int) throws(NorqError) -> [(text: String, line: Int)] {
        var lines: [(String, Int)] = []
        var current = String.UnicodeScalarView()
        var line = firstLine
        var column = 1
        var currentLine = firstLine
        let scalars = Array(source.unicodeScalars)
        var i = 0
        while i < scalars.count {
            let c = scalars[i]
            if c == "{", i + 1 < scalars.count, scalars[i + 1] == "{" {
                let triple = i + 2 < scalars.count && scalars[i + 2] == "{"
                let open = triple ? 3 : 2
                let startLine = line, startColumn = column
                var j = i + open
                var closeAt: Int? = nil
                while j + open - 1 < scalars.count {
                    if scalars[j] == "}" && scalars[j + 1] == "}" && (!triple || scalars[j + 2] == "}") {
                        closeAt = j
                        break
                    }
                    j += 1
                }
                guard let closeAt else {
                    throw NorqError(.templateSyntaxError, "'\(triple ? "{{{" : "{{")' is never closed",
                                    at: location(startLine, startColumn))
                }
                var content = String(String.UnicodeScalarView(scalars[(i + open)..<closeAt]))[...]
                for k in i..<(closeAt + open) {
                    if scalars[k] == "\n" { line += 1; column = 1 } else { column += 1 }
                }
                var kind = RawTag.Kind.expr
                let trimmed = content.drop(while: { $0 == " " || $0 == "\t" })
                if trimmed.hasPrefix(">") { kind = .partial; content = trimmed.dropFirst() }
                else if trimmed.hasPrefix("!") { kind = .comment }
                guard tags.count < Self.maxTags else {
                    throw NorqError(.templateSyntaxError, "too many expressions in one template",
                                    at: location(startLine, startColumn))
                }
                if kind != .comment {
                    tags.append(RawTag(kind: kind, content: content, location: location(startLine, startColumn)))
                    if let placeholder = Unicode.Scalar(Self.placeholderBase + UInt32(tags.count - 1)) {
                        current.append(placeholder)
                    }
                }
                i = closeAt + open
                continue
            }
            if c.value >= Self.placeholderBase && c.value <= Self.placeholderBase + 0xFFFF {
                throw NorqError(.templateSyntaxError, "private-use character U+\(String(c.value, radix: 16, uppercase: true)) is not allowed in templates",
                                at: location(line, column))
            }
            if c == "\n" {
                lines.append((String(current), currentLine))
                current = String.UnicodeScalarView()
                line += 1
                column = 1
                currentLine = line
            } else if c != "\r" {
                current.append(c)
                column += 1
            }
            i += 1
        }
        lines.append((String(current), currentLine))
        return lines
    }

    static func tagIndex(_ s: Unicode.Scalar) -> Int? {
        guard s.value >= placeholderBase, s.value < placeholderBase + UInt32(maxTags) else { return nil }
        return Int(s.value - placeholderBase)
    }

    // MARK: pass 2: blocks

    private struct Frame {
        enum Kind { case root, conditional, each, directive(DirectiveKind) }
        var kind: Kind
        var nodes: [BodyNode] = []
        var branches: [(Condition, [BodyNode])] = []
        var condition: Condition? = nil
        var inElse = false
        var list: Expr? = nil
        var slot = 0
        var openLine = 0
        var raw = false
    }

    mutating func compile(_ source: String, firstLine: Int, scope: Scope) throws(NorqError) -> [BodyNode] {
        let lines = try extractTags(source, firstLine: firstLine)
        var scope = scope
        var stack: [Frame] = [Frame(kind: .root)]
        var inFence = false
        for (text, lineNumber) in lines {
            let trimmed = text.trimmingWhitespace()
            let rawMode = stack.contains(where: \.raw)
            if trimmed.hasPrefix("```") {
                inFence.toggle()
                continue
            }
            if !inFence, trimmed.hasPrefix(":::") {
                try directiveLine(trimmed, line: lineNumber, stack: &stack, scope: &scope)
                continue
            }
            let inFields = stack.contains {
                if case .directive(.fields) = $0.kind { return true }
                return false
            }
            let node = try compileLine(trimmed, verbatim: rawMode || inFence, bullets: !inFields, line: lineNumber,
                                       scope: scope)
            if let node { stack[stack.count - 1].nodes.append(node) }
        }
        guard stack.count == 1 else {
            let open = stack[stack.count - 1]
            throw NorqError(.templateUnbalancedBlock, "block opened here is never closed with ':::'",
                            at: location(open.openLine, 1))
        }
        return stack[0].nodes
    }

    private mutating func directiveLine(_ trimmed: String, line: Int, stack: inout [Frame],
                                        scope: inout Scope) throws(NorqError) {
        var rest = trimmed.dropFirst(3).drop(while: { $0 == " " || $0 == "\t" })
        while rest.last == " " || rest.last == "\t" { rest = rest.dropLast() }
        let name = rest.prefix(while: { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        let args = rest.dropFirst(name.count).drop(while: { $0 == " " || $0 == "\t" })
        let loc = location(line, 1)
        if name.isEmpty {
            guard args.isEmpty || args.first == ":" else {
                throw NorqError(.templateSyntaxError, "expected a directive name after ':::'", at: loc)
            }
            // close
            guard stack.count > 1 else {
                throw NorqError(.templateUnbalancedBlock, "':::' closes nothing", at: loc)
            }
            let frame = stack.removeLast()
            let node: BodyNode
            switch frame.kind {
            case .conditional:
                var branches = frame.branches
                var otherwise: [BodyNode] = []
                if frame.inElse { otherwise = frame.nodes } else if let c = frame.condition {
                    branches.append((c, frame.nodes))
                }
                node = .conditional(branches: branches, otherwise: otherwise)
            case .each:
                scope.locals.removeLast()
                guard let list = frame.list else { return }
                node = .each(list: list, slot: frame.slot, body: frame.nodes)
            case .directive(let kind):
                node = .directive(kind, frame.nodes)
            case .root:
                return
            }
            stack[stack.count - 1].nodes.append(node)
            return
        }
        switch name {
        case "if":
            var parser = try ExprParser(args, location: loc, scope: scope)
            let condition = try parser.parseWholeCondition()
            var frame = Frame(kind: .conditional)
            frame.condition = condition
            frame.openLine = line
            stack.append(frame)
        case "else":
            guard case .conditional = stack[stack.count - 1].kind, !stack[stack.count - 1].inElse else {
                throw NorqError(.templateUnbalancedBlock, "':::else' outside an '::: if' block", at: loc)
            }
            var frame = stack.removeLast()
            if let c = frame.condition { frame.branches.append((c, frame.nodes)) }
            frame.nodes = []
            let elseArgs = args
            if elseArgs.hasPrefix("if ") || elseArgs == "if" {
                var parser = try ExprParser(elseArgs.dropFirst(2), location: loc, scope: scope)
                frame.condition = try parser.parseWholeCondition()
            } else {
                guard elseArgs.isEmpty else {
                    throw NorqError(.templateSyntaxError, "unexpected text after ':::else'", at: loc)
                }
                frame.condition = nil
                frame.inElse = true
            }
            stack.append(frame)
        case "each":
            // `each <list expr> as <name>`
            guard let asRange = args.firstRange(of: " as ") else {
                throw NorqError(.templateSyntaxError, "expected '::: each <list> as <name>'", at: loc)
            }
            let listText = args[args.startIndex..<asRange.lowerBound]
            let itemName = args[asRange.upperBound...].trimmingWhitespace()
            guard !itemName.isEmpty, itemName.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
                throw NorqError(.templateSyntaxError, "invalid loop variable name '\(itemName)'", at: loc)
            }
            var parser = try ExprParser(listText, location: loc, scope: scope)
            let list = try parser.parseWholeExpression()
            var frame = Frame(kind: .each)
            frame.list = list
            frame.slot = scope.locals.count
            frame.openLine = line
            scope.locals.append(itemName)
            stack.append(frame)
        default:
            guard let kind = DirectiveKind(rawValue: name.lowercased()) else {
                throw NorqError(.templateUnknownDirective, "unknown directive ':::\(name)'", at: loc,
                                hint: "known: if, else, each, " + DirectiveKind.allCases.map(\.rawValue).joined(separator: ", "))
            }
            var frame = Frame(kind: .directive(kind))
            frame.openLine = line
            frame.raw = kind == .raw
            if kind == .divider || kind == .spacer {
                // self-contained: no content, no closing line needed
                stack[stack.count - 1].nodes.append(.blank)
                return
            }
            stack.append(frame)
        }
    }

    // MARK: lines

    private mutating func compileLine(_ trimmed: String, verbatim: Bool, bullets: Bool, line: Int,
                                      scope: Scope) throws(NorqError) -> BodyNode? {
        if trimmed.isEmpty { return .blank }
        // a line that is only a partial call: block-level inclusion
        let scalars = Array(trimmed.unicodeScalars)
        if scalars.count == 1, let index = Self.tagIndex(scalars[0]), tags[index].kind == .partial {
            return try includePartial(tags[index], scope: scope)
        }
        if verbatim {
            return .line(BodyLine(kind: .paragraph, text: try inline(trimmed, scope: scope), links: [], images: []))
        }
        var text = Substring(trimmed)
        var kind = LineKind.paragraph
        var prefix = ""
        if text.first == "{", text.last == "}" { return nil }  // attribute line `{.style key="v"}`
        if text.count >= 3, let f = text.first, f == "-" || f == "*" || f == "_",
           text.allSatisfy({ $0 == f || $0 == " " }) {
            return .blank  // thematic break
        }
        if text.first == "#" {
            let hashes = text.prefix(while: { $0 == "#" })
            let after = text.dropFirst(hashes.count)
            if hashes.count <= 6, after.isEmpty || after.first == " " {
                kind = .heading
                text = after.drop(while: { $0 == " " })
                while text.last == "#" { text = text.dropLast() }
                while text.last == " " { text = text.dropLast() }
            }
        } else if text.hasPrefix("> ") || text == ">" {
            text = text.dropFirst().drop(while: { $0 == " " })
        } else if text.hasPrefix("- ") || text.hasPrefix("* ") || text.hasPrefix("+ ") {
            text = text.dropFirst(2).drop(while: { $0 == " " })
            if text.hasPrefix("[ ] ") || text.hasPrefix("[x] ") { text = text.dropFirst(4) }
            prefix = bullets ? "• " : ""
        } else {
            let digits = text.prefix(while: { $0.isASCII && $0.isNumber })
            if !digits.isEmpty, digits.count <= 9 {
                let after = text.dropFirst(digits.count)
                if after.hasPrefix(". ") || after.hasPrefix(") ") {
                    prefix = digits + ". "
                    text = after.dropFirst(2).drop(while: { $0 == " " })
                }
            }
        }
        let reduced = MarkdownInline.reduce(Array(text))
        var textInline = try inline(prefix + reduced.text, scope: scope)
        textInline.segments = textInline.segments.filter {
            if case .text(let t) = $0 { return !t.isEmpty }
            return true
        }
        var links: [Inline] = []
        for url in reduced.links { links.append(try inline(url, scope: scope)) }
        var images: [Inline] = []
        for url in reduced.images { images.append(try inline(url, scope: scope)) }
        return .line(BodyLine(kind: kind, text: textInline, links: links, images: images))
    }

    /// Splits text with placeholders into segments, compiling each expression with `scope`.
    mutating func inline(_ text: String, scope: Scope) throws(NorqError) -> Inline {
        var segments: [Segment] = []
        var literal = String.UnicodeScalarView()
        for s in text.unicodeScalars {
            if let index = Self.tagIndex(s), index < tags.count {
                if !literal.isEmpty { segments.append(.text(String(literal))); literal = .init() }
                let tag = tags[index]
                switch tag.kind {
                case .expr:
                    var parser = try ExprParser(tag.content, location: tag.location, scope: scope)
                    segments.append(.expr(try parser.parseWholeExpression()))
                case .partial:
                    switch try includePartial(tag, scope: scope) {
                    case .missingPartial(let t, let l): segments.append(.missingPartial(tag: t, location: l))
                    case .group(let nodes): segments.append(.partial(nodes))
                    default: break
                    }
                case .comment: break
                }
            } else {
                literal.append(s)
            }
        }
        if !literal.isEmpty { segments.append(.text(String(literal))) }
        return Inline(segments: segments)
    }

    // MARK: partials

    private mutating func includePartial(_ tag: RawTag, scope: Scope) throws(NorqError) -> BodyNode {
        let content = tag.content.trimmingWhitespace()
        let name = String(content.prefix(while: { !$0.isWhitespace }))
        guard !name.isEmpty else {
            throw NorqError(.templateSyntaxError, "'{{>' needs a partial name", at: tag.location)
        }
        let paramsText = content.dropFirst(name.count)
        guard let (source, partialFile) = partials.resolve(name) else {
            missingPartials.append(NorqError(.templateMissingPartial,
                                             "no partial \(name) (_shared/\(name).md): the tag is sent as written, as Norq does",
                                             at: tag.location, hint: "add _shared/\(name).md or remove the tag"))
            return .missingPartial(tag: "{{> \(content)}}", location: tag.location)
        }
        if partialStack.contains(name) {
            throw NorqError(.templateRecursivePartial,
                            "partial '\(name)' includes itself (\((partialStack + [name]).joined(separator: " -> ")))",
                            at: tag.location)
        }
        guard partialStack.count < maxPartialDepth else {
            throw NorqError(.templatePartialDepth, "partials nested deeper than \(maxPartialDepth)", at: tag.location)
        }
        // parameters: name=path, name="literal", name='literal', name=path | pipe ...
        var partialScope = scope
        partialScope.inPartial = true
        partialScope.params = [:]
        var tokens = try ExprLexer.tokenize(paramsText[...], location: tag.location)
        while !tokens.isEmpty {
            guard tokens.count >= 3, case .word(let key) = tokens[0], tokens[1] == .equals else {
                throw NorqError(.templateSyntaxError, "partial parameters are written key=value", at: tag.location)
            }
            // the value runs until the next `word =`
            var end = 3
            while end < tokens.count {
                if end + 1 < tokens.count, case .word = tokens[end], tokens[end + 1] == .equals { break }
                end += 1
            }
            var parser = ExprParser(tokens: Array(tokens[2..<end]), location: tag.location, scope: scope)
            let value = try parser.parseWholeExpression()
            partialScope.params[key] = value
            tokens.removeFirst(end)
        }
        var sub = BodyCompiler(file: partialFile, partials: partials, partialStack: partialStack + [name])
        var nodes = try sub.compile(source, firstLine: 1, scope: partialScope)
        while case .blank? = nodes.last { nodes.removeLast() }
        return .group(nodes)
    }
}

extension ExprParser {
    init(tokens: [ExprToken], location: SourceLocation, scope: Scope) {
        self.tokens = tokens
        self.position = 0
        self.location = location
        self.scope = scope
    }
}
