import OrderedCollections

extension JSONValue {
    /// Parses JSON text, keeping object key order. Errors are `push/invalid-json` with line and column.
    public init(parsing text: String, file: String? = nil, maxDepth: Int = 256) throws(NorqError) {
        try self.init(parsing: Array(text.utf8), file: file, maxDepth: maxDepth)
    }

    /// Parses UTF-8 JSON bytes, keeping object key order.
    public init(parsing bytes: [UInt8], file: String? = nil, maxDepth: Int = 256) throws(NorqError) {
        var parser = JSONParser(bytes: bytes, file: file, maxDepth: maxDepth)
        self = try parser.parseDocument()
    }

    /// Parses UTF-8 JSON bytes, counting the elements of the arrays at `limit`'s paths while parsing: the parse stops
    /// with `limit.error` at the first element past `limit.maximum` in any one group, before the rest of the text is
    /// read (a large list is refused without building it).
    public init(parsing bytes: [UInt8], maxDepth: Int = 256, limit: JSONElementLimit) throws(NorqError) {
        var parser = JSONParser(bytes: bytes, file: nil, maxDepth: maxDepth)
        parser.limit = limit
        parser.counts = Array(repeating: 0, count: limit.groups.count)
        self = try parser.parseDocument()
    }
}

/// The most elements that the arrays at some paths may hold together, checked while parsing
/// (`JSONValue(parsing:maxDepth:limit:)`).
public struct JSONElementLimit: Sendable {
    /// One step of a path from the document's root: an object key, or any index of an array.
    public enum Step: Sendable, Hashable {
        case key(String)
        case index
    }

    /// Groups of array paths (each path ends at an array element, `.index`); the elements at a group's paths are
    /// counted together, and each group may hold at most `maximum`.
    public var groups: [[[Step]]]
    public var maximum: Int
    /// The error thrown at the first element past `maximum`.
    public var error: NorqError

    public init(groups: [[[Step]]], maximum: Int, error: NorqError) {
        self.groups = groups
        self.maximum = maximum
        self.error = error
    }
}

struct JSONParser {
    let bytes: [UInt8]
    let file: String?
    let maxDepth: Int
    var index = 0
    var depth = 0
    /// With a limit: the path from the root to the value being parsed, and the count of each group.
    var limit: JSONElementLimit?
    var path: [JSONElementLimit.Step] = []
    var counts: [Int] = []

    init(bytes: [UInt8], file: String?, maxDepth: Int) {
        self.bytes = bytes
        self.file = file
        self.maxDepth = maxDepth
    }

    mutating func parseDocument() throws(NorqError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        if index != bytes.count { throw error("unexpected trailing characters") }
        return value
    }

    func location(_ at: Int) -> SourceLocation {
        var line = 1, column = 1
        for b in bytes[..<min(at, bytes.count)] {
            if b == 0x0A { line += 1; column = 1 } else if b & 0xC0 != 0x80 { column += 1 }
        }
        return SourceLocation(file: file, line: line, column: column)
    }

    func error(_ message: String) -> NorqError {
        NorqError(.invalidJSON, "invalid JSON: \(message)", at: location(index))
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func expect(_ literal: String, _ value: JSONValue) throws(NorqError) -> JSONValue {
        for b in literal.utf8 {
            guard index < bytes.count, bytes[index] == b else { throw error("expected \(literal)") }
            index += 1
        }
        return value
    }

    mutating func parseValue() throws(NorqError) -> JSONValue {
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): return try expect("true", .bool(true))
        case UInt8(ascii: "f"): return try expect("false", .bool(false))
        case UInt8(ascii: "n"): return try expect("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected character")
        }
    }

    mutating func enter() throws(NorqError) {
        depth += 1
        if depth > maxDepth { throw error("nesting deeper than \(maxDepth)") }
    }

    mutating func parseObject() throws(NorqError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var object = OrderedDictionary<String, JSONValue>()
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(object)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a key string") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipWhitespace()
            if limit != nil {
                path.append(.key(key))
                object[key] = try parseValue()
                path.removeLast()
            } else {
                object[key] = try parseValue()
            }
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input in object") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(object) }
            throw error("expected ',' or '}'")
        }
    }

    mutating func parseArray() throws(NorqError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(items)
        }
        while true {
            skipWhitespace()
            if limit != nil {
                path.append(.index)
                try countElement()
                items.append(try parseValue())
                path.removeLast()
            } else {
                items.append(try parseValue())
            }
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input in array") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
            throw error("expected ',' or ']'")
        }
    }

    /// Counts the array element at `path` in every group with that path; throws past the maximum.
    mutating func countElement() throws(NorqError) {
        guard let limit else { return }
        for (group, paths) in limit.groups.enumerated() where paths.contains(path) {
            counts[group] += 1
            if counts[group] > limit.maximum { throw limit.error }
        }
    }

    mutating func parseHex4() throws(NorqError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            let digit: UInt32
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(b - UInt8(ascii: "A") + 10)
            default: throw error("bad \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    mutating func parseString() throws(NorqError) -> String {
        index += 1
        var out: [UInt8] = []
        while true {
            guard index < bytes.count else { throw error("unterminated string") }
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                index += 1
                break
            }
            if b < 0x20 { throw error("control character in string") }
            if b == UInt8(ascii: "\\") {
                index += 1
                guard index < bytes.count else { throw error("unterminated escape") }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard index + 6 <= bytes.count, bytes[index] == UInt8(ascii: "\\"),
                              bytes[index + 1] == UInt8(ascii: "u")
                        else { throw error("unpaired surrogate") }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw error("unpaired surrogate")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw error("bad \\u escape") }
                    out.append(contentsOf: Array(String(Character(unicode)).utf8))
                default: throw error("bad escape")
                }
                continue
            }
            out.append(b)
            index += 1
        }
        guard let string = String(validating: out, as: UTF8.self) else { throw error("invalid UTF-8 in string") }
        return string
    }

    mutating func parseNumber() throws(NorqError) -> JSONValue {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        func digits(_ p: inout JSONParser) -> Int {
            let s = p.index
            while p.index < p.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(p.bytes[p.index]) { p.index += 1 }
            return p.index - s
        }
        guard digits(&self) > 0 else { throw error("bad number") }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard digits(&self) > 0 else { throw error("bad number") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits(&self) > 0 else { throw error("bad number") }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger, let int = Int64(text) { return .int(int) }
        guard let double = Double(text) else { throw error("bad number") }
        return .double(double)
    }
}
