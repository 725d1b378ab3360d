import NorqCore
import Testing

/// The retry rule for attempts that may or may not have been processed by the server (issue 14, defect 2 and 7).
@Suite("RetryPolicy: ambiguous attempts")
struct AmbiguousRetryDecisionTests {
    func policy(_ ambiguous: AmbiguousRetry, retries: Int = 2) -> RetryPolicy {
        RetryPolicy(retries: retries, backoff: .milliseconds(500), maxBackoff: .seconds(4), ambiguous: ambiguous)
    }

    static let notProcessed = DeliveryFailure.transport(NorqError(.transportFailed, "REFUSED_STREAM",
                                                                  possiblyProcessed: false))
    static let possiblyProcessed = DeliveryFailure.transport(NorqError(.transportFailed, "connection lost after the write",
                                                                       possiblyProcessed: true))
    static let timedOutAfterWrite = DeliveryFailure.transport(NorqError(.deadlineExceeded, "no answer before the deadline",
                                                                        possiblyProcessed: true))

    // The decisions below are the rule without re-queue counting (`requeues: nil`); `RequeueDecisionTests` has the
    // re-queue rule of issue 30.
    @Test("not processed: retried with backoff under every setting, counted against retries",
          arguments: AmbiguousRetry.allValues)
    func notProcessedIsRetriedWithBackoff(ambiguous: AmbiguousRetry) {
        let policy = policy(ambiguous)
        #expect(policy.decision(afterAttempt: 1, failure: Self.notProcessed, remaining: .seconds(30), randomUnit: 1)
                == .retry(after: .milliseconds(500)))
        #expect(policy.decision(afterAttempt: 2, failure: Self.notProcessed, remaining: .seconds(30), randomUnit: 1)
                == .retry(after: .seconds(1)))
        #expect(policy.decision(afterAttempt: 3, failure: Self.notProcessed, remaining: .seconds(30), randomUnit: 1)
                == .giveUp(.exhausted))
        #expect(policy.decision(afterAttempt: 1, failure: Self.notProcessed, remaining: .milliseconds(400), randomUnit: 1)
                == .giveUp(.deadline))
    }

    @Test("a REFUSED_STREAM storm is bounded: never an immediate re-send unless the jitter draws zero, at most `retries`")
    func refusedStormIsBounded() {
        let policy = policy(.collapsible, retries: 5)
        var delays: [Duration] = []
        var attempt = 1
        while case .retry(let delay) = policy.decision(afterAttempt: attempt, failure: Self.notProcessed,
                                                        remaining: .seconds(300), randomUnit: 0.5) {
            delays.append(delay)
            attempt += 1
            if attempt > 100 { break }
        }
        #expect(attempt == 6)
        #expect(delays == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(2)])
    }

    @Test("possibly processed under never: given up, whatever the collapse id")
    func never() {
        for collapsible in [false, true] {
            for failure in [Self.possiblyProcessed, Self.timedOutAfterWrite] {
                #expect(policy(.never).decision(afterAttempt: 1, failure: failure, remaining: .seconds(30), randomUnit: 0.5,
                                                collapsible: collapsible) == .giveUp(.possiblyProcessed))
            }
        }
    }

    @Test("possibly processed under collapsible: retried only with a collapse id")
    func collapsible() {
        let policy = policy(.collapsible)
        #expect(policy.decision(afterAttempt: 1, failure: Self.possiblyProcessed, remaining: .seconds(30), randomUnit: 0.5)
                == .giveUp(.possiblyProcessed))
        #expect(policy.decision(afterAttempt: 1, failure: Self.possiblyProcessed, remaining: .seconds(30), randomUnit: 0.5,
                                collapsible: true) == .retry(after: .milliseconds(250)))
        #expect(policy.decision(afterAttempt: 3, failure: Self.possiblyProcessed, remaining: .seconds(30), randomUnit: 0.5,
                                collapsible: true) == .giveUp(.exhausted))
    }

    @Test("possibly processed under always: retried with backoff within retries")
    func always() {
        let policy = policy(.always)
        #expect(policy.decision(afterAttempt: 1, failure: Self.timedOutAfterWrite, remaining: .seconds(30), randomUnit: 1)
                == .retry(after: .milliseconds(500)))
        #expect(policy.decision(afterAttempt: 3, failure: Self.timedOutAfterWrite, remaining: .seconds(30), randomUnit: 1)
                == .giveUp(.exhausted))
    }

    @Test("the default policy does not re-send a possibly processed push without a collapse id")
    func defaultPolicy() {
        #expect(RetryPolicy.default.ambiguous == .collapsible)
        #expect(RetryPolicy.default.decision(afterAttempt: 1, failure: Self.possiblyProcessed, remaining: nil,
                                             randomUnit: 0.5) == .giveUp(.possiblyProcessed))
        #expect(!RetryPolicy.default.mayResendPossiblyProcessed(collapsible: false))
        #expect(RetryPolicy.default.mayResendPossiblyProcessed(collapsible: true))
        #expect(!RetryPolicy(ambiguous: AmbiguousRetry(rawValue: "odd")).mayResendPossiblyProcessed(collapsible: true))
    }

    @Test("responses are unaffected by the ambiguous rule (an answer is definitive about processing)")
    func responsesUnaffected() {
        let failure = DeliveryFailure.response(status: 503, classification: .retryable, retryAfter: nil)
        for ambiguous in AmbiguousRetry.allValues {
            #expect(policy(ambiguous).decision(afterAttempt: 1, failure: failure, remaining: .seconds(30), randomUnit: 1)
                    == .retry(after: .milliseconds(500)))
        }
    }

    @Test("provider/shut-down is never retried, processed or not")
    func shutDown() {
        let failure = DeliveryFailure.transport(NorqError(.providerShutDown, "stopped", possiblyProcessed: true))
        #expect(policy(.always).decision(afterAttempt: 1, failure: failure, remaining: nil, randomUnit: 0.5)
                == .giveUp(.notRetryable))
    }

    @Test("mayHaveBeenDelivered reads the failed outcome's possiblyProcessed")
    func outcomeFlag() {
        let maybe = PushOutcome.Result.failed(NorqError(.transportFailed, "lost", possiblyProcessed: true))
        let not = PushOutcome.Result.failed(NorqError(.transportFailed, "refused"))
        #expect(maybe.mayHaveBeenDelivered)
        #expect(!not.mayHaveBeenDelivered)
        #expect(!PushOutcome.Result.delivered(.init()).mayHaveBeenDelivered)
        let report = SendReport(outcomes: [maybe, not].map {
            PushOutcome(target: .token(PushToken(token: "t", platform: .ios)), result: $0)
        })
        #expect(report.mayHaveBeenDelivered == 1)
        #expect(report.outcomes[0].mayHaveBeenDelivered)
    }
}
