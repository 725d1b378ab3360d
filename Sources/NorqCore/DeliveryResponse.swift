/// How a provider classifies a response; drives retries and invalid-token events. An open set.
public struct ResponseClass: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let delivered = ResponseClass(rawValue: "delivered")
    /// The service took the message but answers its fate later (Expo's `ok` ticket): the final outcome comes from a
    /// receipt (``ReceiptFetchingProvider``). The router reports it as a delivered outcome marked `accepted`.
    public static let accepted = ResponseClass(rawValue: "accepted")
    /// Try again soon (5xx, shutdown, internal errors).
    public static let retryable = ResponseClass(rawValue: "retryable")
    /// Try again after a delay (429 TooManyRequests, TooManyProviderTokenUpdates).
    public static let retryAfterDelay = ResponseClass(rawValue: "retry-after-delay")
    /// The request itself is wrong; do not retry.
    public static let permanent = ResponseClass(rawValue: "permanent")
    /// The device token is no longer valid; do not retry, tell the application.
    public static let tokenInvalid = ResponseClass(rawValue: "token-invalid")
    /// Credentials are wrong or expired; not a token problem.
    public static let credentials = ResponseClass(rawValue: "credentials-problem")

    public var isRetryable: Bool { self == .retryable || self == .retryAfterDelay }
    public var description: String { rawValue }
}

/// What the provider's server answered to one request.
public struct DeliveryResponse: Sendable, Hashable {
    public var status: Int
    public var headers: [HTTPHeader]
    public var body: [UInt8]
    /// The provider's message id (APNs `apns-id`).
    public var messageID: String?
    /// APNs `apns-unique-id` (sandbox only, for the delivery log).
    public var uniqueID: String?
    /// The provider's reason string (APNs `reason`), kept as is even when unknown.
    public var reason: String?
    /// APNs 410 `timestamp`: milliseconds since the epoch when the token became invalid.
    public var invalidSince: Int64?
    /// `Retry-After` when the server sent one.
    public var retryAfter: Duration?
    public var classification: ResponseClass
    /// The provider's error code for a rejection (`apns/bad-device-token`), from its own reason table; the
    /// router reports it on the rejected outcome. Nil: the generic `routing/rejected`.
    public var code: NorqError.Code? = nil

    public init(status: Int, headers: [HTTPHeader] = [], body: [UInt8] = [], messageID: String? = nil,
                uniqueID: String? = nil, reason: String? = nil, invalidSince: Int64? = nil,
                retryAfter: Duration? = nil, classification: ResponseClass) {
        self.status = status
        self.headers = headers
        self.body = body
        self.messageID = messageID
        self.uniqueID = uniqueID
        self.reason = reason
        self.invalidSince = invalidSince
        self.retryAfter = retryAfter
        self.classification = classification
    }

    public func header(_ name: String) -> String? {
        headers.first(where: { $0.name == name })?.value
    }
}
