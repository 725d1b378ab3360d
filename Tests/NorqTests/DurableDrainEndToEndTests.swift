import Foundation
import Norq
import NorqCore
import NorqHostileTesting
import NorqTesting
import Testing

/// Issue 30's rule on the durable path: a worker re-sends an attempt the server provably did not process (here:
/// REFUSED_STREAM on every 7th stream) within its claim, without spending the retry budget, so a send with
/// `retries: 0` is delivered whole, each token processed by the server once, and nothing is recorded as a retry.
@Suite(.serialized, .timeLimit(.minutes(1))) struct DurableDrainEndToEndTests {
    @Test func refusedStreamsAreResentWithinTheClaimWithoutSpendingTheBudget() async throws {
        let server = try HostileHTTP2Server(configuration: .init(fault: .refuseEvery(nth: 7), maxConcurrentStreams: 1_000))
        try await server.start()
        let router = try HostileRun.makeRouter(server, retry: RetryPolicy(retries: 0, backoff: .milliseconds(20),
                                                                           maxBackoff: .milliseconds(100)))
        let store = InMemoryDeliveryStore()
        let settings = DeliveryStoreSettings(leaseDuration: .seconds(5), claimBatchSize: 200, pollInterval: .milliseconds(20))
        let durable = DurableDelivery(router: router, store: store, settings: settings)
        let worker = DurableWorker(delivery: durable)
        let count = 700
        let tokens = (0..<count).map(HostileRun.token)
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await worker.run() }
                defer { worker.stop() }
                let receipt = try await durable.enqueue(content: PushContent(title: "hostile", body: "durable"),
                                                        to: recipients(tokens.map { ios($0) }),
                                                        options: RouterSendOptions(deadline: .seconds(20)))
                let report = try await durable.wait(for: receipt.sendID, timeout: .seconds(30))
                #expect(report.delivered == count, "\(report.outcomes.filter { $0.result.kind != "delivered" }.prefix(3))")
                let rows = try await DurableDelivery.rows(of: receipt.sendID, in: store)
                // One claim each: the re-sends happened within it.
                #expect(rows.allSatisfy { $0.attempts == 1 }, "claims: \(Set(rows.map(\.attempts)))")
                #expect(!rows.contains { $0.mayHaveBeenDelivered })
            }
            let statistics = server.statistics
            #expect(statistics.processedTwice.isEmpty)
            #expect(statistics.processed == count)
            #expect(statistics.requests > count, "the server refused some streams: \(statistics.requests)")
        } catch {
            Issue.record("\(error)")
        }
        await router.shutdown(gracePeriod: .milliseconds(500))
        await server.stop()
    }
}
