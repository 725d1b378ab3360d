/// Whole-buffer byte checks done eight bytes at a time (SWAR: SIMD within a 64-bit register), for the scans that
/// run on every push (a registration token's characters, a JSON string's need for escapes). Each answers exactly
/// what the per-byte definition in its doc comment says; the tests compare both for every byte value at every
/// position of a word.
package enum ByteScan {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// The high bit of each byte of `word` that is zero.
    @inline(__always)
    private static func zeroBytes(_ word: UInt64) -> UInt64 {
        // Exact per byte: a byte's high bit is set only for a zero byte (no borrow crosses into a byte from a
        // non-zero byte below: the low seven bits are added first).
        ~(((word & ~highBits) &+ ~highBits) | word | ~highBits)
    }

    /// The high bit of each byte of `word` (all bytes < 0x80) that lies in `lower...upper` (both < 0x80).
    @inline(__always)
    private static func inRange(_ word: UInt64, _ lower: UInt8, _ upper: UInt8) -> UInt64 {
        // Per byte x < 0x80: x + (0x80 - lower) has its high bit set iff x >= lower, and x + (0x7F - upper) iff
        // x > upper; neither sum carries out of its byte.
        let atLeastLower = word &+ ones &* UInt64(0x80 - lower)
        let aboveUpper = word &+ ones &* UInt64(0x7F - upper)
        return atLeastLower & ~aboveUpper & highBits
    }

    /// True when `word` passes for each whole 8-byte word of `bytes` (read little-endian, with its offset) and
    /// `byte` for each byte after the last whole word. Stops at the first that does not.
    @inline(__always)
    private static func allPass(_ bytes: UnsafeBufferPointer<UInt8>, word: (UInt64, Int) -> Bool,
                                byte: (UInt8) -> Bool) -> Bool {
        var index = 0
        let count = bytes.count
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            while index + 8 <= count {
                guard word(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)), index) else {
                    return false
                }
                index += 8
            }
        }
        while index < count {
            guard byte(bytes[index]) else { return false }
            index += 1
        }
        return true
    }

    /// True when every byte is an ASCII letter, a digit, `-`, `_`, `:` or `.` (an FCM registration token's
    /// characters). True for an empty buffer.
    package static func allTokenCharacters(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        allPass(bytes, word: { word, _ in
            guard word & highBits == 0 else { return false }
            let valid = inRange(word, 0x2D, 0x2E)           // - .
                | inRange(word, 0x30, 0x3A)                  // 0-9 :
                | inRange(word, 0x41, 0x5A)                  // A-Z
                | inRange(word, 0x5F, 0x5F)                  // _
                | inRange(word, 0x61, 0x7A)                  // a-z
            return valid == highBits
        }, byte: isTokenCharacter)
    }

    /// The per-byte definition of `allTokenCharacters`.
    package static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: ":"),
             UInt8(ascii: "."): true
        default: false
        }
    }

    /// True when some byte may need a JSON escape: a control character (< 0x20), `"`, `\`, or 0xE2 (the first
    /// byte of U+2028 and U+2029, which `JSONValue` escapes). A word holding a byte >= 0x80 is checked byte by byte.
    package static func mayNeedJSONEscape(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        !allPass(bytes, word: { word, index in
            guard word & highBits == 0 else {
                for offset in 0..<8 where needsJSONEscape(bytes[index + offset]) { return false }
                return true
            }
            let control = ~inRange(word, 0x20, 0x7F) & highBits
            let quote = zeroBytes(word ^ (ones &* 0x22))
            let backslash = zeroBytes(word ^ (ones &* 0x5C))
            return control | quote | backslash == 0
        }, byte: { !needsJSONEscape($0) })
    }

    /// The per-byte definition of `mayNeedJSONEscape`.
    package static func needsJSONEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == 0xE2
    }
}
