import Norq
import NorqCore
import Testing

/// Issue 30, the router side: an attempt the server did not process (`NorqError.notProcessed`) is re-queued without
/// spending `retry.retries`, counted in `norq_requeued_total` and in the outcome's `requeues`; the deadline bounds it.
@Suite("Retries: re-queues of unprocessed attempts")
struct RequeueRouterTests {
    static let refused = NorqError(.transportFailed, "the server refused the stream (REFUSED_STREAM)", notProcessed: true)
    static let lost = NorqError(.transportFailed, "connection lost after the request was written", possiblyProcessed: true)

    @Test("five refusals with retries 2: delivered, 5 re-queues counted apart from retries, no budget spent")
    func refusalsDoNotSpendTheBudget() async throws {
        let metrics = RecordingMetrics()
        let sleeper = SleepRecorder()
        let apns = FakeProvider(name: "apns", retry: RetryPolicy(retries: 2, backoff: .milliseconds(10))) {
            _, attempt throws(NorqError) in
            if attempt <= 5 { throw Self.refused }
            return FakeProvider.ok()
        }
        let router = try NotificationRouter(providers: [apns], metricsFactory: metrics, clock: sleeper.clock)
        let report = try await router.send(content: PushContent(title: "t"), to: recipients([ios("aaaa")]))
        let outcome = try #require(report.outcomes.first)
        #expect(outcome.result.kind == "delivered")
        #expect(outcome.attempts == 6)
        #expect(outcome.requeues == 5)
        #expect(report.requeues == 5)
        #expect(apns.requestCount == 6)
        #expect(metrics.value("norq_requeued_total", [("provider", "apns")]) == 5)
        #expect(metrics.value("norq_retried_total", [("provider", "apns")]) == 0)
        // The first re-queue goes at once (no sleep), the next back off (jitter 0.5 of 10, 20, 40, 80 ms).
        #expect(sleeper.recorded == [.milliseconds(5), .milliseconds(10), .milliseconds(20), .milliseconds(40)])
    }

    @Test("re-queues leave the whole budget to the answers: refusals, then 503 twice, then delivered")
    func budgetStaysForAnswers() async throws {
        let metrics = RecordingMetrics()
        let apns = FakeProvider(name: "apns", retry: RetryPolicy(retries: 2, backoff: .milliseconds(1))) {
            _, attempt throws(NorqError) in
            if attempt <= 4 { throw Self.refused }
            if attempt <= 6 { return FakeProvider.fail(503, "ServiceUnavailable", .retryable) }
            return FakeProvider.ok()
        }
        let router = try NotificationRouter(providers: [apns], metricsFactory: metrics, clock: SleepRecorder().clock)
        let report = try await router.send(content: PushContent(title: "t"), to: recipients([ios("aaaa")]))
        let outcome = try #require(report.outcomes.first)
        #expect(outcome.result.kind == "delivered")
        #expect(outcome.attempts == 7)
        #expect(outcome.requeues == 4)
        #expect(metrics.value("norq_retried_total", [("provider", "apns")]) == 2)
    }

    @Test("5xx spends the budget even after re-queues: retries 2 means three 503 answers, then rejected")
    func answersExhaustTheBudget() async throws {
        let apns = FakeProvider(name: "apns", retry: RetryPolicy(retries: 2, backoff: .milliseconds(1))) {
            _, attempt throws(NorqError) in
            if attempt.isMultiple(of: 2) { throw Self.refused }
            return FakeProvider.fail(503, "ServiceUnavailable", .retryable)
        }
        let router = try NotificationRouter(providers: [apns], clock: SleepRecorder().clock)
        let report = try await router.send(content: PushContent(title: "t"), to: recipients([ios("aaaa")]))
        let outcome = try #require(report.outcomes.first)
        #expect(outcome.result.kind == "rejected")
        // 503, refused, 503, refused, 503: three answers (the budget), two free re-queues.
        #expect(outcome.attempts == 5)
        #expect(outcome.requeues == 2)
    }

    @Test("a possibly processed attempt spends the budget: refused, lost, refused, lost, lost under always")
    func possiblyProcessedSpends() async throws {
        let retry = RetryPolicy(retries: 2, backoff: .milliseconds(1), ambiguous: .always)
        let apns = FakeProvider(name: "apns", retry: retry) { _, attempt throws(NorqError) in
            throw [1, 3].contains(attempt) ? Self.refused : Self.lost
        }
        let router = try NotificationRouter(providers: [apns], clock: SleepRecorder().clock)
        let report = try await router.send(content: PushContent(title: "t"), to: recipients([ios("aaaa")]))
        let outcome = try #require(report.outcomes.first)
        #expect(outcome.attempts == 5)
        #expect(outcome.requeues == 2)
        #expect(outcome.mayHaveBeenDelivered)
    }

    @Test("a provider refusing every request: re-queued until the deadline, then failed, not possibly delivered")
    func boundedByTheDeadline() async throws {
        let apns = FakeProvider(name: "apns", retry: RetryPolicy(retries: 2, backoff: .milliseconds(5),
                                                                 maxBackoff: .milliseconds(10))) {
            _, _ throws(NorqError) in throw Self.refused
        }
        let router = try NotificationRouter(providers: [apns])
        let started = ContinuousClock.now
        let report = try await router.send(content: PushContent(title: "t"), to: recipients([ios("aaaa")]),
                                           options: RouterSendOptions(deadline: .milliseconds(600)))
        let elapsed = started.duration(to: .now)
        let outcome = try #require(report.outcomes.first)
        #expect(outcome.result.kind == "failed")
        #expect(!outcome.mayHaveBeenDelivered)
        #expect(outcome.requeues == outcome.attempts - 1)
        // More than `retries` allows, fewer than an unbounded loop would make (delays grow towards 1 s).
        #expect(outcome.attempts > 3 && outcome.attempts < 30, "\(outcome.attempts) attempts")
        #expect(elapsed < .seconds(2), "\(elapsed)")
    }
}
