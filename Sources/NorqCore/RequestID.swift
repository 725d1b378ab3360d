import Crypto

/// Stable per-token request ids (APNs `apns-id`): a name-based UUID version 5 (RFC 9562) of the
/// idempotency key and the device token, so that every retry of one token carries the same id and a
/// repeated send with the same key derives the same id again.
///
/// Formatted as 36 lowercase characters (`8-4-4-4-12`), as APNs expects. No Foundation.
public enum RequestID {
    /// The namespace of Norq request ids (a fixed random UUID, never change it: ids are API).
    public static let namespace: [UInt8] = [
        0x6e, 0x6f, 0x72, 0x71, 0x2d, 0x31, 0x4c, 0x5e, 0x9a, 0x0b, 0x3c, 0x2f, 0x71, 0xd4, 0x58, 0xa6,
    ]

    /// The request id of one (idempotency key, target) pair: UUIDv5 over `key`, a NUL byte and `token`.
    public static func make(idempotencyKey key: String, token: String) -> String {
        // Hashed piece by piece: no name array is built (this runs once per token of every send).
        var hasher = Insecure.SHA1()
        hasher.update(data: namespace)
        var key = key
        key.withUTF8 { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        withUnsafeBytes(of: UInt8(0)) { hasher.update(bufferPointer: $0) }
        var token = token
        token.withUTF8 { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        return formatV5(hasher.finalize())
    }

    /// UUID version 5 (SHA-1, name-based) of `name` in `namespace` (16 bytes), formatted lowercase.
    public static func uuidV5(namespace: [UInt8], name: [UInt8]) -> String {
        var hasher = Insecure.SHA1()
        hasher.update(data: namespace)
        hasher.update(data: name)
        return formatV5(hasher.finalize())
    }

    /// A UUID version 5 over a name given piece by piece (the same id as `uuidV5(namespace:name:)` of the pieces
    /// joined): a name of any size is hashed without being held (a send's fingerprint over a million targets).
    public struct V5: Sendable {
        private var hasher = Insecure.SHA1()

        public init(namespace: [UInt8]) { hasher.update(data: namespace) }

        public mutating func update(_ bytes: [UInt8]) { hasher.update(data: bytes) }

        public mutating func update(_ text: String) {
            var text = text
            text.withUTF8 { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        }

        public mutating func update(byte: UInt8) {
            withUnsafeBytes(of: byte) { hasher.update(bufferPointer: $0) }
        }

        public func finalize() -> String { RequestID.formatV5(hasher.finalize()) }
    }

    /// The first 16 bytes of a SHA-1 digest with the version-5 and RFC 4122 variant bits, formatted.
    static func formatV5(_ digest: Insecure.SHA1Digest) -> String {
        digest.withUnsafeBytes { raw in
            format(count: 16) { index in
                switch index {
                case 6: (raw[6] & 0x0f) | 0x50 // version 5
                case 8: (raw[8] & 0x3f) | 0x80 // RFC 4122 variant
                default: raw[index]
                }
            }
        }
    }

    /// A random UUID version 4, formatted lowercase (the generated idempotency key when a caller gives none).
    public static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        return random(using: &generator)
    }

    /// A random UUID version 4 from the given generator (tests pass a seeded one).
    public static func random(using generator: inout some RandomNumberGenerator) -> String {
        // Two draws of 64 bits (the system generator makes one getrandom call per draw, not one per byte).
        format(high: generator.next(), low: generator.next(), version: 4)
    }

    /// The UUID of 128 bits given as two halves, with its version and the RFC 4122 variant set, formatted.
    static func format(high: UInt64, low: UInt64, version: UInt8) -> String {
        format(count: 16) { index in
            let byte = UInt8(truncatingIfNeeded: (index < 8 ? high : low) >> (UInt64(7 - index % 8) * 8))
            switch index {
            case 6: return (byte & 0x0f) | (version << 4)
            case 8: return (byte & 0x3f) | 0x80 // RFC 4122 variant
            default: return byte
            }
        }
    }

    /// A UUID version 7 (RFC 9562): the 48-bit Unix time in milliseconds, then 74 random bits. Ids made in later
    /// milliseconds sort after earlier ones, as text too, so a database index of them grows at its right edge
    /// (a send id is a key of several indexes; random ids dirty a random index page per insert).
    public static func timeOrdered(unixMillis: Int64) -> String {
        var generator = SystemRandomNumberGenerator()
        return timeOrdered(unixMillis: unixMillis, using: &generator)
    }

    /// A UUID version 7 from the given time and generator (tests pass a seeded one).
    public static func timeOrdered(unixMillis: Int64, using generator: inout some RandomNumberGenerator) -> String {
        let time = UInt64(clamping: max(0, unixMillis)) & 0xffff_ffff_ffff
        return format(high: (time << 16) | (generator.next() & 0xffff), low: generator.next(), version: 7)
    }

    /// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` from 16 bytes.
    public static func format(_ bytes: [UInt8]) -> String {
        format(count: min(16, bytes.count)) { bytes[$0] }
    }

    private static let hexDigits: StaticString = "0123456789abcdef"

    /// Formats `count` (at most 16) bytes given by `byte(index)` as a UUID string, written in place.
    static func format(count: Int, _ byte: (Int) -> UInt8) -> String {
        let length = count * 2 + (count > 10 ? 4 : count > 8 ? 3 : count > 6 ? 2 : count > 4 ? 1 : 0)
        return String(unsafeUninitializedCapacity: length) { out in
            let digits = hexDigits.utf8Start
            var position = 0
            for index in 0..<count {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    out[position] = UInt8(ascii: "-")
                    position += 1
                }
                let value = byte(index)
                out[position] = digits[Int(value >> 4)]
                out[position + 1] = digits[Int(value & 0x0f)]
                position += 2
            }
            return position
        }
    }
}
