public import NorqCore

extension NorqError.Code {
    // apns: validation before sending
    /// The device token is not an even-length hex string.
    public static let apnsInvalidTokenFormat: Self = "apns/invalid-token-format"
    /// The payload exceeds the push type's limit (4096 bytes; 5120 for VoIP).
    public static let apnsPayloadTooLarge: Self = "apns/payload-too-large"
    /// The priority is not allowed for the push type.
    public static let apnsBadPriority: Self = "apns/bad-priority"
    /// The expiration is not allowed (negative, or not 0 for pushtotalk).
    public static let apnsBadExpiration: Self = "apns/bad-expiration-date"
    /// `apns-collapse-id` is longer than 64 bytes.
    public static let apnsBadCollapseID: Self = "apns/bad-collapse-id"
    /// `apns-push-type` is not one of the eleven known types.
    public static let apnsInvalidPushType: Self = "apns/invalid-push-type"
    /// A certificate-only push type (mdm) with token auth.
    public static let apnsRequiresCertificate: Self = "apns/push-type-requires-certificate"
    /// A token-only push type (location, widgets) with certificate auth.
    public static let apnsRequiresToken: Self = "apns/push-type-requires-token"
    /// A Live Activity payload is incomplete or inconsistent.
    public static let apnsInvalidLiveActivity: Self = "apns/invalid-live-activity"
    /// The payload cannot be sent as it is (a native payload that is not an object, visible keys in a background push).
    public static let apnsInvalidPayload: Self = "apns/invalid-payload"
    /// A per-notification `apns-topic` (frontmatter or send option) is not a bundle identifier, or ends with
    /// the suffix of another push type.
    public static let apnsInvalidTopic: Self = "apns/invalid-topic"
    /// The request id is not a UUID.
    public static let apnsBadMessageID: Self = "apns/bad-message-id"
    // apns: credentials
    /// The `.p8` key is not a PKCS#8 P-256 private key.
    public static let apnsInvalidKey: Self = "apns/invalid-key"
    /// The client certificate, its key or the PKCS#12 file cannot be loaded (or the passphrase is wrong).
    public static let apnsInvalidCertificate: Self = "apns/invalid-certificate"
    /// The extra CA bundle (`caPath`) cannot be loaded.
    public static let apnsInvalidTrustRoots: Self = "apns/invalid-trust-roots"
    /// The configuration given to the APNs provider type is not an `APNsConfiguration`.
    public static let apnsWrongConfiguration: Self = "apns/wrong-configuration"
}
