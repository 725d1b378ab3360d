import Synchronization

/// Generates random lowercase UUIDs (version 4) for `apns-id` without a system call per id:
/// a xoshiro256** generator seeded once from the system CSPRNG.
enum APNsRequestID {
    private static let state = Mutex<(UInt64, UInt64, UInt64, UInt64)>({
        var system = SystemRandomNumberGenerator()
        return (system.next(), system.next(), system.next(), system.next() | 1)
    }())

    private static func rotl(_ x: UInt64, _ k: UInt64) -> UInt64 { (x << k) | (x >> (64 - k)) }

    private static func next2() -> (UInt64, UInt64) {
        state.withLock { s in
            func step() -> UInt64 {
                let result = rotl(s.1 &* 5, 7) &* 9
                let t = s.1 << 17
                s.2 ^= s.0
                s.3 ^= s.1
                s.1 ^= s.2
                s.0 ^= s.3
                s.2 ^= t
                s.3 = rotl(s.3, 45)
                return result
            }
            return (step(), step())
        }
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// A fresh random lowercase UUID, `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`.
    static func random() -> String {
        var (high, low) = next2()
        high = (high & ~0xF000) | 0x4000                       // version 4
        low = (low & ~(0xC000_0000_0000_0000)) | 0x8000_0000_0000_0000  // RFC 4122 variant
        return format(high: high, low: low)
    }

    static func format(high: UInt64, low: UInt64) -> String {
        var bytes = [UInt8](repeating: UInt8(ascii: "-"), count: 36)
        var position = 0
        func put(_ value: UInt64, nibbles: Int) {
            var n = nibbles
            while n > 0 {
                n -= 1
                if position == 8 || position == 13 || position == 18 || position == 23 { position += 1 }
                bytes[position] = hex[Int((value >> UInt64(n * 4)) & 0xF)]
                position += 1
            }
        }
        put(high, nibbles: 16)
        put(low, nibbles: 16)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// True for a canonical lowercase UUID (8-4-4-4-12 hex digits).
    static func isValid(_ text: String) -> Bool {
        guard text.utf8.count == 36 else { return false }
        var text = text
        return text.withUTF8 { bytes in
            for i in 0..<36 {
                let c = bytes[i]
                if i == 8 || i == 13 || i == 18 || i == 23 {
                    if c != UInt8(ascii: "-") { return false }
                } else if !((c >= 48 && c <= 57) || (c >= 97 && c <= 102)) {
                    return false
                }
            }
            return true
        }
    }
}
