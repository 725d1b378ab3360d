public import NorqCore
import Crypto

/// RFC 8030 request headers: `TTL`, `Urgency`, `Topic`. Pure functions, unit-tested.
public enum WebPushHeaders {
    /// RFC 8030 §5.3 urgency values. An open set kept as strings; these four are all the RFC defines.
    public static let urgencies = ["very-low", "low", "normal", "high"]

    /// The `TTL` in seconds: from the send's or the template's expiration (`apns-expiration`: a relative
    /// duration, an epoch, or 0), else `defaultTTL`. Out of `0...2^31-1` is `webpush/invalid-ttl`; an epoch in the
    /// past is 0 (deliver now or never).
    public static func ttl(expiration: PushExpiration?, sendTime: Int64, defaultTTL: Int) throws(NorqError) -> Int {
        let seconds: Int64
        switch expiration {
        case nil: seconds = Int64(defaultTTL)
        case .immediately?: seconds = 0
        case .after(let after)?: seconds = after
        case .at(let epoch)?: seconds = max(0, epoch - sendTime)
        }
        guard seconds >= 0, seconds <= Int64(Int32.max) else {
            throw NorqError(.webPushInvalidTTL, "TTL \(seconds) is out of range (0...\(Int32.max) seconds)")
        }
        return Int(seconds)
    }

    /// `Urgency` from the APNs-style priority: 10 -> `high`, 5 -> `normal`, 1 -> `low`, anything lower -> `very-low`;
    /// no priority -> no header (the service assumes `normal`).
    public static func urgency(priority: Int?) -> String? {
        guard let priority else { return nil }
        switch priority {
        case 10...: return "high"
        case 5...9: return "normal"
        case 1...4: return "low"
        default: return "very-low"
        }
    }

    /// `Topic` from a collapse id: kept when it is at most 32 characters of the URL-safe base64 alphabet,
    /// otherwise derived deterministically (base64url of the first 24 bytes of its SHA-256: 32 characters), so the
    /// same collapse id always replaces the same stored message.
    public static func topic(collapseID: String) -> String {
        if !collapseID.isEmpty, collapseID.utf8.count <= 32, Base64URL.isURLSafeAlphabet(collapseID) { return collapseID }
        let digest = Array(SHA256.hash(data: Array(collapseID.utf8)))
        return Base64URL.encode(digest.prefix(24))
    }
}
