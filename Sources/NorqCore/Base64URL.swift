/// base64url (RFC 4648 §5) without padding: JWT parts (APNs, FCM, VAPID), Web Push keys and salts. One copy for
/// every provider target.
package enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Encodes without padding.
    package static func encode<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let bytes = Array(bytes)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)])
            out.append(alphabet[Int(n & 63)])
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let n = UInt32(bytes[i]) << 16
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
        } else if rest == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes base64url; trailing `=` padding is accepted (some browsers' `toJSON()` never pad, some tools do),
    /// and so are the standard alphabet's `+` and `/`. Nil for any other character or an impossible length.
    package static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var values: [UInt8] = []
        values.reserveCapacity(text.utf8.count)
        var padding = 0
        for c in text.utf8 {
            if c == UInt8(ascii: "=") { padding += 1; continue }
            guard padding == 0 else { return nil }
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): values.append(c - 65)
            case UInt8(ascii: "a")...UInt8(ascii: "z"): values.append(c - 97 + 26)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): values.append(c - 48 + 52)
            case UInt8(ascii: "-"), UInt8(ascii: "+"): values.append(62)
            case UInt8(ascii: "_"), UInt8(ascii: "/"): values.append(63)
            default: return nil
            }
        }
        guard padding <= 2 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(values.count * 3 / 4)
        var i = 0
        while i < values.count {
            let chunk = values[i..<min(i + 4, values.count)]
            if chunk.count == 1 { return nil }
            var n: UInt32 = 0
            for (j, v) in chunk.enumerated() { n |= UInt32(v) << (18 - 6 * UInt32(j)) }
            out.append(UInt8(n >> 16 & 255))
            if chunk.count > 2 { out.append(UInt8(n >> 8 & 255)) }
            if chunk.count > 3 { out.append(UInt8(n & 255)) }
            i += 4
        }
        return out
    }

    /// True when every character is of the URL-safe alphabet (what `Topic` allows).
    package static func isURLSafeAlphabet(_ text: some StringProtocol) -> Bool {
        text.utf8.allSatisfy { c in
            (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c == 45 || c == 95
        }
    }
}
