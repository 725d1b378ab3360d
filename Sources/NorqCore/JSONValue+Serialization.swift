extension JSONValue {
    /// Compact UTF-8 JSON. Strings are escaped so that no data can change the structure.
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(into: &out)
        return out
    }

    /// Pretty-printed JSON (two-space indent), for dry runs.
    public func prettyPrinted() -> String {
        var out: [UInt8] = []
        writePretty(into: &out, indent: 0)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends compact JSON to `out`.
    public func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d): Self.writeDouble(d, into: &out)
        case .string(let s): Self.writeString(s, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            var first = true
            for (key, value) in object {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                Self.writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                value.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private func writePretty(into out: inout [UInt8], indent: Int) {
        func newline(_ level: Int) {
            out.append(UInt8(ascii: "\n"))
            out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: level * 2))
        }
        switch self {
        case .array(let items) where !items.isEmpty:
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                item.writePretty(into: &out, indent: indent + 1)
            }
            newline(indent)
            out.append(UInt8(ascii: "]"))
        case .object(let object) where !object.isEmpty:
            out.append(UInt8(ascii: "{"))
            var first = true
            for (key, value) in object {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                newline(indent + 1)
                Self.writeString(key, into: &out)
                out.append(contentsOf: ": ".utf8)
                value.writePretty(into: &out, indent: indent + 1)
            }
            newline(indent)
            out.append(UInt8(ascii: "}"))
        default:
            write(into: &out)
        }
    }

    static func writeDouble(_ d: Double, into out: inout [UInt8]) {
        guard d.isFinite else {
            out.append(contentsOf: "null".utf8)
            return
        }
        if d == d.rounded(), abs(d) < 1e15 {
            out.append(contentsOf: String(Int64(d)).utf8)
        } else {
            out.append(contentsOf: "\(d)".utf8)
        }
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// Writes a JSON string literal. Control characters, quotes and backslashes are escaped;
    /// U+2028/U+2029 too, so the output is safe inside JavaScript as well.
    public static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { bytes in
            // Most strings (tokens, ids, plain text) need no escape: one tight scan, then one copy.
            if !ByteScan.mayNeedJSONEscape(bytes) {
                out.append(contentsOf: bytes)
                return
            }
            var runStart = 0
            var i = 0
            let n = bytes.count
            while i < n {
                let b = bytes[i]
                var escape: [UInt8]? = nil
                if b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") {
                    switch b {
                    case UInt8(ascii: "\""): escape = [92, 34]
                    case UInt8(ascii: "\\"): escape = [92, 92]
                    case 0x0A: escape = [92, UInt8(ascii: "n")]
                    case 0x0D: escape = [92, UInt8(ascii: "r")]
                    case 0x09: escape = [92, UInt8(ascii: "t")]
                    case 0x08: escape = [92, UInt8(ascii: "b")]
                    case 0x0C: escape = [92, UInt8(ascii: "f")]
                    default:
                        escape = [92, UInt8(ascii: "u"), 48, 48, hex[Int(b >> 4)], hex[Int(b & 0xF)]]
                    }
                } else if b == 0xE2, i + 2 < n, bytes[i + 1] == 0x80, bytes[i + 2] == 0xA8 || bytes[i + 2] == 0xA9 {
                    escape = Array((bytes[i + 2] == 0xA8 ? "\\u2028" : "\\u2029").utf8)
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<i]))
                    out.append(contentsOf: escape!)
                    i += 3
                    runStart = i
                    continue
                }
                if let escape {
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<i]))
                    out.append(contentsOf: escape)
                    runStart = i + 1
                }
                i += 1
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<n]))
        }
        out.append(UInt8(ascii: "\""))
    }
}
