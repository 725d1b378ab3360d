import NorqCore
import OrderedCollections

/// The 40 built-in pipes of the Norq template language. Semantics are documented in `docs/templates.md`.
enum Pipe: String, CaseIterable, Sendable {
    // strings
    case capitalize, uppercase, lowercase, titlecase, truncate, trim
    case trimStart = "trim_start", trimEnd = "trim_end"
    case replace, append, prepend, `default`, pluralize, md5, split
    // arrays
    case count, join, unique, at, first, last, reverse, sort, slice
    // numbers
    case add, subtract, multiply, divide, round, mod, abs, ceil, floor, percent, number, currency
    // misc
    case json
    case fromJSON = "from_json"
    case date, timezone

    static func suggestion(for name: String) -> String? {
        let lower = name.lowercased()
        var best: (String, Int)? = nil
        for p in allCases {
            let d = editDistance(Array(lower.utf8), Array(p.rawValue.utf8))
            if d <= 2, d < (best?.1 ?? Int.max) { best = (p.rawValue, d) }
        }
        return best.map { "did you mean '\($0.0)'?" }
    }

    static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = Swift.min(previous[j] + 1, current[j - 1] + 1,
                                       previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }

    func fail(_ message: String, _ location: SourceLocation) -> NorqError {
        NorqError(.templatePipeError, "pipe '\(rawValue)': \(message)", at: location)
    }

    private func string(_ v: JSONValue?) -> String { v?.text ?? "" }

    private func number(_ v: JSONValue?, _ what: String, _ location: SourceLocation) throws(NorqError) -> Double {
        guard let v, let d = v.numberValue else {
            throw fail("\(what) is not a number (\(v?.compactDescription ?? "missing"))", location)
        }
        return d
    }

    private func intArg(_ args: [JSONValue?], _ i: Int, default def: Int?, _ location: SourceLocation)
        throws(NorqError) -> Int
    {
        guard i < args.count else {
            if let def { return def }
            throw fail("needs argument \(i + 1)", location)
        }
        let d = try number(args[i], "argument \(i + 1)", location)
        guard d.isFinite, Swift.abs(d) < 1e9 else { throw fail("argument \(i + 1) out of range", location) }
        return Int(d)
    }

    private func stringArg(_ args: [JSONValue?], _ i: Int, default def: String?, _ location: SourceLocation)
        throws(NorqError) -> String
    {
        guard i < args.count else {
            if let def { return def }
            throw fail("needs argument \(i + 1)", location)
        }
        return string(args[i])
    }

    private func array(_ v: JSONValue?, _ location: SourceLocation) throws(NorqError) -> [JSONValue] {
        switch v {
        case .array(let a)?: return a
        case nil, .null?: return []
        case .string(let s)?: return s.map { .string(String($0)) }
        default: throw fail("input is not a list", location)
        }
    }

    private static func numeric(_ d: Double) -> JSONValue {
        if d.isFinite, d == d.rounded(), Swift.abs(d) < 9.0e15 { return .int(Int64(d)) }
        return .double(d)
    }

    func apply(to input: JSONValue?, args: [JSONValue?], location: SourceLocation) throws(NorqError) -> JSONValue? {
        switch self {
        case .capitalize:
            let s = string(input)
            guard let f = s.first else { return .string(s) }
            return .string(f.uppercased() + s.dropFirst())
        case .uppercase: return .string(string(input).uppercased())
        case .lowercase: return .string(string(input).lowercased())
        case .titlecase:
            var out = ""
            var atWordStart = true
            for c in string(input) {
                if c.isWhitespace || c == "-" { out.append(c); atWordStart = true; continue }
                out += atWordStart ? c.uppercased() : c.lowercased()
                atWordStart = false
            }
            return .string(out)
        case .truncate:
            let s = string(input)
            let n = Swift.max(0, try intArg(args, 0, default: nil, location))
            let suffix = try stringArg(args, 1, default: "…", location)
            guard s.count > n else { return .string(s) }
            return .string(String(s.prefix(Swift.max(0, n - suffix.count))) + suffix)
        case .trim: return .string(string(input).trimmingWhitespace())
        case .trimStart: return .string(String(string(input).drop(while: \.isWhitespace)))
        case .trimEnd:
            var s = Substring(string(input))
            while let l = s.last, l.isWhitespace { s = s.dropLast() }
            return .string(String(s))
        case .replace:
            let old = try stringArg(args, 0, default: nil, location)
            let new = try stringArg(args, 1, default: "", location)
            guard !old.isEmpty else { return .string(string(input)) }
            return .string(string(input).replacing(old, with: new))
        case .append: return .string(string(input) + (try stringArg(args, 0, default: nil, location)))
        case .prepend: return .string((try stringArg(args, 0, default: nil, location)) + string(input))
        case .default:
            switch input {
            case nil, .null?, .string("")?: return args.first ?? nil
            default: return input
            }
        case .pluralize:
            let n = try number(input, "input", location)
            let singular = try stringArg(args, 0, default: nil, location)
            let plural = try stringArg(args, 1, default: singular + "s", location)
            return .string(n == 1 ? singular : plural)
        case .md5: return .string(MD5.hex(Array(string(input).utf8)))
        case .split:
            let sep = try stringArg(args, 0, default: ",", location)
            let s = string(input)
            if sep.isEmpty { return .array(s.map { .string(String($0)) }) }
            return .array(s.split(separator: sep, omittingEmptySubsequences: false).map { .string(String($0)) })
        case .count:
            switch input {
            case .array(let a)?: return .int(Int64(a.count))
            case .object(let o)?: return .int(Int64(o.count))
            case .string(let s)?: return .int(Int64(s.count))
            case nil, .null?: return .int(0)
            default: return .int(1)
            }
        case .join:
            let sep = try stringArg(args, 0, default: ", ", location)
            return .string(try array(input, location).map(\.text).joined(separator: sep))
        case .unique:
            var seen: [JSONValue] = []
            for v in try array(input, location) where !seen.contains(v) { seen.append(v) }
            return .array(seen)
        case .at:
            let a = try array(input, location)
            var i = try intArg(args, 0, default: nil, location)
            if i < 0 { i += a.count }
            return a.indices.contains(i) ? a[i] : .null
        case .first: return try array(input, location).first ?? .null
        case .last: return try array(input, location).last ?? .null
        case .reverse:
            if case .string(let s)? = input { return .string(String(s.reversed())) }
            return .array(try array(input, location).reversed())
        case .sort:
            let a = try array(input, location)
            let key = args.first.flatMap { $0?.stringValue }
            func sortKey(_ v: JSONValue) -> JSONValue {
                guard let key else { return v }
                return v.value(atPath: key.split(separator: ".")) ?? .null
            }
            return .array(a.sorted { l, r in
                let lk = sortKey(l), rk = sortKey(r)
                if JSONValue.compare(lk, .lt, rk) { return true }
                if JSONValue.compare(rk, .lt, lk) { return false }
                return lk.text < rk.text && !(lk.numberValue != nil && rk.numberValue != nil)
            })
        case .slice:
            let start = try intArg(args, 0, default: 0, location)
            if case .string(let s)? = input {
                let chars = Array(s)
                let lo = Swift.min(Swift.max(0, start < 0 ? chars.count + start : start), chars.count)
                let length = try intArg(args, 1, default: chars.count - lo, location)
                let hi = Swift.min(chars.count, lo + Swift.max(0, length))
                return .string(String(chars[lo..<hi]))
            }
            let a = try array(input, location)
            let lo = Swift.min(Swift.max(0, start < 0 ? a.count + start : start), a.count)
            let length = try intArg(args, 1, default: a.count - lo, location)
            let hi = Swift.min(a.count, lo + Swift.max(0, length))
            return .array(Array(a[lo..<hi]))
        case .add, .subtract, .multiply, .divide, .mod:
            let a = try number(input, "input", location)
            guard let first = args.first else { throw fail("needs a number argument", location) }
            let b = try number(first, "argument", location)
            switch self {
            case .add:
                if case .int(let x)? = input, case .int(let y)? = first {
                    let (r, o) = x.addingReportingOverflow(y)
                    if !o { return .int(r) }
                }
                return Self.numeric(a + b)
            case .subtract:
                if case .int(let x)? = input, case .int(let y)? = first {
                    let (r, o) = x.subtractingReportingOverflow(y)
                    if !o { return .int(r) }
                }
                return Self.numeric(a - b)
            case .multiply:
                if case .int(let x)? = input, case .int(let y)? = first {
                    let (r, o) = x.multipliedReportingOverflow(by: y)
                    if !o { return .int(r) }
                }
                return Self.numeric(a * b)
            case .divide:
                guard b != 0 else { throw fail("division by zero", location) }
                return Self.numeric(a / b)
            default:
                guard b != 0 else { throw fail("modulo by zero", location) }
                return Self.numeric(a.truncatingRemainder(dividingBy: b))
            }
        case .round:
            let a = try number(input, "input", location)
            let digits = Swift.min(Swift.max(0, try intArg(args, 0, default: 0, location)), 12)
            if digits == 0 { return Self.numeric(a.rounded()) }
            let scale = NumberFormat.power10(digits)
            return .double((a * scale).rounded() / scale)
        case .abs:
            if case .int(let i)? = input, i != .min { return .int(Swift.abs(i)) }
            return Self.numeric(Swift.abs(try number(input, "input", location)))
        case .ceil: return Self.numeric((try number(input, "input", location)).rounded(.up))
        case .floor: return Self.numeric((try number(input, "input", location)).rounded(.down))
        case .percent:
            let a = try number(input, "input", location)
            let digits = Swift.min(Swift.max(0, try intArg(args, 0, default: 0, location)), 12)
            return .string(NumberFormat.fixed(a * 100, digits: digits, grouping: false) + "%")
        case .number:
            let a = try number(input, "input", location)
            if args.isEmpty {
                if a == a.rounded(), Swift.abs(a) < 1e15 { return .string(NumberFormat.fixed(a, digits: 0, grouping: true)) }
                return .string(NumberFormat.grouped(NumberFormat.plain(a)))
            }
            let digits = Swift.min(Swift.max(0, try intArg(args, 0, default: 0, location)), 12)
            return .string(NumberFormat.fixed(a, digits: digits, grouping: true))
        case .currency:
            let a = try number(input, "input", location)
            let code = (try stringArg(args, 0, default: "USD", location)).uppercased()
            return .string(NumberFormat.currency(a, code: code))
        case .json:
            return .string((input ?? .null).compactDescription)
        case .fromJSON:
            guard case .string(let s)? = input else { return input }
            do { return try JSONValue(parsing: s, maxDepth: 64) } catch {
                throw fail("input is not valid JSON: \(error.message)", location)
            }
        case .date:
            let format = try stringArg(args, 0, default: "iso", location)
            guard let instant = DateValue.parse(input) else {
                throw fail("input is not a date (epoch seconds or ISO-8601)", location)
            }
            return .string(instant.format(format))
        case .timezone:
            let zone = try stringArg(args, 0, default: nil, location)
            guard let instant = DateValue.parse(input) else {
                throw fail("input is not a date (epoch seconds or ISO-8601)", location)
            }
            guard let offset = DateValue.offset(forZone: zone, at: instant.epoch) else {
                throw fail("unknown time zone '\(zone)'", location)
            }
            return .string(DateValue(epoch: instant.epoch, offsetSeconds: offset).format("iso"))
        }
    }
}

/// Number formatting without Foundation.
enum NumberFormat {
    static func power10(_ n: Int) -> Double {
        var r = 1.0
        for _ in 0..<n { r *= 10 }
        return r
    }

    static func plain(_ d: Double) -> String {
        guard d.isFinite else { return "" }
        if d == d.rounded(), Swift.abs(d) < 1e15 { return String(Int64(d)) }
        return "\(d)"
    }

    static func grouped(_ digits: String) -> String {
        var sign = ""
        var s = Substring(digits)
        if s.first == "-" { sign = "-"; s = s.dropFirst() }
        let parts = s.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let whole = Array(parts[0])
        var out = ""
        for (i, c) in whole.enumerated() {
            if i > 0, (whole.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        if parts.count > 1 { out += "." + parts[1] }
        return sign + out
    }

    static func fixed(_ value: Double, digits: Int, grouping: Bool) -> String {
        guard value.isFinite else { return "" }
        guard Swift.abs(value) < 1e15 else { return plain(value) }
        let scale = power10(digits)
        let scaled = (Swift.abs(value) * scale).rounded()
        guard scaled < 9.0e18 else { return plain(value) }
        let n = UInt64(scaled)
        let whole = n / UInt64(scale)
        let frac = n % UInt64(scale)
        var text = String(whole)
        if grouping { text = grouped(text) }
        if digits > 0 {
            var f = String(frac)
            while f.count < digits { f = "0" + f }
            text += "." + f
        }
        return (value < 0 && n != 0 ? "-" : "") + text
    }

    static func currency(_ value: Double, code: String) -> String {
        let (symbol, digits): (String?, Int) = switch code {
        case "USD": ("$", 2)
        case "EUR": ("€", 2)
        case "GBP": ("£", 2)
        case "JPY": ("¥", 0)
        case "INR": ("₹", 2)
        case "CNY": ("¥", 2)
        case "KRW": ("₩", 0)
        default: (nil, 2)
        }
        let amount = fixed(Swift.abs(value), digits: digits, grouping: true)
        let sign = value < 0 && amount.contains(where: { $0 != "0" && $0 != "." && $0 != "," }) ? "-" : ""
        if let symbol { return sign + symbol + amount }
        return sign + code + " " + amount
    }
}
