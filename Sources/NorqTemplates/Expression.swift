import NorqCore

/// One step of a dotted path: an object key, which may also be an array index.
struct PathComponent: Sendable {
    let key: String
    let index: Int?
    init(_ key: Substring) {
        self.key = String(key)
        self.index = Int(key)
    }
}

/// A compiled path: from the root data or from an `each` loop variable (by slot).
struct PathRef: Sendable {
    enum Root: Sendable { case data, local(Int) }
    var root: Root
    var components: [PathComponent]
    var display: String
}

/// The first value of an expression or a pipe argument.
enum Primary: Sendable {
    case path(PathRef)
    case literal(JSONValue)
    /// `{{@name}}` in a partial called without `name`.
    case unbound(String)
}

struct PipeCall: Sendable {
    var pipe: Pipe?
    var name: String
    var args: [Primary]
    var location: SourceLocation
    /// The argument values when every argument is a literal (no per-render allocation).
    var literalArgs: [JSONValue?]?

    init(pipe: Pipe?, name: String, args: [Primary], location: SourceLocation) {
        self.pipe = pipe
        self.name = name
        self.args = args
        self.location = location
        var literals: [JSONValue?] = []
        for arg in args {
            guard case .literal(let v) = arg else { self.literalArgs = nil; return }
            literals.append(v)
        }
        self.literalArgs = literals
    }
}

/// `primary | pipe arg ... | pipe ...`, compiled.
struct Expr: Sendable {
    var primary: Primary
    var pipes: [PipeCall]
    var location: SourceLocation
}

enum CompareOp: String, Sendable { case eq = "==", ne = "!=", gt = ">", lt = "<", ge = ">=", le = "<=" }

indirect enum Condition: Sendable {
    case value(Expr)
    case not(Condition)
    case and(Condition, Condition)
    case or(Condition, Condition)
    case compare(Expr, CompareOp, Expr)
}

/// Compile-time scope: loop variable names (index = slot) and partial parameter bindings.
struct Scope: Sendable {
    var locals: [String] = []
    var params: [String: Expr] = [:]
    var inPartial = false
}

// MARK: - Tokenizer

enum ExprToken: Equatable {
    case word(String)        // path, identifier, true/false/null, @param
    case string(String)
    case number(JSONValue)
    case pipe
    case op(String)          // == != > < >= <= && || !
    case lparen, rparen
    case equals
}

struct ExprLexer {
    static func isWordByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
            || b == 0x5F || b == 0x2E || b == 0x40 || b == 0x24 || b == 0x2D || b >= 0x80
    }

    static func tokenize(_ text: Substring, location: SourceLocation) throws(NorqError) -> [ExprToken] {
        let bytes = Array(text.utf8)
        var tokens: [ExprToken] = []
        var i = 0
        func fail(_ message: String) -> NorqError {
            NorqError(.templateSyntaxError, message, at: location)
        }
        while i < bytes.count {
            let b = bytes[i]
            switch b {
            case 0x20, 0x09, 0x0A, 0x0D:
                i += 1
            case UInt8(ascii: "|"):
                if i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "|") { tokens.append(.op("||")); i += 2 }
                else { tokens.append(.pipe); i += 1 }
            case UInt8(ascii: "&"):
                guard i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "&") else { throw fail("expected '&&'") }
                tokens.append(.op("&&")); i += 2
            case UInt8(ascii: "="):
                if i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "=") { tokens.append(.op("==")); i += 2 }
                else { tokens.append(.equals); i += 1 }
            case UInt8(ascii: "!"):
                if i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "=") { tokens.append(.op("!=")); i += 2 }
                else { tokens.append(.op("!")); i += 1 }
            case UInt8(ascii: ">"), UInt8(ascii: "<"):
                let s = b == UInt8(ascii: ">") ? ">" : "<"
                if i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "=") { tokens.append(.op(s + "=")); i += 2 }
                else { tokens.append(.op(s)); i += 1 }
            case UInt8(ascii: "("): tokens.append(.lparen); i += 1
            case UInt8(ascii: ")"): tokens.append(.rparen); i += 1
            case UInt8(ascii: "\""), UInt8(ascii: "'"):
                let quote = b
                var out: [UInt8] = []
                i += 1
                var closed = false
                while i < bytes.count {
                    let c = bytes[i]
                    if c == quote { closed = true; i += 1; break }
                    if c == UInt8(ascii: "\\"), i + 1 < bytes.count {
                        let n = bytes[i + 1]
                        switch n {
                        case UInt8(ascii: "n"): out.append(0x0A)
                        case UInt8(ascii: "t"): out.append(0x09)
                        default: out.append(n)
                        }
                        i += 2
                        continue
                    }
                    out.append(c)
                    i += 1
                }
                guard closed else { throw fail("unterminated string literal") }
                tokens.append(.string(String(decoding: out, as: UTF8.self)))
            default:
                let startsNumber = (b >= 0x30 && b <= 0x39)
                    || (b == UInt8(ascii: "-") && i + 1 < bytes.count && bytes[i + 1] >= 0x30 && bytes[i + 1] <= 0x39)
                guard isWordByte(b) else {
                    throw fail("unexpected character '\(String(decoding: [b], as: UTF8.self))' in expression")
                }
                var j = i + 1
                while j < bytes.count, isWordByte(bytes[j]) { j += 1 }
                let word = String(decoding: bytes[i..<j], as: UTF8.self)
                if startsNumber {
                    if let n = Int64(word) { tokens.append(.number(.int(n))) }
                    else if let d = Double(word), d.isFinite { tokens.append(.number(.double(d))) }
                    else { throw fail("invalid number '\(word)'") }
                } else {
                    tokens.append(.word(word))
                }
                i = j
            }
        }
        return tokens
    }
}

// MARK: - Parser

struct ExprParser {
    var tokens: [ExprToken]
    var position = 0
    let location: SourceLocation
    let scope: Scope

    init(_ text: Substring, location: SourceLocation, scope: Scope) throws(NorqError) {
        self.tokens = try ExprLexer.tokenize(text, location: location)
        self.location = location
        self.scope = scope
    }

    var atEnd: Bool { position >= tokens.count }
    var peek: ExprToken? { position < tokens.count ? tokens[position] : nil }

    func fail(_ message: String) -> NorqError { NorqError(.templateSyntaxError, message, at: location) }

    /// A whole `{{ }}` expression.
    mutating func parseWholeExpression() throws(NorqError) -> Expr {
        guard !atEnd else { throw fail("empty expression") }
        let expr = try parseExpr()
        guard atEnd else { throw fail("unexpected \(describe(peek)) in expression") }
        return expr
    }

    /// A whole `::: if` condition.
    mutating func parseWholeCondition() throws(NorqError) -> Condition {
        guard !atEnd else { throw fail("empty condition") }
        let c = try parseOr()
        guard atEnd else { throw fail("unexpected \(describe(peek)) in condition") }
        return c
    }

    func describe(_ token: ExprToken?) -> String {
        switch token {
        case nil: return "end"
        case .word(let w): return "'\(w)'"
        case .string(let s): return "\"\(s)\""
        case .number(let n): return n.compactDescription
        case .pipe: return "'|'"
        case .op(let o): return "'\(o)'"
        case .lparen: return "'('"
        case .rparen: return "')'"
        case .equals: return "'='"
        }
    }

    mutating func parseOr() throws(NorqError) -> Condition {
        var left = try parseAnd()
        while peek == .op("||") {
            position += 1
            left = .or(left, try parseAnd())
        }
        return left
    }

    mutating func parseAnd() throws(NorqError) -> Condition {
        var left = try parseUnary()
        while peek == .op("&&") {
            position += 1
            left = .and(left, try parseUnary())
        }
        return left
    }

    mutating func parseUnary() throws(NorqError) -> Condition {
        if peek == .op("!") {
            position += 1
            return .not(try parseUnary())
        }
        if peek == .lparen {
            position += 1
            let inner = try parseOr()
            guard peek == .rparen else { throw fail("expected ')'") }
            position += 1
            return inner
        }
        let left = try parseExpr()
        if case .op(let o)? = peek, let op = CompareOp(rawValue: o) {
            position += 1
            let right = try parseExpr()
            return .compare(left, op, right)
        }
        return .value(left)
    }

    mutating func parseExpr() throws(NorqError) -> Expr {
        var expr: Expr
        let first = try parsePrimary(allowParamExpansion: true)
        switch first {
        case .expanded(let e): expr = e
        case .primary(let p): expr = Expr(primary: p, pipes: [], location: location)
        }
        while peek == .pipe {
            position += 1
            guard case .word(let name)? = peek else { throw fail("expected a pipe name after '|'") }
            position += 1
            var args: [Primary] = []
            argLoop: while let token = peek {
                switch token {
                case .word, .string, .number:
                    let arg = try parsePrimary(allowParamExpansion: false)
                    if case .primary(let p) = arg { args.append(p) }
                default: break argLoop
                }
            }
            expr.pipes.append(PipeCall(pipe: Pipe(rawValue: name), name: name, args: args, location: location))
        }
        return expr
    }

    enum ParsedPrimary { case primary(Primary), expanded(Expr) }

    mutating func parsePrimary(allowParamExpansion: Bool) throws(NorqError) -> ParsedPrimary {
        guard let token = peek else { throw fail("expected a value") }
        position += 1
        switch token {
        case .string(let s): return .primary(.literal(.string(s)))
        case .number(let n): return .primary(.literal(n))
        case .word(let w):
            switch w {
            case "true": return .primary(.literal(.bool(true)))
            case "false": return .primary(.literal(.bool(false)))
            case "null", "nil": return .primary(.literal(.null))
            default: break
            }
            if w.hasPrefix("@") {
                let name = String(w.dropFirst())
                guard let bound = scope.params[name] else { return .primary(.unbound(name)) }
                if allowParamExpansion { return .expanded(bound) }
                guard bound.pipes.isEmpty else {
                    throw fail("partial parameter '@\(name)' with pipes cannot be a pipe argument")
                }
                return .primary(bound.primary)
            }
            return .primary(.path(try Self.compilePath(w, scope: scope, location: location)))
        default:
            throw fail("unexpected \(describe(token))")
        }
    }

    static func compilePath(_ text: String, scope: Scope, location: SourceLocation) throws(NorqError) -> PathRef {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard !parts.contains(where: \.isEmpty) else {
            throw NorqError(.templateSyntaxError, "invalid path '\(text)'", at: location)
        }
        if let slot = scope.locals.lastIndex(of: String(parts[0])) {
            return PathRef(root: .local(slot), components: parts.dropFirst().map(PathComponent.init), display: text)
        }
        let components = parts.first == "this" && parts.count > 1 ? Array(parts.dropFirst()) : parts
        return PathRef(root: .data, components: components.map(PathComponent.init), display: text)
    }
}
