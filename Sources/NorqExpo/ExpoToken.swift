public import NorqCore

/// Expo push tokens: `ExponentPushToken[...]`, `ExpoPushToken[...]`, or a bare UUID (as Expo's SDK accepts).
public enum ExpoToken {
    /// Whether `token` is an Expo push token. Native APNs (64 hex digits) and FCM tokens are not: one of them in a
    /// request would fail every token it carries.
    public static func isValid(_ token: String) -> Bool {
        // On the string's own UTF-8 (once per target: no array of its bytes, no arrays of the prefixes).
        if let valid = token.utf8.withContiguousStorageIfAvailable(isValid) { return valid }
        return Array(token.utf8).withUnsafeBufferPointer(isValid)
    }

    private static let prefixes: [[UInt8]] = [Array("ExponentPushToken[".utf8), Array("ExpoPushToken[".utf8)]

    private static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        for p in prefixes {
            if bytes.count > p.count + 1, bytes.starts(with: p), bytes.last == 93 /* ] */ {
                let inner = bytes[p.count..<(bytes.count - 1)]
                return inner.count <= 256 && inner.allSatisfy { $0 > 32 && $0 < 127 && $0 != 93 && $0 != 91 && $0 != 34 && $0 != 92 }
            }
        }
        return isUUID(bytes)
    }

    /// 8-4-4-4-12 hex digits, either case.
    static func isUUID(_ bytes: some Collection<UInt8>) -> Bool {
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                if byte != 45 { return false }
            } else if !((byte >= 48 && byte <= 57) || (byte >= 97 && byte <= 102) || (byte >= 65 && byte <= 70)) {
                return false
            }
        }
        return true
    }

    /// Throws `expo/invalid-token` unless `token` is an Expo push token.
    public static func check(_ token: PushToken) throws(NorqError) {
        guard isValid(token.token) else {
            throw NorqError(.expoInvalidToken,
                            "\(token.redacted) is not an Expo push token (ExponentPushToken[...], ExpoPushToken[...] or a UUID)",
                            hint: "native APNs and FCM tokens go to the apns and fcm providers; an Expo app gets its token from getExpoPushTokenAsync")
        }
    }
}
