import Norq
import NorqCore
import Testing

/// The router side of issue 14 defect 2: a failed attempt that the server may have processed is re-sent only
/// when `retry.ambiguous` allows it, else the outcome is `failed` and says that the push may have been delivered.
@Suite("Retries: ambiguous attempts")
struct AmbiguousRetryRouterTests {
    static let lost = NorqError(.transportFailed, "connection lost after the request was written", possiblyProcessed: true)
    static let refused = NorqError(.transportFailed, "stream refused (REFUSED_STREAM)", possiblyProcessed: false)

    func retry(_ ambiguous: AmbiguousRetry) -> RetryPolicy {
        RetryPolicy(retries: 2, backoff: .milliseconds(1), maxBackoff: .milliseconds(4), ambiguous: ambiguous)
    }

    func send(_ provider: FakeProvider, sleeper: SleepRecorder = SleepRecorder(), metrics: RecordingMetrics? = nil,
              options: RouterSendOptions = RouterSendOptions(), content: PushContent = PushContent(title: "t"),
              tokens: [PushToken] = [ios("aaaa")]) async throws -> SendReport {
        let r = try NotificationRouter(providers: [provider], metricsFactory: metrics, clock: sleeper.clock)
        return try await r.send(content: content, to: recipients(tokens), options: options)
    }

    @Test("possibly processed, no collapse id, default policy: one attempt, failed, may have been delivered")
    func defaultPolicyDoesNotResend() async throws {
        let metrics = RecordingMetrics()
        let apns = FakeProvider(name: "apns", retry: RetryPolicy(retries: 2, backoff: .milliseconds(1))) {
            _, _ throws(NorqError) in throw Self.lost
        }
        let report = try await send(apns, metrics: metrics)
        let outcome = try #require(report.outcomes.first)
        #expect(apns.requestCount == 1)
        #expect(outcome.attempts == 1)
        #expect(outcome.mayHaveBeenDelivered)
        guard case .failed(let error) = outcome.result else { Issue.record("not failed: \(outcome.result)"); return }
        #expect(error.code == .transportFailed)
        #expect(error.possiblyProcessed)
        #expect(report.mayHaveBeenDelivered == 1)
        #expect(metrics.value("norq_ambiguous_failed_total", [("provider", "apns")]) == 1)
        #expect(metrics.value("norq_retried_total", [("provider", "apns")]) == 0)
    }

    @Test("possibly processed with a collapse id under collapsible: re-sent (a duplicate collapses on the device)")
    func collapsibleResends() async throws {
        let apns = FakeProvider(name: "apns", retry: retry(.collapsible)) { _, attempt throws(NorqError) in
            if attempt == 1 { throw Self.lost }
            return FakeProvider.ok()
        }
        var content = PushContent(title: "t")
        content.headers.collapseID = "order-1"
        let report = try await send(apns, content: content)
        let outcome = try #require(report.outcomes.first)
        #expect(outcome.result.kind == "delivered")
        #expect(outcome.attempts == 2)
        #expect(apns.requests.allSatisfy { $0.header("x-collapse") == "order-1" })
    }

    @Test("a collapse id derived from the idempotency key (collapse: .idempotency) also allows the re-send")
    func derivedCollapseID() async throws {
        let apns = FakeProvider(name: "apns", retry: retry(.collapsible)) { _, attempt throws(NorqError) in
            if attempt == 1 { throw Self.lost }
            return FakeProvider.ok()
        }
        let report = try await send(apns, options: RouterSendOptions(idempotencyKey: "k-1", collapse: .idempotency))
        #expect(report.outcomes.first?.attempts == 2)
        #expect(report.delivered == 1)
    }

    @Test("under never, even a collapsible push is not re-sent")
    func neverResends() async throws {
        let apns = FakeProvider(name: "apns", retry: retry(.never)) { _, _ throws(NorqError) in throw Self.lost }
        var content = PushContent(title: "t")
        content.headers.collapseID = "order-1"
        let report = try await send(apns, content: content)
        #expect(apns.requestCount == 1)
        #expect(report.outcomes.first?.mayHaveBeenDelivered == true)
    }

    @Test("under always, a push without collapse id is re-sent within retries, and still may have been delivered")
    func alwaysResends() async throws {
        let apns = FakeProvider(name: "apns", retry: retry(.always)) { _, _ throws(NorqError) in throw Self.lost }
        let report = try await send(apns)
        #expect(apns.requestCount == 3)
        #expect(report.outcomes.first?.attempts == 3)
        #expect(report.outcomes.first?.mayHaveBeenDelivered == true)
    }

    /// `refused` is not possibly processed but not marked `notProcessed` either (as a failure to connect is not):
    /// such a failure spends the budget. One marked `notProcessed` is re-queued free (`RequeueRouterTests`).
    @Test("not possibly processed, not marked unprocessed: retried with backoff, bounded by retries, not possibly delivered")
    func notProcessedRetriedWithBackoff() async throws {
        let sleeper = SleepRecorder()
        let apns = FakeProvider(name: "apns", retry: retry(.never)) { _, _ throws(NorqError) in throw Self.refused }
        let report = try await send(apns, sleeper: sleeper)
        #expect(apns.requestCount == 3)
        #expect(sleeper.recorded == [.microseconds(500), .milliseconds(1)])
        let outcome = try #require(report.outcomes.first)
        #expect(outcome.result.kind == "failed")
        #expect(!outcome.mayHaveBeenDelivered)
    }

    @Test("an earlier possibly processed attempt keeps the outcome marked after a clean failure of the re-send")
    func markStaysAfterCleanFailure() async throws {
        let apns = FakeProvider(name: "apns", retry: retry(.always)) { _, attempt throws(NorqError) in
            throw attempt == 1 ? Self.lost : Self.refused
        }
        let report = try await send(apns)
        let outcome = try #require(report.outcomes.first)
        #expect(outcome.attempts == 3)
        guard case .failed(let error) = outcome.result else { Issue.record("not failed"); return }
        #expect(error.message == Self.refused.message)
        #expect(error.possiblyProcessed)
    }

    @Test("a possibly processed deadline failure is not re-sent and says so; many tokens each get one outcome")
    func manyTokens() async throws {
        let apns = FakeProvider(name: "apns") { request, _ throws(NorqError) in
            if request.path.hasSuffix("1") { throw NorqError(.deadlineExceeded, "no answer", possiblyProcessed: true) }
            if request.path.hasSuffix("2") { throw Self.refused }
            return FakeProvider.ok()
        }
        let tokens = (0..<30).map { ios(hexToken($0)) }
        let report = try await send(apns, tokens: tokens)
        #expect(report.outcomes.count == 30)
        let maybe = report.outcomes.filter(\.mayHaveBeenDelivered)
        #expect(maybe.count == tokens.count { $0.token.hasSuffix("1") })
        #expect(maybe.allSatisfy { $0.attempts == 1 })
        #expect(report.failed == tokens.count { $0.token.hasSuffix("1") || $0.token.hasSuffix("2") })
    }
}
