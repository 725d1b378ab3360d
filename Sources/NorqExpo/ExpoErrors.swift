public import NorqCore

extension NorqError.Code {
    // expo: configuration
    /// The configuration given to the Expo provider type is not an `ExpoConfiguration`.
    public static let expoWrongConfiguration: Self = "expo/wrong-configuration"
    /// `accessToken` is empty or holds characters an Expo access token never has (whitespace, control characters).
    public static let expoInvalidAccessToken: Self = "expo/invalid-access-token"

    // expo: validation before sending
    /// A device token that is not an Expo push token (`ExponentPushToken[...]`, `ExpoPushToken[...]` or a bare
    /// UUID): a native APNs or FCM token would fail the whole request it shares.
    public static let expoInvalidToken: Self = "expo/invalid-token"
    /// The message is larger than Expo's 4,096 bytes.
    public static let expoPayloadTooLarge: Self = "expo/payload-too-large"
    /// A hand-written (`push.json`) Expo message that is not a JSON object.
    public static let expoInvalidMessage: Self = "expo/invalid-message"

    // expo: answers (the table in `ExpoResponseTable`)
    /// Ticket or receipt `DeviceNotRegistered`: the token can no longer receive pushes (token-invalid).
    public static let expoDeviceNotRegistered: Self = "expo/device-not-registered"
    /// Ticket or receipt `MessageTooBig`: the payload sent to APNs/FCM is over 4,096 bytes (permanent).
    public static let expoMessageTooBig: Self = "expo/message-too-big"
    /// Ticket or receipt `MessageRateExceeded`: too many messages to this device (retried after a delay).
    public static let expoMessageRateExceeded: Self = "expo/message-rate-exceeded"
    /// Receipt `MismatchSenderId`: the project's FCM credentials do not match the token's sender (credentials).
    public static let expoMismatchSenderID: Self = "expo/mismatch-sender-id"
    /// Ticket or receipt `InvalidCredentials`: the project's APNs/FCM credentials are missing or revoked (credentials).
    public static let expoInvalidCredentials: Self = "expo/invalid-credentials"
    /// Receipt `DeveloperError`: Expo's generic permanent error.
    public static let expoDeveloperError: Self = "expo/developer-error"
    /// Receipt `ExpoError` or `ProviderError`: Expo's generic transient errors (retried).
    public static let expoServiceError: Self = "expo/service-error"
    /// An error ticket or receipt with a code this table does not know (kept, classified permanent).
    public static let expoUnknownError: Self = "expo/unknown-error"
    /// Request `TOO_MANY_REQUESTS` (HTTP 429): over 600 notifications per second for the project (retried).
    public static let expoTooManyRequests: Self = "expo/too-many-requests"
    /// Request `PUSH_TOO_MANY_EXPERIENCE_IDS`: the tokens belong to several Expo projects; the provider splits the
    /// request by project and sends each group, so this code is reported only when the split itself fails.
    public static let expoTooManyExperienceIDs: Self = "expo/too-many-experience-ids"
    /// Request `PUSH_TOO_MANY_NOTIFICATIONS`: more than 100 recipients (the provider never sends more).
    public static let expoTooManyNotifications: Self = "expo/too-many-notifications"
    /// Request `PUSH_TOO_MANY_RECEIPTS`: more than 1,000 receipt ids (the provider never asks for more).
    public static let expoTooManyReceipts: Self = "expo/too-many-receipts"
    /// Request `UNAUTHORIZED` (HTTP 401): enhanced push security is on and the access token is missing or invalid.
    public static let expoUnauthorized: Self = "expo/unauthorized"
    /// Another request-level error (`API_ERROR`, validation, `INTERNAL_SERVER_ERROR`, a gateway's HTML body).
    public static let expoRequestFailed: Self = "expo/request-failed"
    /// The answer's ticket count differs from the request's recipients: which ticket is whose is unknown
    /// (an ambiguous failure, possibly processed).
    public static let expoTicketCountMismatch: Self = "expo/ticket-count-mismatch"
}
