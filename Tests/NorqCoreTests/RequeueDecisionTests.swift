import NorqCore
import Testing

/// Issue 30: an attempt known not to have been processed is re-queued without spending `retries`, bounded by the
/// deadline; answers (429, 5xx) and possibly processed attempts spend the budget. Pure decisions, no I/O.
@Suite("RetryPolicy: re-queues of unprocessed attempts")
struct RequeueDecisionTests {
    static let policy = RetryPolicy(retries: 2, backoff: .milliseconds(20), maxBackoff: .milliseconds(100),
                                    ambiguous: .always)
    static let refused = DeliveryFailure.transport(NorqError(.transportFailed, "REFUSED_STREAM", notProcessed: true))
    static let aboveGoAway = DeliveryFailure.transport(NorqError(.transportFailed, "above the GOAWAY's last stream id",
                                                                 notProcessed: true))
    static let lost = DeliveryFailure.transport(NorqError(.transportFailed, "connection lost after the write",
                                                          possiblyProcessed: true))
    static let unavailable = DeliveryFailure.response(status: 503, classification: .retryable, retryAfter: nil)
    static let tooMany = DeliveryFailure.response(status: 429, classification: .retryAfterDelay, retryAfter: nil)

    @Test("unprocessed does not spend the budget: re-queued past `retries`, at once the first time")
    func unprocessedIsFree() {
        let policy = Self.policy
        for failure in [Self.refused, Self.aboveGoAway] {
            #expect(failure.isUnprocessed)
            // Budget already spent (3 spending attempts with retries 2): still re-queued.
            #expect(policy.decision(afterAttempt: 3, failure: failure, remaining: .seconds(30), randomUnit: 0.5,
                                    requeues: 0) == .retry(after: .zero))
            #expect(policy.decision(afterAttempt: 50, failure: failure, remaining: .seconds(30), randomUnit: 1,
                                    requeues: 40) == .retry(after: .seconds(1)))
        }
    }

    @Test("5xx and 429 spend the budget, whatever the re-queues")
    func answersSpend() {
        let policy = Self.policy
        for failure in [Self.unavailable, Self.tooMany] {
            #expect(!failure.isUnprocessed)
            #expect(policy.decision(afterAttempt: 2, failure: failure, remaining: .seconds(30), randomUnit: 1,
                                    requeues: 7) == .retry(after: .milliseconds(40)))
            #expect(policy.decision(afterAttempt: 3, failure: failure, remaining: .seconds(30), randomUnit: 1,
                                    requeues: 7) == .giveUp(.exhausted))
        }
    }

    @Test("possibly processed spends the budget (and `ambiguous` still decides whether it is re-sent at all)")
    func possiblyProcessedSpends() {
        #expect(!Self.lost.isUnprocessed)
        #expect(Self.policy.decision(afterAttempt: 2, failure: Self.lost, remaining: .seconds(30), randomUnit: 1,
                                     requeues: 3) == .retry(after: .milliseconds(40)))
        #expect(Self.policy.decision(afterAttempt: 3, failure: Self.lost, remaining: .seconds(30), randomUnit: 1,
                                     requeues: 3) == .giveUp(.exhausted))
        var never = Self.policy
        never.ambiguous = .never
        #expect(never.decision(afterAttempt: 1, failure: Self.lost, remaining: .seconds(30), randomUnit: 1,
                               requeues: 0) == .giveUp(.possiblyProcessed))
    }

    @Test("an error cannot be both possibly processed and not processed; a plain not-processed error spends")
    func flagsAreExclusive() {
        let both = NorqError(.transportFailed, "x", possiblyProcessed: true, notProcessed: true)
        #expect(both.possiblyProcessed && !both.notProcessed)
        #expect(!DeliveryFailure.transport(both).isUnprocessed)
        // Not processed for a reason other than a refusal (a connection that could not be made): the budget applies.
        let connectFailed = DeliveryFailure.transport(NorqError(.transportFailed, "cannot connect"))
        #expect(!connectFailed.isUnprocessed)
        #expect(Self.policy.decision(afterAttempt: 3, failure: connectFailed, remaining: .seconds(30), randomUnit: 1,
                                     requeues: 0) == .giveUp(.exhausted))
    }

    @Test("re-queues are bounded by the deadline, and without one by a count")
    func boundedByTime() {
        let policy = Self.policy
        #expect(policy.decision(afterAttempt: 1, failure: Self.refused, remaining: .zero, randomUnit: 0,
                                requeues: 0) == .giveUp(.deadline))
        #expect(policy.decision(afterAttempt: 1, failure: Self.refused, remaining: .milliseconds(10), randomUnit: 1,
                                requeues: 5) == .giveUp(.deadline))
        let limit = RetryPolicy.maxRequeuesWithoutDeadline
        #expect(policy.decision(afterAttempt: 1, failure: Self.refused, remaining: nil, randomUnit: 0,
                                requeues: limit - 1) == .retry(after: .zero))
        #expect(policy.decision(afterAttempt: 1, failure: Self.refused, remaining: nil, randomUnit: 0,
                                requeues: limit) == .giveUp(.exhausted))
    }

    @Test("without a re-queue count (nil), an unprocessed failure spends the budget as before issue 30")
    func withoutCountTheOldRule() {
        #expect(Self.policy.decision(afterAttempt: 3, failure: Self.refused, remaining: .seconds(30), randomUnit: 1)
                == .giveUp(.exhausted))
        #expect(Self.policy.decision(afterAttempt: 1, failure: Self.refused, remaining: .seconds(30), randomUnit: 1)
                == .retry(after: .milliseconds(20)))
    }

    @Test("the re-queue delay: none at first, then backoff growing to max(maxBackoff, 1 s)")
    func delays() {
        let policy = Self.policy
        #expect(policy.requeueDelay(afterRequeues: 0, randomUnit: 1) == .zero)
        #expect(policy.requeueDelay(afterRequeues: 1, randomUnit: 1) == .milliseconds(20))
        #expect(policy.requeueDelay(afterRequeues: 2, randomUnit: 1) == .milliseconds(40))
        #expect(policy.requeueDelay(afterRequeues: 3, randomUnit: 0.5) == .milliseconds(40))
        #expect(policy.requeueDelay(afterRequeues: 10, randomUnit: 1) == .seconds(1))
        #expect(policy.requeueDelay(afterRequeues: 1_000, randomUnit: 1) == .seconds(1))
        let slow = RetryPolicy(backoff: .seconds(1), maxBackoff: .seconds(30))
        #expect(slow.requeueDelay(afterRequeues: 20, randomUnit: 1) == .seconds(30))
    }

    @Test("a server refusing everything gets a bounded number of requests per token over a 3 s deadline")
    func refusingServerIsBounded() {
        for randomUnit in [0.25, 0.5, 1.0] {
            var elapsed = Duration.zero
            var requeues = 0
            let deadline = Duration.seconds(3)
            while case .retry(let delay) = Self.policy.decision(afterAttempt: 1, failure: Self.refused,
                                                                 remaining: deadline - elapsed,
                                                                 randomUnit: randomUnit, requeues: requeues) {
                elapsed += delay
                requeues += 1
                if requeues > 1_000 { break }
            }
            // <= 1,000 requests for 50 tokens: at most 20 per token.
            #expect(requeues + 1 <= 20, "\(requeues) re-queues at jitter \(randomUnit)")
            #expect(requeues >= 3)
        }
    }

    @Test("template/invalid-header-value is never retried")
    func invalidHeaderNotRetried() {
        let failure = DeliveryFailure.transport(NorqError.invalidHeaderValue("apns-collapse-id", template: "invoice",
                                                                             problem: "it contains a line feed (LF) at byte 4"))
        #expect(Self.policy.decision(afterAttempt: 1, failure: failure, remaining: .seconds(30), randomUnit: 1,
                                     requeues: 0) == .giveUp(.notRetryable))
    }
}
