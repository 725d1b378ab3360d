/// A cheap random UUID (version 4) generator: a xoshiro256** state seeded once from the system CSPRNG,
/// formatted into 36 lowercase characters without Foundation. Not for secrets; one per connection (not shared).
struct FastUUIDGenerator {
    private var s0: UInt64, s1: UInt64, s2: UInt64, s3: UInt64

    init() {
        var rng = SystemRandomNumberGenerator()
        self.init(seed: rng.next())
    }

    init(seed: UInt64) {
        var x = seed
        func splitmix(_ x: inout UInt64) -> UInt64 {
            x &+= 0x9E37_79B9_7F4A_7C15
            var z = x
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        s0 = splitmix(&x); s1 = splitmix(&x); s2 = splitmix(&x); s3 = splitmix(&x)
    }

    mutating func next() -> UInt64 {
        let result = ((s1 &* 5) << 7 | (s1 &* 5) >> 57) &* 9
        let t = s1 << 17
        s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t
        s3 = (s3 << 45) | (s3 >> 19)
        return result
    }

    /// A double in [0, 1).
    mutating func nextUnit() -> Double { Double(next() >> 11) * 0x1.0p-53 }

    mutating func uuidString() -> String {
        var hi = next()
        var lo = next()
        hi = (hi & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000  // version 4
        lo = (lo & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000  // variant 10
        return String(unsafeUninitializedCapacity: 36) { buf in
            let hex: StaticString = "0123456789abcdef"
            let h = hex.utf8Start
            var o = 0
            func put(_ v: UInt64, _ nibbles: Int, _ o: inout Int) {
                var shift = (nibbles - 1) * 4
                for _ in 0..<nibbles {
                    buf[o] = h[Int((v >> UInt64(shift)) & 0xF)]
                    o += 1
                    shift -= 4
                }
            }
            put(hi >> 32, 8, &o); buf[o] = 0x2D; o += 1
            put((hi >> 16) & 0xFFFF, 4, &o); buf[o] = 0x2D; o += 1
            put(hi & 0xFFFF, 4, &o); buf[o] = 0x2D; o += 1
            put(lo >> 48, 4, &o); buf[o] = 0x2D; o += 1
            put(lo & 0xFFFF_FFFF_FFFF, 12, &o)
            return 36
        }
    }

    /// True for a canonical UUID `8-4-4-4-12` of hex digits (either case).
    static func isUUID(_ s: String) -> Bool {
        var count = 0
        for (i, c) in s.utf8.enumerated() {
            count += 1
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != 0x2D { return false }
            } else if !((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46)) {
                return false
            }
        }
        return count == 36
    }
}
