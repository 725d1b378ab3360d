import NorqCore

/// Per-render mutable state: the data, the loop variables, the options and the limits.
struct RenderContext {
    let data: JSONValue
    var locals: [JSONValue] = []
    let strict: Bool
    var loopBudget: Int
    let limits: RenderLimits

    init(data: JSONValue, options: RenderOptions) {
        self.data = data
        self.strict = options.strict
        self.limits = options.limits
        self.loopBudget = options.limits.maxLoopIterations
    }

    @inline(__always)
    func lookup(_ path: PathRef) -> JSONValue? {
        var current: JSONValue
        switch path.root {
        case .data: current = data
        case .local(let slot):
            guard slot < locals.count else { return nil }
            current = locals[slot]
        }
        for component in path.components {
            switch current {
            case .object(let object):
                guard let next = object[component.key] else { return nil }
                current = next
            case .array(let array):
                guard let index = component.index else {
                    if component.key == "length" || component.key == "size" { return .int(Int64(array.count)) }
                    return nil
                }
                let i = index < 0 ? array.count + index : index
                guard i >= 0, i < array.count else { return nil }
                current = array[i]
            default:
                return nil
            }
        }
        return current
    }

    func missing(_ name: String, at location: SourceLocation) -> NorqError {
        NorqError(.templateMissingVariable, "'\(name)' is not in the data", at: location,
                  hint: "add it to the data, use `| default \"...\"`, or render with strict: false")
    }

    func resolve(_ primary: Primary) -> JSONValue? {
        switch primary {
        case .literal(let v): return v
        case .path(let p): return lookup(p)
        case .unbound: return nil
        }
    }

    func primaryName(_ primary: Primary) -> String {
        switch primary {
        case .literal(let v): return v.compactDescription
        case .path(let p): return p.display
        case .unbound(let n): return "@" + n
        }
    }

    /// Evaluates an expression; `nil` means missing (only possible in lenient places).
    func evaluate(_ expr: Expr) throws(NorqError) -> JSONValue? {
        var value = resolve(expr.primary)
        if expr.pipes.isEmpty { return value }
        for call in expr.pipes {
            guard let pipe = call.pipe else {
                if strict {
                    throw NorqError(.templateUnknownPipe, "unknown pipe '\(call.name)'", at: call.location,
                                    hint: Pipe.suggestion(for: call.name))
                }
                continue
            }
            if value == nil, pipe != .default, strict {
                throw missing(primaryName(expr.primary), at: expr.location)
            }
            if let literalArgs = call.literalArgs {
                value = try pipe.apply(to: value, args: literalArgs, location: call.location)
                continue
            }
            var args: [JSONValue?] = []
            args.reserveCapacity(call.args.count)
            for arg in call.args { args.append(resolve(arg)) }
            value = try pipe.apply(to: value, args: args, location: call.location)
        }
        return value
    }

    /// Evaluates an expression for output: a missing value is an error in strict mode, "" otherwise.
    func evaluateForOutput(_ expr: Expr) throws(NorqError) -> JSONValue {
        if let v = try evaluate(expr) { return v }
        if strict { throw missing(primaryName(expr.primary), at: expr.location) }
        return .null
    }

    func append(_ expr: Expr, to out: inout String) throws(NorqError) {
        let value = try evaluateForOutput(expr)
        if case .string(let s) = value { out += s } else { value.appendText(to: &out) }
    }

    /// Conditions are lenient: a missing path is falsy, even in strict mode (so `::: if user.vip` works).
    func test(_ condition: Condition) throws(NorqError) -> Bool {
        switch condition {
        case .value(let e): return (try evaluate(e)).isTruthy
        case .not(let c): return !(try test(c))
        case .and(let a, let b):
            guard try test(a) else { return false }
            return try test(b)
        case .or(let a, let b):
            if try test(a) { return true }
            return try test(b)
        case .compare(let l, let op, let r):
            let lv = try evaluate(l) ?? .null
            let rv = try evaluate(r) ?? .null
            return JSONValue.compare(lv, op, rv)
        }
    }
}

extension Optional where Wrapped == JSONValue {
    /// Norq truthiness: missing, null, false, "" and [] are falsy; everything else is truthy.
    var isTruthy: Bool {
        switch self {
        case nil, .null?: return false
        case .bool(let b)?: return b
        case .string(let s)?: return !s.isEmpty
        case .array(let a)?: return !a.isEmpty
        default: return true
        }
    }
}

extension JSONValue {
    /// The text form used in output: strings as is, numbers plainly, null as "", arrays/objects as JSON.
    func appendText(to out: inout String) {
        switch self {
        case .null: break
        case .string(let s): out += s
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d): out += NumberFormat.plain(d)
        case .array, .object: out += compactDescription
        }
    }

    var text: String {
        var s = ""
        appendText(to: &s)
        return s
    }

    var numberValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        case .string(let s): return Double(s.trimmingWhitespace())
        case .bool(let b): return b ? 1 : 0
        default: return nil
        }
    }

    static func compare(_ l: JSONValue, _ op: CompareOp, _ r: JSONValue) -> Bool {
        switch op {
        case .eq: return looselyEqual(l, r)
        case .ne: return !looselyEqual(l, r)
        default: break
        }
        let ordering: Int
        switch (l, r) {
        case (.string(let a), .string(let b)): ordering = a < b ? -1 : (a == b ? 0 : 1)
        default:
            guard let a = l.orderNumber, let b = r.orderNumber else { return false }
            ordering = a < b ? -1 : (a == b ? 0 : 1)
        }
        switch op {
        case .gt: return ordering > 0
        case .lt: return ordering < 0
        case .ge: return ordering >= 0
        case .le: return ordering <= 0
        default: return false
        }
    }

    private var orderNumber: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    static func looselyEqual(_ l: JSONValue, _ r: JSONValue) -> Bool {
        switch (l, r) {
        case (.int(let a), .double(let b)): return Double(a) == b
        case (.double(let a), .int(let b)): return a == Double(b)
        default: return l == r
        }
    }
}

extension String {
    /// `self` without leading and trailing whitespace; no copy when there is none (the common case).
    func trimmingWhitespace() -> String {
        guard let first = utf8.first, let last = utf8.last else { return self }
        if first > 0x20, first < 0x80, last > 0x20, last < 0x80 { return self }
        return self[...].trimmingWhitespace()
    }
}

extension StringProtocol {
    func trimmingWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s = s.dropFirst() }
        while let l = s.last, l.isWhitespace { s = s.dropLast() }
        return String(s)
    }
}
