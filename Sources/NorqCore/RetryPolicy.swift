/// How a provider instance retries (the `retry:` block of `norq.yaml`). A pure value; the decisions
/// live in `RetryPolicy+Decision.swift` and are unit-tested without I/O.
public struct RetryPolicy: Sendable, Hashable {
    /// HTTP statuses that are retried (transport errors are too, within the deadline, subject to `ambiguous`).
    public var retryOn: Set<Int>
    /// Retries after the first attempt.
    public var retries: Int
    /// Base of the exponential backoff.
    public var backoff: Duration
    /// Cap of one backoff delay.
    public var maxBackoff: Duration
    /// Whether an attempt that the server may have processed (`NorqError.possiblyProcessed`) is sent again
    /// (`retry.ambiguous`). Default `collapsible`: only when the push carries a collapse id.
    public var ambiguous: AmbiguousRetry

    public static let defaultStatuses: Set<Int> = [429, 500, 502, 503, 504]

    public init(retryOn: Set<Int> = RetryPolicy.defaultStatuses, retries: Int = 2,
                backoff: Duration = .milliseconds(500), maxBackoff: Duration = .seconds(30),
                ambiguous: AmbiguousRetry = .collapsible) {
        self.retryOn = retryOn
        self.retries = retries
        self.backoff = backoff
        self.maxBackoff = maxBackoff
        self.ambiguous = ambiguous
    }

    public static let `default` = RetryPolicy()
    public static let none = RetryPolicy(retryOn: [], retries: 0)
}

/// When a failed attempt that the server may have processed is sent again (`retry.ambiguous:` in `norq.yaml`).
///
/// A request that was written and then got no definitive answer (the connection was lost, the stream was reset
/// with a code other than REFUSED_STREAM, the deadline passed after the write) may have been delivered: sending it
/// again may show the user the notification twice, since APNs does not deduplicate. An attempt known not to have
/// been processed (`NorqError.notProcessed`: never written, REFUSED_STREAM, above a GOAWAY's last stream id) is
/// always sent again: the router re-queues it without spending `retries`, until the deadline.
public struct AmbiguousRetry: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Never re-send a possibly processed request: it ends `failed`, marked as possibly delivered.
    public static let never = AmbiguousRetry(rawValue: "never")
    /// Re-send it only when the push carries a collapse id (APNs `apns-collapse-id`), so that a duplicate
    /// replaces the first on the device. The default.
    public static let collapsible = AmbiguousRetry(rawValue: "collapsible")
    /// Always re-send it (the application accepts duplicates).
    public static let always = AmbiguousRetry(rawValue: "always")

    /// The values `retry.ambiguous` accepts, in documentation order.
    public static let allValues: [AmbiguousRetry] = [.never, .collapsible, .always]

    public var description: String { rawValue }
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
