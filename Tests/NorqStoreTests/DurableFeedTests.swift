import Norq
import NorqCore
import NorqStore
import Synchronization
import Testing

/// The worker's feeding of a claimed batch (`DurableWorker.BatchFeeder`): at most `maxInFlight / lanes` attempts of
/// a batch in flight, the next row started from each completion, and no recursion when a provider answers inside
/// `startDelivery` itself (a refusal before any I/O): 4,000 of them end, each once, on a small stack.
@Suite struct DurableFeedTests {
    /// Answers inside `startDelivery` (`answer`), or later from a task; counts what is in flight.
    final class InlineProvider: PushProvider {
        let name = "inline"
        let typeName = "inline"
        let platforms: Set<Platform> = [.ios]
        let policy: DeliveryPolicy
        let inline: Bool
        let answer: @Sendable () -> Result<DeliveryResponse, NorqError>
        struct Counts { var inFlight = 0, maxInFlight = 0, sent = 0 }
        let counts = Mutex(Counts())

        init(maxInFlight: Int, inline: Bool, answer: @escaping @Sendable () -> Result<DeliveryResponse, NorqError>) {
            self.policy = DeliveryPolicy(retry: RetryPolicy(retries: 0), maxInFlight: maxInFlight)
            self.inline = inline
            self.answer = answer
        }

        func prepare(_ content: PushContent, for token: PushToken, options: SendOptions) throws(NorqError) -> PreparedRequest {
            PreparedRequest(method: "POST", authority: "inline.invalid", path: "/\(token.token)", headers: [], body: [],
                            provider: name, target: .token(token), requestID: options.requestID)
        }

        func deliver(_ request: PreparedRequest, deadline: ContinuousClock.Instant) async throws(NorqError) -> DeliveryResponse {
            try answer().get()
        }

        func startDelivery(_ request: PreparedRequest, deadline: ContinuousClock.Instant,
                           completion: @escaping @Sendable (Result<DeliveryResponse, NorqError>) -> Void) {
            counts.withLock { counts in
                counts.inFlight += 1
                counts.sent += 1
                counts.maxInFlight = max(counts.maxInFlight, counts.inFlight)
            }
            let finish: @Sendable () -> Void = { [self] in
                counts.withLock { $0.inFlight -= 1 }
                completion(answer())
            }
            if inline { finish() } else { Task { await Task.yield(); finish() } }
        }

        func shutdown() async {}
    }

    func run(_ provider: InlineProvider, targets: Int, lanes: Int) async throws -> SendReport {
        let router = try NotificationRouter(providers: [provider], defaultProvider: "inline")
        let durable = DurableDelivery(router: router, store: InMemoryDeliveryStore(),
                                      settings: DeliveryStoreSettings(claimBatchSize: 1_000, pollInterval: .milliseconds(10)))
        let worker = DurableWorker(delivery: durable, lanes: lanes)
        let recipients = (0..<targets).lazy.map { Recipient(tokens: [PushToken(token: "t\($0)", platform: .ios)]) }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await worker.run() }
            let receipt = try await durable.enqueue(content: PushContent(title: "Hi"), to: recipients)
            let report = try await durable.wait(for: receipt.sendID, timeout: .seconds(60))
            worker.stop()
            try await group.waitForAll()
            await router.shutdown(gracePeriod: .seconds(1))
            return report
        }
    }

    @Test func refusalsInsideStartDeliveryEndEachRowOnceWithoutRecursing() async throws {
        let provider = InlineProvider(maxInFlight: 1_000, inline: true) {
            .failure(NorqError(.transportFailed, "refused before any I/O"))
        }
        let report = try await run(provider, targets: 4_000, lanes: 2)
        #expect(report.outcomes.count == 4_000)
        #expect(report.outcomes.allSatisfy { $0.result.kind == "failed" })
        #expect(provider.counts.withLock { $0.sent } == 4_000, "each row attempted once (no retries in the policy)")
    }

    @Test func aBatchKeepsAtMostItsShareOfMaxInFlight() async throws {
        let provider = InlineProvider(maxInFlight: 40, inline: false) { .success(DeliveryResponse(status: 200, classification: .delivered)) }
        let report = try await run(provider, targets: 3_000, lanes: 2)
        #expect(report.delivered == 3_000)
        let counts = provider.counts.withLock { $0 }
        #expect(counts.sent == 3_000)
        // Two lanes of 40 / 2 each: never more than 40 at once (the claim holds up to 1,000 rows).
        #expect(counts.maxInFlight <= 40, "\(counts.maxInFlight) in flight")
        #expect(counts.maxInFlight >= 20, "a lane fills its share: \(counts.maxInFlight)")
    }
}
