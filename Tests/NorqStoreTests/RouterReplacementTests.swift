@testable import Norq
import NorqCore
import NorqStore
import NorqProviderTesting
import Synchronization
import Testing

/// `DurableDelivery.replaceRouter(with:)` (a reload with new providers): attempts in flight finish on the router
/// they started on, whose `shutdown()` waits for them before closing its providers; later attempts use the new one.
@Suite struct RouterReplacementTests {
    /// Holds every answer of the old provider until `open()`.
    final class Gate: Sendable {
        private let signal = WakeSignal()
        func open() { signal.latch() }
        func wait() async { await signal.wait() }
    }

    @Test func aReplacedRouterClosesItsProvidersOnlyAfterItsAttemptsInFlight() async throws {
        let gate = Gate()
        let old = FakeProvider(name: "apns") { _, _ throws(NorqError) in
            await gate.wait()
            return FakeProvider.ok()
        }
        let new = FakeProvider(name: "apns")
        let oldRouter = try NotificationRouter(providers: [old], defaultProvider: "apns")
        let newRouter = try NotificationRouter(providers: [new], defaultProvider: "apns")
        try await DurableDeliveryTests.withSQLite { store in
            let durable = DurableDelivery(router: oldRouter, store: store, settings: DurableDeliveryTests.settings)
            let worker = DurableWorker(delivery: durable)
            try await withWorker(worker) {
                let first = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(3))
                try await Chaos.waitUntil("three attempts in flight", timeout: .seconds(20)) { old.state.withLock { $0.inFlight } == 3 }

                #expect(durable.replaceRouter(with: newRouter) === oldRouter)
                #expect(durable.router === newRouter)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { await oldRouter.shutdown() }
                    // The old router waits for its three attempts: its provider is not shut down yet.
                    try await Task.sleep(for: .milliseconds(200))
                    #expect(old.shutdownCalls == 0)
                    gate.open()
                    try await group.waitForAll()
                }
                #expect(old.shutdownCalls == 1)
                let firstReport = try await durable.wait(for: first.sendID, timeout: .seconds(20))
                #expect(firstReport.delivered == 3)
                #expect(old.requestCount == 3 && new.requestCount == 0)

                // Sends after the replacement go through the new router's provider.
                let second = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(2, from: 10))
                #expect(try await durable.wait(for: second.sendID, timeout: .seconds(20)).delivered == 2)
                #expect(new.requestCount == 2 && old.requestCount == 3)
            }
        }
        await newRouter.shutdown()
    }

    /// A router shut down before its worker (a library user's order): the worker claims nothing (its attempts
    /// would be given back at once, over and over) until it is stopped; the rows stay pending for the next start.
    @Test func aWorkerWhoseRouterIsShutDownLeavesTheRowsPending() async throws {
        let leasesMade = Mutex(0)
        let store = InMemoryDeliveryStore(makeLeaseToken: {
            leasesMade.withLock { $0 += 1 }
            return RequestID.random()
        })
        let provider = FakeProvider(name: "apns")
        let router = try NotificationRouter(providers: [provider], defaultProvider: "apns")
        let durable = DurableDelivery(router: router, store: store, settings: DurableDeliveryTests.settings)
        let receipt = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(3))
        await router.shutdown()
        try await withWorker(DurableWorker(delivery: durable)) {
            try await Task.sleep(for: .milliseconds(300))  // six poll intervals
        }
        #expect(provider.requestCount == 0)
        #expect(leasesMade.withLock { $0 } == 0, "no row claimed")
        let rows = try await DurableDelivery.rows(of: receipt.sendID, in: store)
        #expect(rows.count == 3 && rows.allSatisfy { $0.state == .pending && $0.attempts == 0 })
    }
}
