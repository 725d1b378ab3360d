/// How a provider instance retries (the `retry:` block of `norq.yaml`). A pure value; the decisions
/// live in `RetryPolicy+Decision.swift` and are unit-tested without I/O.
public struct RetryPolicy: Sendable, Hashable {
    /// HTTP statuses that are retried (transport errors always are, within the deadline).
    public var retryOn: Set<Int>
    /// Retries after the first attempt.
    public var retries: Int
    /// Base of the exponential backoff.
    public var backoff: Duration
    /// Cap of one backoff delay.
    public var maxBackoff: Duration

    public static let defaultStatuses: Set<Int> = [429, 500, 502, 503, 504]

    public init(retryOn: Set<Int> = RetryPolicy.defaultStatuses, retries: Int = 2,
                backoff: Duration = .milliseconds(500), maxBackoff: Duration = .seconds(30)) {
        self.retryOn = retryOn
        self.retries = retries
        self.backoff = backoff
        self.maxBackoff = maxBackoff
    }

    public static let `default` = RetryPolicy()
    public static let none = RetryPolicy(retryOn: [], retries: 0)
}

/// How a provider makes repeated sends safe.
public struct IdempotencyPolicy: Sendable, Hashable {
    /// The header that carries a stable per-request id (`apns-id`), or nil when the provider has none.
    public var requestIDHeader: String?
    /// Whether the server deduplicates on that id (APNs does not; it only echoes it).
    public var serverDeduplicates: Bool

    public init(requestIDHeader: String? = nil, serverDeduplicates: Bool = false) {
        self.requestIDHeader = requestIDHeader
        self.serverDeduplicates = serverDeduplicates
    }
}

/// A provider's retry and idempotency policy.
public struct DeliveryPolicy: Sendable, Hashable {
    public var retry: RetryPolicy
    public var idempotency: IdempotencyPolicy
    /// Most requests in flight at once for this provider instance (router fan-out bound).
    public var maxInFlight: Int

    public init(retry: RetryPolicy = .default, idempotency: IdempotencyPolicy = IdempotencyPolicy(),
                maxInFlight: Int = 1000) {
        self.retry = retry
        self.idempotency = idempotency
        self.maxInFlight = maxInFlight
    }
}
