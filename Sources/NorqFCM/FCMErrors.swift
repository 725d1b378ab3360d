public import NorqCore

extension NorqError.Code {
    // provider: configuration
    /// A `serverKey:` in an FCM block: the legacy HTTP API and its server keys were shut down in June 2024.
    public static let fcmLegacyServerKey: Self = "provider/fcm-legacy-server-key"
    /// The service-account JSON is malformed or lacks `client_email` / `private_key` (or is not a service account).
    public static let fcmInvalidServiceAccount: Self = "fcm/invalid-service-account"
    /// The service account's `private_key` is not an RSA private key (PKCS#8 or PKCS#1 PEM, 2048 bits or more).
    public static let fcmInvalidPrivateKey: Self = "fcm/invalid-private-key"
    /// The configuration given to the FCM provider type is not an `FCMConfiguration`.
    public static let fcmWrongConfiguration: Self = "fcm/wrong-configuration"

    // fcm: validation before sending
    /// A device token that cannot be an FCM registration token (empty, too long, characters FCM never uses).
    public static let fcmInvalidTokenFormat: Self = "fcm/invalid-token-format"
    /// A topic name or a condition FCM would refuse.
    public static let fcmInvalidTarget: Self = "fcm/invalid-target"
    /// A `data` key FCM reserves (`from`, `gcm`, `message_type`, `collapse_key`, or one starting with `google`).
    public static let fcmReservedDataKey: Self = "fcm/reserved-data-key"
    /// The message (without its target) is larger than FCM's 4,096 bytes.
    public static let fcmPayloadTooLarge: Self = "fcm/payload-too-large"
    /// `android.ttl` is outside 0...2,419,200 seconds (four weeks).
    public static let fcmInvalidTTL: Self = "fcm/invalid-ttl"
    /// A hand-written (`push.json`) FCM message FCM would refuse (not an object, non-string data values, ...).
    public static let fcmInvalidMessage: Self = "fcm/invalid-message"

    // fcm: authentication at run time
    /// The OAuth token endpoint refused the service account's assertion or answered something unusable.
    public static let fcmTokenRequestFailed: Self = "fcm/token-request-failed"
}
