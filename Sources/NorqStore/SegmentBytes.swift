package import NorqCore

/// The binary form of segment values (`SegmentTarget`, `SegmentProgress`, `PositionRanges`): unsigned LEB128
/// varints, length-prefixed UTF-8 strings, a presence byte before each optional. Compact (a segment of 1,000 APNs
/// targets is ~150 KB of blob, not ~300 KB of rows and index entries) and fast to write and read; one writer and one
/// reader for every field, so a field is encoded and decoded by the same code path (`SegmentCodecTests` round-trips
/// every field).
package struct SegmentWriter {
    package private(set) var bytes: [UInt8] = []

    package init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    package mutating func byte(_ value: UInt8) { bytes.append(value) }

    package mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    /// A signed integer (zig-zag).
    package mutating func int(_ value: Int64) {
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    package mutating func int(_ value: Int) { int(Int64(value)) }

    package mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    package mutating func bool(_ value: Bool) { bytes.append(value ? 1 : 0) }

    package mutating func optional<T>(_ value: T?, _ write: (inout SegmentWriter, T) -> Void) {
        if let value {
            bytes.append(1)
            write(&self, value)
        } else {
            bytes.append(0)
        }
    }

    package mutating func raw(_ value: [UInt8]) {
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// A token or channel id: a tag, then a hex string of even length (an APNs token) as its bytes (tag 1: lower
    /// case, 2: upper case), else the string (tag 0). Read back as the same string.
    package mutating func identity(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            let hexCase = Self.hexCase(utf8)
            bytes.append(hexCase)
            guard hexCase != 0 else {
                varint(UInt64(utf8.count))
                bytes.append(contentsOf: utf8)
                return
            }
            varint(UInt64(utf8.count / 2))
            var index = 0
            while index < utf8.count {
                bytes.append(Self.nibble(utf8[index]) << 4 | Self.nibble(utf8[index + 1]))
                index += 2
            }
        }
    }

    /// 1: lower-case hex, 2: upper-case hex (digits alone count as lower case), 0: anything else or odd length.
    private static func hexCase(_ utf8: UnsafeBufferPointer<UInt8>) -> UInt8 {
        guard !utf8.isEmpty, utf8.count % 2 == 0 else { return 0 }
        var lower = false
        var upper = false
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): continue
            case UInt8(ascii: "a")...UInt8(ascii: "f"): lower = true
            case UInt8(ascii: "A")...UInt8(ascii: "F"): upper = true
            default: return 0
            }
            if lower && upper { return 0 }
        }
        return upper ? 2 : 1
    }

    private static func nibble(_ byte: UInt8) -> UInt8 {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        default: byte - UInt8(ascii: "A") + 10
        }
    }
}

/// Reads what `SegmentWriter` wrote; a truncated or malformed blob throws `store/corrupt`.
package struct SegmentReader {
    private let bytes: [UInt8]
    private var index: Int

    package init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.index = 0
    }

    package var isAtEnd: Bool { index >= bytes.count }

    private static func corrupt() -> NorqError {
        NorqError(.storeCorrupt, "a stored segment is damaged (truncated or malformed)",
                  hint: "restore the database from a backup")
    }

    package mutating func byte() throws(NorqError) -> UInt8 {
        guard index < bytes.count else { throw Self.corrupt() }
        defer { index += 1 }
        return bytes[index]
    }

    package mutating func varint() throws(NorqError) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let next = try byte()
            guard shift < 64 else { throw Self.corrupt() }
            value |= UInt64(next & 0x7f) << shift
            if next & 0x80 == 0 { return value }
            shift += 7
        }
    }

    package mutating func int64() throws(NorqError) -> Int64 {
        let raw = try varint()
        return Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }

    package mutating func int() throws(NorqError) -> Int {
        let value = try int64()
        guard let result = Int(exactly: value) else { throw Self.corrupt() }
        return result
    }

    package mutating func count() throws(NorqError) -> Int {
        let raw = try varint()
        guard raw <= UInt64(bytes.count - index) else { throw Self.corrupt() }
        return Int(raw)
    }

    package mutating func string() throws(NorqError) -> String {
        let length = try count()
        defer { index += length }
        return String(decoding: bytes[index..<(index + length)], as: UTF8.self)
    }

    package mutating func bool() throws(NorqError) -> Bool { try byte() != 0 }

    package mutating func optional<T>(_ read: (inout SegmentReader) throws(NorqError) -> T) throws(NorqError) -> T? {
        switch try byte() {
        case 0: return nil
        case 1: return try read(&self)
        default: throw Self.corrupt()
        }
    }

    package mutating func raw() throws(NorqError) -> [UInt8] {
        let length = try count()
        defer { index += length }
        return Array(bytes[index..<(index + length)])
    }

    /// What `SegmentWriter.identity` wrote.
    package mutating func identity() throws(NorqError) -> String {
        let tag = try byte()
        if tag == 0 { return try string() }
        guard tag <= 2 else { throw Self.corrupt() }
        let length = try count()
        defer { index += length }
        let digits: StaticString = tag == 1 ? "0123456789abcdef" : "0123456789ABCDEF"
        return String(unsafeUninitializedCapacity: length * 2) { buffer in
            digits.withUTF8Buffer { digits in
                for offset in 0..<length {
                    let byte = bytes[index + offset]
                    buffer[offset * 2] = digits[Int(byte >> 4)]
                    buffer[offset * 2 + 1] = digits[Int(byte & 0x0f)]
                }
            }
            return length * 2
        }
    }
}
