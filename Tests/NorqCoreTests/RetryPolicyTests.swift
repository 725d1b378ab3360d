import NorqCore
import Testing

@Suite("RetryPolicy decisions")
struct RetryPolicyTests {
    let policy = RetryPolicy(retries: 2, backoff: .milliseconds(500), maxBackoff: .seconds(4))

    func response(_ status: Int, _ classification: ResponseClass, retryAfter: Duration? = nil) -> DeliveryFailure {
        .response(status: status, classification: classification, retryAfter: retryAfter)
    }

    @Test("429 and 5xx are retried with full jitter backoff", arguments: [429, 500, 502, 503, 504])
    func retriesListedStatuses(status: Int) {
        let decision = policy.decision(afterAttempt: 1, failure: response(status, .retryable), remaining: .seconds(30),
                                       randomUnit: 0.5)
        #expect(decision == .retry(after: .milliseconds(250)))
    }

    @Test("backoff doubles per retry and is capped by maxBackoff")
    func exponentialBackoff() {
        #expect(policy.backoffDelay(beforeRetry: 1, randomUnit: 1) == .milliseconds(500))
        #expect(policy.backoffDelay(beforeRetry: 2, randomUnit: 1) == .seconds(1))
        #expect(policy.backoffDelay(beforeRetry: 3, randomUnit: 1) == .seconds(2))
        #expect(policy.backoffDelay(beforeRetry: 5, randomUnit: 1) == .seconds(4))
        #expect(policy.backoffDelay(beforeRetry: 40, randomUnit: 1) == .seconds(4))
        #expect(policy.backoffDelay(beforeRetry: 2, randomUnit: 0) == .zero)
        #expect(policy.backoffDelay(beforeRetry: 2, randomUnit: 0.25) == .milliseconds(250))
    }

    @Test("Retry-After is honoured instead of the backoff")
    func retryAfter() {
        let decision = policy.decision(afterAttempt: 1, failure: response(429, .retryAfterDelay, retryAfter: .seconds(7)),
                                       remaining: .seconds(30), randomUnit: 0.9)
        #expect(decision == .retry(after: .seconds(7)))
    }

    @Test("a Retry-After beyond the deadline gives up")
    func retryAfterBeyondDeadline() {
        let decision = policy.decision(afterAttempt: 1, failure: response(503, .retryable, retryAfter: .seconds(40)),
                                       remaining: .seconds(30), randomUnit: 0.9)
        #expect(decision == .giveUp(.deadline))
    }

    @Test("no retry once the deadline has passed")
    func deadlinePassed() {
        #expect(policy.decision(afterAttempt: 1, failure: response(500, .retryable), remaining: .zero,
                                randomUnit: 0.5) == .giveUp(.deadline))
        #expect(policy.decision(afterAttempt: 1, failure: response(500, .retryable), remaining: .milliseconds(100),
                                randomUnit: 0.5) == .giveUp(.deadline))
    }

    @Test("permanent, token-invalid and credentials failures are never retried")
    func neverRetried() {
        for failure in [response(400, .permanent), response(410, .tokenInvalid), response(403, .credentials),
                        response(400, .tokenInvalid), response(500, .permanent)] {
            #expect(policy.decision(afterAttempt: 1, failure: failure, remaining: .seconds(30), randomUnit: 0.5)
                    == .giveUp(.notRetryable))
        }
    }

    @Test("a provider-classified retryable 403 (ExpiredProviderToken) is retried")
    func providerRetryable() {
        #expect(policy.decision(afterAttempt: 1, failure: response(403, .retryable), remaining: .seconds(30),
                                randomUnit: 0) == .retry(after: .zero))
    }

    @Test("a status missing from retryOn is not retried even when classified retryable")
    func retryOnGoverns5xx() {
        let custom = RetryPolicy(retryOn: [429], retries: 2)
        #expect(custom.decision(afterAttempt: 1, failure: response(503, .retryable), remaining: .seconds(30),
                                randomUnit: 0.5) == .giveUp(.notRetryable))
        #expect(custom.decision(afterAttempt: 1, failure: response(429, .retryAfterDelay), remaining: .seconds(30),
                                randomUnit: 0.5) == .retry(after: .milliseconds(250)))
    }

    @Test("retries stop after `retries` retries")
    func exhausted() {
        #expect(policy.decision(afterAttempt: 2, failure: response(500, .retryable), remaining: .seconds(30),
                                randomUnit: 0.5) == .retry(after: .milliseconds(500)))
        #expect(policy.decision(afterAttempt: 3, failure: response(500, .retryable), remaining: .seconds(30),
                                randomUnit: 0.5) == .giveUp(.exhausted))
        #expect(RetryPolicy.none.decision(afterAttempt: 1, failure: response(500, .retryable), remaining: nil,
                                          randomUnit: 0.5) == .giveUp(.notRetryable))
        #expect(RetryPolicy(retries: 0).decision(afterAttempt: 1, failure: response(500, .retryable), remaining: nil,
                                                 randomUnit: 0.5) == .giveUp(.exhausted))
    }

    @Test("transport errors are retried, a shut-down provider is not")
    func transport() {
        let failed = DeliveryFailure.transport(NorqError(.transportFailed, "reset"))
        #expect(policy.decision(afterAttempt: 1, failure: failed, remaining: .seconds(30), randomUnit: 1)
                == .retry(after: .milliseconds(500)))
        let shutDown = DeliveryFailure.transport(NorqError(.providerShutDown, "closing"))
        #expect(policy.decision(afterAttempt: 1, failure: shutDown, remaining: .seconds(30), randomUnit: 1)
                == .giveUp(.notRetryable))
    }

    @Test("unknown 4xx statuses are not retried")
    func unknownClientError() {
        #expect(policy.decision(afterAttempt: 1, failure: response(413, .permanent), remaining: nil, randomUnit: 0.5)
                == .giveUp(.notRetryable))
        #expect(policy.decision(afterAttempt: 1, failure: response(404, ResponseClass(rawValue: "odd")),
                                remaining: nil, randomUnit: 0.5) == .giveUp(.notRetryable))
    }
}
