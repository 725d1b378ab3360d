/// A small allocation-free JSON syntax checker (RFC 8259) used on the hot path instead of Foundation.
enum JSONSyntax {
    /// True when `bytes` is exactly one JSON object (surrounding whitespace allowed). Pass contiguous bytes
    /// (`UnsafeRawBufferPointer`, `[UInt8]`) on hot paths: every index into a `ByteBufferView` is checked.
    static func isObject<C: RandomAccessCollection>(_ bytes: C) -> Bool where C.Element == UInt8, C.Index == Int {
        var parser = Parser(bytes: bytes)
        parser.skipWhitespace()
        guard parser.peek() == UInt8(ascii: "{") else { return false }
        guard parser.value(depth: 0) else { return false }
        parser.skipWhitespace()
        return parser.index == bytes.endIndex
    }

    struct Parser<C: RandomAccessCollection> where C.Element == UInt8, C.Index == Int {
        let bytes: C
        var index: Int
        init(bytes: C) {
            self.bytes = bytes
            self.index = bytes.startIndex
        }

        func peek() -> UInt8? { index < bytes.endIndex ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while let c = peek(), c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { index += 1 }
        }

        mutating func consume(_ c: UInt8) -> Bool {
            if peek() == c { index += 1; return true }
            return false
        }

        mutating func literal(_ s: StaticString) -> Bool {
            let count = s.utf8CodeUnitCount
            guard bytes.endIndex - index >= count else { return false }
            let p = s.utf8Start
            for i in 0..<count where bytes[index + i] != p[i] { return false }
            index += count
            return true
        }

        mutating func value(depth: Int) -> Bool {
            guard depth < 512 else { return false }
            skipWhitespace()
            guard let c = peek() else { return false }
            switch c {
            case UInt8(ascii: "{"):
                index += 1
                skipWhitespace()
                if consume(UInt8(ascii: "}")) { return true }
                while true {
                    skipWhitespace()
                    guard string() else { return false }
                    skipWhitespace()
                    guard consume(UInt8(ascii: ":")) else { return false }
                    guard value(depth: depth + 1) else { return false }
                    skipWhitespace()
                    if consume(UInt8(ascii: ",")) { continue }
                    return consume(UInt8(ascii: "}"))
                }
            case UInt8(ascii: "["):
                index += 1
                skipWhitespace()
                if consume(UInt8(ascii: "]")) { return true }
                while true {
                    guard value(depth: depth + 1) else { return false }
                    skipWhitespace()
                    if consume(UInt8(ascii: ",")) { continue }
                    return consume(UInt8(ascii: "]"))
                }
            case UInt8(ascii: "\""): return string()
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return literal("null")
            default: return number()
            }
        }

        mutating func string() -> Bool {
            guard consume(UInt8(ascii: "\"")) else { return false }
            // Fast path over plain characters; escapes, the closing quote and control bytes go the long way.
            let end = bytes.endIndex
            while index < end {
                let c = bytes[index]
                if c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") { break }
                index += 1
            }
            while let c = peek() {
                index += 1
                switch c {
                case UInt8(ascii: "\""): return true
                case UInt8(ascii: "\\"):
                    guard let e = peek() else { return false }
                    index += 1
                    switch e {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                         UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        continue
                    case UInt8(ascii: "u"):
                        for _ in 0..<4 {
                            guard let h = peek(), isHex(h) else { return false }
                            index += 1
                        }
                    default: return false
                    }
                default:
                    if c < 0x20 { return false }
                }
            }
            return false
        }

        func isHex(_ c: UInt8) -> Bool {
            (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46)
        }

        mutating func digits() -> Int {
            var n = 0
            while let c = peek(), c >= 0x30 && c <= 0x39 { index += 1; n += 1 }
            return n
        }

        mutating func number() -> Bool {
            _ = consume(UInt8(ascii: "-"))
            if consume(UInt8(ascii: "0")) {
                // no leading zeros
            } else if digits() == 0 {
                return false
            }
            if consume(UInt8(ascii: ".")) { guard digits() > 0 else { return false } }
            if consume(UInt8(ascii: "e")) || consume(UInt8(ascii: "E")) {
                if !consume(UInt8(ascii: "+")) { _ = consume(UInt8(ascii: "-")) }
                guard digits() > 0 else { return false }
            }
            return true
        }
    }
}
