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
        var name: [UInt8] = Array(key.utf8)
        name.append(0)
        name.append(contentsOf: token.utf8)
        return uuidV5(namespace: namespace, name: name)
    }

    /// UUID version 5 (SHA-1, name-based) of `name` in `namespace` (16 bytes), formatted lowercase.
    public static func uuidV5(namespace: [UInt8], name: [UInt8]) -> String {
        var hasher = Insecure.SHA1()
        hasher.update(data: namespace)
        hasher.update(data: name)
        var bytes = Array(hasher.finalize().prefix(16))
        bytes[6] = (bytes[6] & 0x0f) | 0x50 // version 5
        bytes[8] = (bytes[8] & 0x3f) | 0x80 // RFC 4122 variant
        return format(bytes)
    }

    /// A random UUID version 4, formatted lowercase (the generated idempotency key when a caller gives none).
    public static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        return random(using: &generator)
    }

    /// A random UUID version 4 from the given generator (tests pass a seeded one).
    public static func random(using generator: inout some RandomNumberGenerator) -> String {
        var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        bytes[6] = (bytes[6] & 0x0f) | 0x40
        bytes[8] = (bytes[8] & 0x3f) | 0x80
        return format(bytes)
    }

    /// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` from 16 bytes.
    public static func format(_ bytes: [UInt8]) -> String {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(36)
        for (index, byte) in bytes.prefix(16).enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { out.append(UInt8(ascii: "-")) }
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
