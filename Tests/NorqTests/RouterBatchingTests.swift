import Norq
import NorqCore
import Synchronization
import Testing

/// The router's batching for providers that take many targets per request (`BatchPushProvider`), with a provider
/// that knows nothing of Expo: grouping by batch key within the batch size, one outcome per target, per-target
/// retries, and the per-token path kept for a batch size of 1.
@Suite("Router batching")
struct RouterBatchingTests {
    /// Sends groups of up to `maxBatchSize`, keyed by the token's first letter; a token listed in `failOnce` gets a
    /// 503 the first time.
    final class GroupingProvider: BatchPushProvider {
        let name = "grouping"
        let platforms: Set<Platform> = [.ios]
        let policy = DeliveryPolicy(retry: RetryPolicy(retries: 2, backoff: .milliseconds(1)), maxInFlight: 100)
        let maxBatchSize: Int
        let failOnce: Set<String>
        let batches = Mutex<[[String]]>([])
        let singles = Mutex(0)
        private let failed = Mutex<Set<String>>([])

        init(maxBatchSize: Int, failOnce: Set<String> = []) {
            self.maxBatchSize = maxBatchSize
            self.failOnce = failOnce
        }

        func prepare(_ content: PushContent, for token: PushToken, options: SendOptions) throws(NorqError) -> PreparedRequest {
            PreparedRequest(method: "POST", authority: "batch.invalid", path: "/", headers: [], body: Array(token.token.utf8),
                            provider: name, target: .token(token))
        }

        func batchKey(for request: PreparedRequest) -> String? {
            guard case .token(let token) = request.target else { return nil }
            return String(token.token.prefix(1))
        }

        func answer(_ request: PreparedRequest) -> Result<DeliveryResponse, NorqError> {
            guard case .token(let token) = request.target else { return .failure(NorqError(.transportFailed, "no token")) }
            let fail = failOnce.contains(token.token) && failed.withLock { $0.insert(token.token).inserted }
            return .success(fail ? DeliveryResponse(status: 503, reason: "Unavailable", classification: .retryable)
                                 : DeliveryResponse(status: 200, messageID: "id-\(token.token)", classification: .accepted))
        }

        func deliver(_ request: PreparedRequest, deadline: ContinuousClock.Instant) async throws(NorqError) -> DeliveryResponse {
            singles.withLock { $0 += 1 }
            return try answer(request).get()
        }

        func startBatchDelivery(_ requests: [PreparedRequest], deadline: ContinuousClock.Instant,
                                completion: @escaping @Sendable ([Result<DeliveryResponse, NorqError>]) -> Void) {
            batches.withLock { $0.append(requests.map { String(decoding: $0.body, as: UTF8.self) }) }
            completion(requests.map(answer))
        }
    }

    static func recipients(_ tokens: [String]) -> [Recipient] {
        tokens.map { Recipient(tokens: [PushToken(token: $0, platform: .ios)]) }
    }

    @Test("targets are grouped by batch key within the batch size; each gets its own accepted outcome")
    func grouping() async throws {
        let provider = GroupingProvider(maxBatchSize: 4)
        let router = try NotificationRouter(providers: [provider], byPlatform: [.ios: "grouping"])
        let tokens = (0..<10).map { "a\($0)" } + (0..<3).map { "b\($0)" }
        let report = try await router.send(content: PushContent(title: "Hi"), to: Self.recipients(tokens))
        #expect(report.accepted == 13)
        for (index, outcome) in report.outcomes.enumerated() {
            guard case .delivered(let delivered) = outcome.result else { Issue.record("\(outcome.result)"); continue }
            #expect(delivered.messageID == "id-\(tokens[index])")
            #expect(delivered.accepted)
        }
        let batches = provider.batches.withLock { $0 }
        #expect(batches.allSatisfy { $0.count <= 4 })
        #expect(batches.allSatisfy { Set($0.map { $0.prefix(1) }).count == 1 }, "\(batches)")
        #expect(batches.flatMap { $0 }.sorted() == tokens.sorted())
        #expect(batches.count < tokens.count)
        #expect(provider.singles.withLock { $0 } == 0)
        await router.shutdown()
    }

    @Test("only the failed targets of a batch are sent again")
    func perTargetRetry() async throws {
        let provider = GroupingProvider(maxBatchSize: 5, failOnce: ["a2", "a4"])
        let router = try NotificationRouter(providers: [provider], byPlatform: [.ios: "grouping"],
                                            clock: RouterClock(sleep: { _ in await Task.yield() }, random: { 0.5 }))
        let tokens = (0..<5).map { "a\($0)" }
        let report = try await router.send(content: PushContent(title: "Hi"), to: Self.recipients(tokens))
        #expect(report.accepted == 5)
        #expect(report.outcomes.map(\.attempts) == [1, 1, 2, 1, 2])
        // Each token was in as many batches as it has attempts: only a2 and a4 were sent again.
        let sent = provider.batches.withLock { $0 }.flatMap { $0 }
        for (token, attempts) in zip(tokens, report.outcomes.map(\.attempts)) {
            #expect(sent.count { $0 == token } == attempts, "\(token)")
        }
        await router.shutdown()
    }

    /// The linger timers are child tasks of the send (not unowned tasks): cancelling a send whose partly filled batch
    /// waits on its timer ends that wait, and the batch leaves at once; every target still gets its one outcome.
    @Test("cancelling a send ends its batches' linger timers")
    func cancelledSendEndsItsTimers() async throws {
        let provider = GroupingProvider(maxBatchSize: 100)
        // A linger that never ends by itself: only cancellation ends the timer's sleep.
        let router = try NotificationRouter(providers: [provider], byPlatform: [.ios: "grouping"],
                                            clock: RouterClock(sleep: { _ in try await Task.sleep(for: .seconds(3_600)) }))
        let tokens = ["a0", "a1", "a2"]
        let sending = Task { try await router.send(content: PushContent(title: "Hi"), to: Self.recipients(tokens)) }
        try await Task.sleep(for: .milliseconds(200))
        #expect(provider.batches.withLock { $0 }.isEmpty, "the batch waits for its timer")
        sending.cancel()
        // Bounded, polling a flag (awaiting `sending.value` cannot itself be cut short): a timer that outlived the
        // send would hold the batch for an hour.
        let ended = Mutex<SendReport??>(nil)
        let observer = Task {
            let report = try? await sending.value
            ended.withLock { $0 = .some(report) }
        }
        for _ in 0..<200 where ended.withLock({ $0 == nil }) { try await Task.sleep(for: .milliseconds(100)) }
        guard let finished = ended.withLock({ $0 }), let report = finished else {
            Issue.record("the cancelled send did not end within 20 s")
            observer.cancel()
            return
        }
        #expect(report.outcomes.count == tokens.count)
        #expect(provider.batches.withLock { $0 }.flatMap { $0 }.sorted() == tokens)
        await router.shutdown()
    }

    @Test("a batch size of 1 keeps the per-token path")
    func batchSizeOne() async throws {
        let provider = GroupingProvider(maxBatchSize: 1)
        let router = try NotificationRouter(providers: [provider], byPlatform: [.ios: "grouping"])
        let report = try await router.send(content: PushContent(title: "Hi"), to: Self.recipients(["a1", "a2", "b1"]))
        #expect(report.accepted == 3)
        #expect(provider.batches.withLock { $0 }.isEmpty)
        #expect(provider.singles.withLock { $0 } == 3)
        await router.shutdown()
    }
}
