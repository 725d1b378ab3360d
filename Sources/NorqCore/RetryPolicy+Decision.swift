/// Why one attempt of a delivery did not succeed: the input of a retry decision.
public enum DeliveryFailure: Sendable, Hashable {
    /// The provider answered, with a non-success status.
    case response(status: Int, classification: ResponseClass, retryAfter: Duration?)
    /// No definitive answer: a transport error or a per-request timeout.
    case transport(NorqError)

    /// The failure of a `DeliveryResponse`.
    public init(_ response: DeliveryResponse) {
        self = .response(status: response.status, classification: response.classification,
                         retryAfter: response.retryAfter)
    }

    /// Whether the attempt is known not to have been processed by the server (`NorqError.notProcessed`: refused
    /// stream, above a GOAWAY's last-stream-id, never written on a connection that closed or went away). Sending it
    /// again cannot deliver twice; under the re-queue rule it does not spend `retries`.
    public var isUnprocessed: Bool {
        if case .transport(let error) = self { return error.notProcessed && !error.possiblyProcessed }
        return false
    }
}

/// What to do after a failed attempt.
public enum RetryDecision: Sendable, Hashable {
    /// Wait this long, then send the same request again.
    case retry(after: Duration)
    /// Stop: the last failure is the outcome.
    case giveUp(GiveUpReason)

    /// Why a retry decision gave up. An open set.
    public struct GiveUpReason: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The failure is permanent, token-invalid or a credentials problem (or a status not retried).
        public static let notRetryable = GiveUpReason(rawValue: "not-retryable")
        /// All `retries` were used.
        public static let exhausted = GiveUpReason(rawValue: "retries-exhausted")
        /// The next attempt could not start before the deadline.
        public static let deadline = GiveUpReason(rawValue: "deadline")
        /// The attempt may have been processed by the server and `retry.ambiguous` does not allow sending it
        /// again: the outcome is `failed` and may have been delivered.
        public static let possiblyProcessed = GiveUpReason(rawValue: "possibly-processed")
        public var description: String { rawValue }
    }
}

extension RetryPolicy {
    /// Decides what follows a failed attempt. Pure: the caller passes the time left and a random unit.
    ///
    /// - Parameters:
    ///   - attempt: how many attempts were made so far (1 after the first).
    ///   - failure: what the last attempt returned.
    ///   - remaining: time left before the deadline that bounds all attempts (nil: no deadline).
    ///   - randomUnit: a random number in `0..<1` for the full jitter.
    ///   - collapsible: whether the push carries a collapse id (a duplicate collapses on the device); consulted
    ///     only for a possibly processed transport failure under `ambiguous: collapsible`.
    ///
    /// This is the rule without re-queues (every failure spends the budget); the router uses
    /// `decision(afterAttempt:failure:remaining:randomUnit:collapsible:requeues:)`.
    ///
    /// Rules: a response is retried when its status is in `retryOn` (429 and 5xx by default) or when the
    /// provider classified an otherwise not-listed status as retryable (APNs `ExpiredProviderToken`);
    /// responses classified permanent, token-invalid or credentials are never retried. Transport failures known
    /// not to have been processed are retried (this bounds a REFUSED_STREAM storm: backoff, counted against
    /// `retries`). A transport failure that may have been processed (`NorqError.possiblyProcessed`) is retried
    /// only when `ambiguous` allows it (`always`, or `collapsible` with `collapsible: true`), else the decision is
    /// `.giveUp(.possiblyProcessed)`. `provider/shut-down` and `template/invalid-header-value` are never retried. The delay is the server's `Retry-After` when present, else exponential backoff with full
    /// jitter (`random * min(maxBackoff, backoff * 2^(attempt-1))`). No retry when the delay would end
    /// at or after the deadline.
    public func decision(afterAttempt attempt: Int, failure: DeliveryFailure, remaining: Duration?,
                         randomUnit: Double, collapsible: Bool = false) -> RetryDecision {
        decision(afterAttempt: attempt, failure: failure, remaining: remaining, randomUnit: randomUnit,
                 collapsible: collapsible, requeues: nil)
    }

    /// Decides what follows a failed attempt, with the re-queue rule for attempts known not to have been processed
    /// (issue 30). Pure.
    ///
    /// - Parameters:
    ///   - attempt: the attempts so far that spent the retry budget, this one included when it does (answers such as
    ///     429 and 5xx, possibly processed attempts; not the re-queues).
    ///   - requeues: how many times this target was re-queued before (nil: the caller does not count re-queues,
    ///     and an unprocessed failure spends the budget like any other: the rule before issue 30).
    ///
    /// With `requeues` given, a failure known not to have been processed (`DeliveryFailure.isUnprocessed`) is
    /// `.retry` without looking at `retries`: a re-queue, which the caller must not count against the budget. It
    /// is bounded by `remaining` only (without a deadline, by ``maxRequeuesWithoutDeadline``), and waits
    /// ``requeueDelay(afterRequeues:randomUnit:)``: nothing the first time (a server draining its connections has
    /// the request written again at once), then a backoff that grows while the origin keeps refusing this target.
    /// Every other failure follows `decision(afterAttempt:failure:remaining:randomUnit:collapsible:)`.
    public func decision(afterAttempt attempt: Int, failure: DeliveryFailure, remaining: Duration?,
                         randomUnit: Double, collapsible: Bool = false, requeues: Int?) -> RetryDecision {
        if let requeues, failure.isUnprocessed {
            if let remaining, remaining <= .zero { return .giveUp(.deadline) }
            if remaining == nil, requeues >= Self.maxRequeuesWithoutDeadline { return .giveUp(.exhausted) }
            let delay = requeueDelay(afterRequeues: requeues, randomUnit: randomUnit)
            if let remaining, delay >= remaining { return .giveUp(.deadline) }
            return .retry(after: delay)
        }
        var retryAfter: Duration?
        switch failure {
        case .response(let status, let classification, let after):
            if classification == .permanent || classification == .tokenInvalid
                || classification == .credentials || classification == .delivered {
                return .giveUp(.notRetryable)
            }
            let listed = retryOn.contains(status)
            let providerRetryable = classification.isRetryable && !Self.isDefaultRetryStatus(status)
            guard listed || providerRetryable else { return .giveUp(.notRetryable) }
            retryAfter = after
        case .transport(let error):
            if error.code == .providerShutDown || error.code == .invalidHeaderValue { return .giveUp(.notRetryable) }
            if error.possiblyProcessed, !mayResendPossiblyProcessed(collapsible: collapsible) {
                return .giveUp(.possiblyProcessed)
            }
        }
        guard attempt <= retries else { return .giveUp(.exhausted) }
        if let remaining, remaining <= .zero { return .giveUp(.deadline) }
        let delay = retryAfter.map { max($0, .zero) } ?? backoffDelay(beforeRetry: attempt, randomUnit: randomUnit)
        if let remaining, delay >= remaining { return .giveUp(.deadline) }
        return .retry(after: delay)
    }

    /// Whether `ambiguous` allows sending again a request that the server may have processed: `always`, or
    /// `collapsible` when the push carries a collapse id. `never` (and any unknown value) does not.
    public func mayResendPossiblyProcessed(collapsible: Bool) -> Bool {
        switch ambiguous {
        case .always: true
        case .collapsible: collapsible
        default: false
        }
    }

    /// Re-queues of one target allowed when there is no deadline to bound them (the router always has one).
    public static let maxRequeuesWithoutDeadline = 20

    /// The cap of one re-queue delay: `maxBackoff`, and at least one second, so that a server refusing every
    /// request gets a bounded number of them per target until the deadline (about a dozen in 3 s).
    public var maxRequeueBackoff: Duration { max(maxBackoff, .seconds(1)) }

    /// The delay before a re-queue, when the target was re-queued `requeues` times before: zero for the first
    /// re-queue, then full jitter over `min(maxRequeueBackoff, backoff * 2^(requeues-1))`.
    public func requeueDelay(afterRequeues requeues: Int, randomUnit: Double) -> Duration {
        guard requeues > 0 else { return .zero }
        let exponent = min(requeues - 1, 30)
        let ceiling = min(maxRequeueBackoff, backoff * (1 << exponent))
        return ceiling * min(max(randomUnit, 0), 1)
    }

    /// The full-jitter delay before retry number `retry` (1-based): `randomUnit * min(maxBackoff,
    /// backoff * 2^(retry-1))`.
    public func backoffDelay(beforeRetry retry: Int, randomUnit: Double) -> Duration {
        let exponent = min(max(retry - 1, 0), 30)
        let ceiling = min(maxBackoff, backoff * (1 << exponent))
        let unit = min(max(randomUnit, 0), 1)
        return ceiling * unit
    }

    /// 429 and 5xx: statuses whose retry `retryOn` alone governs (so that removing them disables it).
    static func isDefaultRetryStatus(_ status: Int) -> Bool {
        status == 429 || (500...599).contains(status)
    }
}
