public import NorqCore

extension NorqError.Code {
    /// The encrypted body would exceed 4,096 bytes (at most 3,993 bytes of payload, less with padding).
    public static let webPushPayloadTooLarge: Self = "webpush/payload-too-large"
    /// The endpoint's host or its resolved address is not allowed (loopback, private, link-local, multicast,
    /// reserved, not in `allowedHosts`): refused before any network traffic.
    public static let webPushEndpointNotAllowed: Self = "webpush/endpoint-not-allowed"
    /// The endpoint is not an absolute `https://` URL with a host.
    public static let webPushInvalidEndpoint: Self = "webpush/invalid-endpoint"
    /// `keys.p256dh` is not base64url of a 65-byte uncompressed point on P-256.
    public static let webPushInvalidP256DH: Self = "webpush/invalid-p256dh"
    /// `keys.auth` is not base64url of exactly 16 bytes.
    public static let webPushInvalidAuthSecret: Self = "webpush/invalid-auth-secret"
    /// A TTL below 0 or above 2^31-1 seconds (from `apns-expiration`, the send options or `ttl:`).
    public static let webPushInvalidTTL: Self = "webpush/invalid-ttl"
    /// The VAPID public key does not belong to the private key, or a key is not a P-256 key.
    public static let webPushInvalidVAPIDKey: Self = "webpush/invalid-vapid-key"
    /// `subject` is not a `mailto:` or `https:` URI.
    public static let webPushInvalidSubject: Self = "webpush/invalid-subject"
    /// `makeProvider` was given a configuration that is not a `WebPushConfiguration`.
    public static let webPushWrongConfiguration: Self = "webpush/wrong-configuration"
}
