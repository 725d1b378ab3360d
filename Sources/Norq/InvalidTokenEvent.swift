public import NorqCore

/// A device token the provider reported invalid (`Unregistered`, `ExpiredToken`, `BadDeviceToken`):
/// the application should stop sending to it. Never raised for credential problems.
public struct InvalidTokenEvent: Sendable, Hashable {
    public var token: PushToken
    /// The provider instance that reported it.
    public var provider: String
    /// The provider's reason (`Unregistered`, `ExpiredToken`, `BadDeviceToken`).
    public var reason: String
    /// APNs 410 `timestamp`: milliseconds since the epoch when the token became invalid.
    public var invalidSince: Int64?
    /// The environment the request went to.
    public var environment: PushEnvironment?
    /// For `BadDeviceToken`: the token may be valid in the other environment (sandbox vs production).
    public var hint: String?
    public var recipientID: String?

    public init(token: PushToken, provider: String, reason: String, invalidSince: Int64? = nil,
                environment: PushEnvironment? = nil, hint: String? = nil, recipientID: String? = nil) {
        self.token = token
        self.provider = provider
        self.reason = reason
        self.invalidSince = invalidSince
        self.environment = environment
        self.hint = hint
        self.recipientID = recipientID
    }

    /// The reasons that raise an event.
    public static let reasons: Set<String> = ["Unregistered", "ExpiredToken", "BadDeviceToken",
                                              "NotFound", "Gone"]  // Web Push 404 / 410 (WebPushResponseTable)

    /// The event for a rejection, or nil when it is not an invalid-token rejection.
    static func from(response: DeliveryResponse, token: PushToken, provider: String,
                     environment: PushEnvironment?, recipientID: String?) -> InvalidTokenEvent? {
        guard response.classification == .tokenInvalid, let reason = response.reason,
              reasons.contains(reason) else { return nil }
        var hint: String?
        if reason == "BadDeviceToken" {
            let other = environment == .production ? "sandbox" : "production"
            hint = "the token may belong to the \(other) environment; check the token's environment before deleting it"
        }
        return InvalidTokenEvent(token: token, provider: provider, reason: reason, invalidSince: response.invalidSince,
                                 environment: environment, hint: hint, recipientID: recipientID)
    }
}
