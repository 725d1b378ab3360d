import Norq
import NorqCore
import Testing

@Suite("Retries")
struct RetryTests {
    func send(_ provider: FakeProvider, sleeper: SleepRecorder = SleepRecorder(),
              options: RouterSendOptions = RouterSendOptions()) async throws -> PushOutcome {
        let r = try NotificationRouter(providers: [provider], clock: sleeper.clock)
        let report = try await r.send(content: PushContent(title: "t"), to: recipients([ios("aaaa")]), options: options)
        return try #require(report.outcomes.first)
    }

    @Test("429, 500 and 503 are retried with the same request id; Retry-After is honoured",
          arguments: [429, 500, 503])
    func retried(status: Int) async throws {
        let sleeper = SleepRecorder()
        let apns = FakeProvider(name: "apns") { _, attempt throws(NorqError) in
            attempt < 3 ? FakeProvider.fail(status, "X", .retryable, retryAfter: attempt == 1 ? .seconds(2) : nil)
                        : FakeProvider.ok()
        }
        let outcome = try await send(apns, sleeper: sleeper)
        #expect(outcome.result.kind == "delivered")
        #expect(outcome.attempts == 3)
        #expect(Set(apns.requests.map(\.requestID)).count == 1)
        #expect(apns.requests.first?.requestID != nil)
        // Retry-After 2 s on the first failure, then backoff with jitter 0.5 * min(4ms, 1ms * 2).
        #expect(sleeper.recorded == [.seconds(2), .milliseconds(1)])
    }

    @Test("400, 403 and 410 are not retried", arguments: [
        (400, "BadTopic", ResponseClass.permanent), (403, "InvalidProviderToken", .credentials),
        (410, "Unregistered", .tokenInvalid),
    ])
    func notRetried(status: Int, reason: String, classification: ResponseClass) async throws {
        let apns = FakeProvider(name: "apns") { _, _ throws(NorqError) in
            FakeProvider.fail(status, reason, classification)
        }
        let outcome = try await send(apns)
        #expect(outcome.attempts == 1)
        guard case .rejected(let rejected) = outcome.result else { Issue.record("not rejected"); return }
        #expect(rejected.status == status)
        #expect(rejected.reason == reason)
        #expect(rejected.code == .rejectedByProvider)
        #expect(rejected.classification == classification)
    }

    @Test("an ExpiredProviderToken classified retryable by the provider is retried")
    func expiredProviderToken() async throws {
        let apns = FakeProvider(name: "apns") { _, attempt throws(NorqError) in
            attempt == 1 ? FakeProvider.fail(403, "ExpiredProviderToken", .retryable) : FakeProvider.ok()
        }
        let outcome = try await send(apns)
        #expect(outcome.result.kind == "delivered")
        #expect(outcome.attempts == 2)
    }

    @Test("after all retries the last response is the outcome")
    func exhausted() async throws {
        let apns = FakeProvider(name: "apns") { _, _ throws(NorqError) in FakeProvider.fail(500, "InternalServerError", .retryable) }
        let outcome = try await send(apns)
        #expect(outcome.attempts == 3)
        guard case .rejected(let rejected) = outcome.result else { Issue.record("not rejected"); return }
        #expect(rejected.status == 500)
    }

    @Test("transport errors are retried; without an answer the outcome is failed")
    func transport() async throws {
        let flaky = FakeProvider(name: "apns") { _, attempt throws(NorqError) in
            if attempt == 1 { throw NorqError(.transportFailed, "reset") }
            return FakeProvider.ok()
        }
        #expect(try await send(flaky).result.kind == "delivered")
        let dead = FakeProvider(name: "apns") { _, _ throws(NorqError) in throw NorqError(.transportFailed, "refused") }
        let outcome = try await send(dead)
        #expect(outcome.attempts == 3)
        guard case .failed(let error) = outcome.result else { Issue.record("not failed"); return }
        #expect(error.code == .transportFailed)
    }

    @Test("the deadline bounds all attempts: a Retry-After beyond it is not waited for")
    func deadline() async throws {
        let sleeper = SleepRecorder()
        let apns = FakeProvider(name: "apns") { _, _ throws(NorqError) in
            FakeProvider.fail(429, "TooManyRequests", .retryAfterDelay, retryAfter: .seconds(60))
        }
        let outcome = try await send(apns, sleeper: sleeper, options: RouterSendOptions(deadline: .seconds(5)))
        #expect(outcome.attempts == 1)
        #expect(sleeper.recorded.isEmpty)
    }
}
