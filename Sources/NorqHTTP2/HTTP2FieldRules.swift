/// RFC 9113 §8.2.1's rules for the header fields of a request, checked before anything is written: a header value
/// with a CR or LF would otherwise end the field early on an HTTP/1 hop, and a server must treat it as malformed
/// (the stream is reset, and the request may look possibly processed).
///
/// - A name is a lowercase token (RFC 9110 §5.6.2 `tchar`, no uppercase letter): not empty, no byte in
///   `0x00...0x20`, `0x41...0x5A` or `0x7F...0xFF`, no separator such as `:` (pseudo-header fields are written by
///   the client itself, not taken from ``HTTP2RequestHead/fields``).
/// - A value contains no NUL (0x00), LF (0x0A) or CR (0x0D), and does not start or end with SP (0x20) or HTAB (0x09).
///   It may be empty.
///
/// The value check runs on every request (``HTTP2ConnectionPool``) and so scans eight bytes at a time; providers
/// call the same functions in `prepare`, where they can name the template.
package enum HTTP2FieldRules {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// Whether `value` may be written as a field value.
    package static func isValidValue(_ value: String) -> Bool {
        if let valid = value.utf8.withContiguousStorageIfAvailable({ isValidValue($0) }) { return valid }
        var value = value
        return value.withUTF8 { isValidValue($0) }
    }

    /// Whether `bytes` may be written as a field value. Eight bytes at a time (the last word overlapping the one
    /// before it, a short value padded): a word without a byte below 0x0E passes at once; the bytes of a value with
    /// one (HTAB, or a forbidden byte) are then looked at one by one.
    package static func isValidValue(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let count = bytes.count
        guard count > 0, let base = bytes.baseAddress else { return true }
        if isEdgeWhitespace(base[0]) || isEdgeWhitespace(base[count - 1]) { return false }
        if count < 8 { return !hasByteBelow0E(shortWord(base, count)) || noForbiddenByte(bytes) }
        var index = 0
        while index + 8 <= count {
            if hasByteBelow0E(word(base, at: index)) { return noForbiddenByte(bytes) }
            index += 8
        }
        if index < count, hasByteBelow0E(word(base, at: count - 8)) { return noForbiddenByte(bytes) }
        return true
    }

    /// Whether some byte of `word` is below 0x0E (exact as a whole: `(x - n) & ~x & 0x80` per byte, for n <= 0x80,
    /// is non-zero iff some byte is below n, whatever the bytes at or above 0x80).
    @inline(__always)
    private static func hasByteBelow0E(_ word: UInt64) -> Bool {
        (word &- ones &* 0x0E) & ~word & highBits != 0
    }

    /// The 8 bytes at `index`, little-endian.
    @inline(__always)
    private static func word(_ base: UnsafePointer<UInt8>, at index: Int) -> UInt64 {
        UInt64(littleEndian: UnsafeRawPointer(base).loadUnaligned(fromByteOffset: index, as: UInt64.self))
    }

    /// The `count` (< 8) bytes at `base`, padded with `a` (a byte every check passes).
    @inline(__always)
    private static func shortWord(_ base: UnsafePointer<UInt8>, _ count: Int) -> UInt64 {
        var word = ones &* UInt64(UInt8(ascii: "a"))
        for index in 0..<count {
            let shift = UInt64(index * 8)
            word = (word & ~(0xFF << shift)) | UInt64(base[index]) << shift
        }
        return word
    }

    private static func noForbiddenByte(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        for byte in bytes where isForbidden(byte) { return false }
        return true
    }

    /// NUL, LF or CR: never in a field value.
    @inline(__always)
    package static func isForbidden(_ byte: UInt8) -> Bool {
        byte == 0x00 || byte == 0x0A || byte == 0x0D
    }

    /// SP or HTAB: not at either end of a field value.
    @inline(__always)
    package static func isEdgeWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09
    }

    /// Whether `name` may be written as a field name: a non-empty lowercase token.
    package static func isValidName(_ name: String) -> Bool {
        if let valid = name.utf8.withContiguousStorageIfAvailable({ isValidName($0) }) { return valid }
        var name = name
        return name.withUTF8 { isValidName($0) }
    }

    /// Whether `bytes` are a non-empty lowercase token. Names made of `a-z` and `-` (all of the providers') pass
    /// eight bytes at a time; any other byte sends the name to the byte-by-byte check.
    package static func isValidName(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let count = bytes.count
        guard count > 0, let base = bytes.baseAddress else { return false }
        if count < 8 { return isLettersAndHyphens(shortWord(base, count)) || allLowercaseTokenBytes(bytes) }
        var index = 0
        while index + 8 <= count {
            if !isLettersAndHyphens(word(base, at: index)) { return allLowercaseTokenBytes(bytes) }
            index += 8
        }
        if index < count, !isLettersAndHyphens(word(base, at: count - 8)) { return allLowercaseTokenBytes(bytes) }
        return true
    }

    /// Whether every byte of `word` is `a`-`z` or `-`.
    @inline(__always)
    private static func isLettersAndHyphens(_ word: UInt64) -> Bool {
        guard word & highBits == 0 else { return false }
        // Per byte x < 0x80: x + (0x80 - lower) has its high bit set iff x >= lower, and x + (0x7F - upper) iff
        // x > upper; neither sum carries out of its byte.
        func inRange(_ lower: UInt8, _ upper: UInt8) -> UInt64 {
            (word &+ ones &* UInt64(0x80 - lower)) & ~(word &+ ones &* UInt64(0x7F - upper)) & highBits
        }
        return inRange(0x61, 0x7A) | inRange(0x2D, 0x2D) == highBits
    }

    private static func allLowercaseTokenBytes(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        for byte in bytes where !isLowercaseTokenByte(byte) { return false }
        return true
    }

    /// `tchar` of RFC 9110 §5.6.2 without the uppercase letters.
    @inline(__always)
    package static func isLowercaseTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
             UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    /// Why `value` may not be written as a field value (log-safe: the value itself is not quoted), or nil when it
    /// may.
    package static func valueProblem(_ value: String) -> String? {
        if isValidValue(value) { return nil }
        let bytes = Array(value.utf8)
        if let first = bytes.first, isEdgeWhitespace(first) { return "it starts with whitespace" }
        if let last = bytes.last, isEdgeWhitespace(last) { return "it ends with whitespace" }
        for (offset, byte) in bytes.enumerated() where isForbidden(byte) {
            let name = byte == 0x0D ? "a carriage return (CR)" : byte == 0x0A ? "a line feed (LF)" : "a NUL byte"
            return "it contains \(name) at byte \(offset)"
        }
        return "it is not a valid HTTP/2 field value"
    }

    /// Why `name` may not be written as a field name, or nil when it may.
    package static func nameProblem(_ name: String) -> String? {
        if isValidName(name) { return nil }
        if name.isEmpty { return "the name is empty" }
        if name.utf8.contains(where: { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }) {
            return "the name has an uppercase letter (HTTP/2 field names are lowercase)"
        }
        return "the name is not an HTTP token"
    }

    /// The first field of `head` that may not be written, described without its value (the name is quoted only
    /// when it is itself valid), or nil when every field may be written. The pseudo-header values (authority,
    /// path) are checked as values too.
    package static func problem(in head: HTTP2RequestHead) -> String? {
        for field in head.fields {
            if !isValidName(field.name) {
                return "a request header name is invalid: \(nameProblem(field.name) ?? "")"
            }
            if !isValidValue(field.value) {
                return "the value of request header \(field.name) is invalid: \(valueProblem(field.value) ?? "")"
            }
        }
        if !isValidValue(head.authority) { return "the request's :authority is invalid: \(valueProblem(head.authority) ?? "")" }
        if !isValidValue(head.path) { return "the request's :path is invalid: \(valueProblem(head.path) ?? "")" }
        return nil
    }
}
