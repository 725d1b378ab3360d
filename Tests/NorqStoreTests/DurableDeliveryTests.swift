import Foundation
@testable import Norq
import NorqCore
import NorqStore
import NorqStoreSQLite
import NorqTesting
import Testing

/// Durable delivery end to end: a SQLite store, the router's APNs provider, the emulator over TLS.
@Suite struct DurableDeliveryTests {
    static let settings = DeliveryStoreSettings(leaseDuration: .seconds(2), callTimeout: .seconds(10), claimBatchSize: 64,
                                                pollInterval: .milliseconds(50))

    static func withSQLite(_ body: (SQLiteDeliveryStore) async throws -> Void) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try await SQLiteDeliveryStore.open(path: directory.appendingPathComponent("norq.db").path,
                                                       settings: settings)
        try await store.migrate()
        do { try await body(store) } catch {
            await store.close()
            throw error
        }
        await store.close()
    }

    @Test func enqueuedSendIsDeliveredWithOneOutcomePerTokenAndInvalidTokensAreRemembered() async throws {
        let dead = DurableRig.token(7)
        let rig = try await DurableRig.make(faults: .init(unregisteredTokens: [dead: 1_700_000_000_000]))
        defer { Task { await rig.shutdown() } }
        try await Self.withSQLite { store in
            let durable = DurableDelivery(router: rig.router, store: store, settings: Self.settings)
            let worker = DurableWorker(delivery: durable)
            try await withWorker(worker) {
                let receipt = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(40))
                #expect(receipt.created && receipt.targetCount == 40)
                let report = try await durable.wait(for: receipt.sendID, timeout: .seconds(30))
                #expect(report.outcomes.count == 40)
                #expect(report.delivered == 39 && report.rejected == 1)
                let rejected = try #require(report.outcomes.first { $0.result.kind == "rejected" })
                guard case .rejected(let why) = rejected.result else { return }
                #expect(why.reason == "Unregistered" && why.invalidSince == 1_700_000_000_000)
                // Every token was sent once, with the message id its row holds.
                let status = try await durable.status(of: receipt.sendID)
                let sent = rig.requestsByID()
                #expect(sent.count == 40 && sent.values.allSatisfy { $0 == 1 })
                #expect(Set(status.rows.compactMap(\.messageID)) == Set(sent.keys))
                // The registry now holds the token: a later send skips it.
                let registry = try await store.invalidTokens(limit: 10)
                #expect(registry.map(\.token) == [dead])
                let later = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(10))
                let second = try await durable.wait(for: later.sendID, timeout: .seconds(30))
                let skipped = try #require(second.outcomes.first { $0.result.kind == "skipped" })
                guard case .skipped(let skip) = skipped.result else { return }
                #expect(skip.code == .tokenInvalid)
                #expect(second.delivered == 9)
                // Registered again (the emulator forgets it too): delivered again.
                rig.emulator.setFaults(.init())
                try await durable.registerToken(dead)
                let third = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(10))
                #expect(try await durable.wait(for: third.sendID, timeout: .seconds(30)).delivered == 10)
            }
        }
    }

    @Test func idempotencyKeyReturnsTheOriginalSendAndRefusesOtherData() async throws {
        let rig = try await DurableRig.make()
        defer { Task { await rig.shutdown() } }
        try await Self.withSQLite { store in
            let durable = DurableDelivery(router: rig.router, store: store, settings: Self.settings)
            let options = RouterSendOptions(idempotencyKey: "order-42")
            let first = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(3), options: options)
            let again = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(3), options: options)
            #expect(first.created && !again.created && again.sendID == first.sendID)
            do {
                _ = try await durable.enqueue(content: PushContent(title: "other"), to: DurableRig.recipients(3),
                                              options: options)
                Issue.record("the same key with other content must be refused")
            } catch let error as NorqError {
                #expect(error.code == .idempotencyKeyReused)
            }
            do {
                _ = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(4), options: options)
                Issue.record("the same key with other recipients must be refused")
            } catch let error as NorqError {
                #expect(error.code == .idempotencyKeyReused)
            }
            // The message ids derive from the key: the same as a send without a store would use.
            let rows = try await DurableDelivery.rows(of: first.sendID, in: store)
            #expect(rows[0].messageID == RequestID.make(idempotencyKey: "order-42", token: DurableRig.token(0)))
            // Delivered once, and a repeat after delivery still returns the original send and its outcomes.
            try await withWorker(DurableWorker(delivery: durable)) {
                let report = try await durable.wait(for: first.sendID, timeout: .seconds(30))
                #expect(report.delivered == 3)
            }
            let late = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(3), options: options)
            #expect(late.sendID == first.sendID)
            #expect(try await durable.status(of: late.sendID).report.delivered == 3)
            #expect(rig.emulator.requests.count == 3)
        }
    }

    @Test func retriesPersistInTheRowAndSucceed() async throws {
        let flaky = DurableRig.token(1)
        let rig = try await DurableRig.make(faults: .init(failFirstAttempts: [flaky: [.serviceUnavailable, .serviceUnavailable]]))
        defer { Task { await rig.shutdown() } }
        try await Self.withSQLite { store in
            let durable = DurableDelivery(router: rig.router, store: store, settings: Self.settings)
            try await withWorker(DurableWorker(delivery: durable)) {
                let receipt = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(3))
                let report = try await durable.wait(for: receipt.sendID, timeout: .seconds(30))
                #expect(report.delivered == 3)
                let row = try #require(try await DurableDelivery.rows(of: receipt.sendID, in: store).first { $0.identity == flaky })
                #expect(row.attempts == 3)
                #expect(row.state == .delivered)
                // Every attempt carried the same apns-id.
                let ids = rig.emulator.requests.filter { $0.path.hasSuffix(flaky) }.compactMap { $0.header("apns-id") }
                #expect(ids.count == 3 && Set(ids) == [row.messageID])
            }
        }
    }

    @Test func aCrashedWorkersLeasesExpireAndAreResentWithTheSameMessageID() async throws {
        let rig = try await DurableRig.make()
        defer { Task { await rig.shutdown() } }
        try await Self.withSQLite { store in
            let durable = DurableDelivery(router: rig.router, store: store, settings: Self.settings)
            let receipt = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(20),
                                                    options: RouterSendOptions(collapseID: "order-1"))
            // A worker that claims the send's segment (all 20 targets) and dies (never completes them).
            let now = StoreClock.system.nowMillis()
            let lost = try await store.claim(owner: "crashed", limit: 10, now: now, leaseUntil: now + 1_000)
            #expect(lost.count == 20)
            let started = ContinuousClock.now
            try await withWorker(DurableWorker(delivery: durable)) {
                let report = try await durable.wait(for: receipt.sendID, timeout: .seconds(30))
                #expect(report.delivered == 20)
            }
            #expect(ContinuousClock.now - started < .seconds(15), "crash recovery within 15 s")
            let rows = try await DurableDelivery.rows(of: receipt.sendID, in: store)
            let recovered = rows.filter { Set(lost.map(\.id)).contains($0.id) }
            #expect(recovered.count == 20 && recovered.allSatisfy { $0.mayHaveBeenDelivered && $0.attempts == 2 })
            // Each sent once here (the crashed worker sent nothing), with its row's id and the collapse id.
            let requests = rig.emulator.requests
            #expect(requests.count == 20)
            #expect(Set(requests.compactMap { $0.header("apns-id") }) == Set(rows.compactMap(\.messageID)))
            #expect(requests.allSatisfy { request in
                request.headers.contains { $0.name == "apns-collapse-id" && $0.value == "order-1" }
            })
        }
    }

    @Test func gracefulShutdownFinishesInFlightRowsAndLeavesTheRestPending() async throws {
        let rig = try await DurableRig.make(faults: .init(latency: .milliseconds(300)))
        defer { Task { await rig.shutdown() } }
        try await Self.withSQLite { store in
            let durable = DurableDelivery(router: rig.router, store: store, settings: Self.settings)
            let receipt = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(200))
            let worker = DurableWorker(delivery: durable, lanes: 1)
            try await withWorker(worker) {
                // Let the first batch get in flight, then stop.
                while rig.emulator.requests.isEmpty { try await Task.sleep(for: .milliseconds(20)) }
            }
            let counts = try await store.counts()
            #expect(counts[.leased] == nil, "no lease is left behind by a graceful stop")
            let delivered = counts[.delivered] ?? 0
            #expect(delivered >= 1 && delivered + (counts[.pending] ?? 0) == 200)
            #expect(rig.emulator.requests.count == delivered, "every request sent was recorded")
            // Another worker finishes the rest, sending none twice.
            try await withWorker(DurableWorker(delivery: durable)) {
                let report = try await durable.wait(for: receipt.sendID, timeout: .seconds(60))
                #expect(report.delivered == 200)
            }
            let twice = rig.requestsByID().filter { $0.value > 1 }
            #expect(twice.count == 0, "sent twice: \(twice.count)")
        }
    }

    @Test func waitingForASendWithoutWorkersEndsAtItsDeadline() async throws {
        let rig = try await DurableRig.make()
        defer { Task { await rig.shutdown() } }
        try await Self.withSQLite { store in
            let durable = DurableDelivery(router: rig.router, store: store, settings: Self.settings)
            let receipt = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(1))
            do {
                _ = try await durable.wait(for: receipt.sendID, timeout: .milliseconds(200))
                Issue.record("no worker: the wait must end with an error")
            } catch let error as NorqError {
                #expect(error.code == .storeDeadlineExceeded)
            }
            do {
                _ = try await durable.status(of: "no-such-send")
                Issue.record("an unknown send id must throw")
            } catch let error as NorqError {
                #expect(error.code == .storeSendNotFound)
            }
        }
    }
}

@Suite struct DurableStoreFailureTests {
    @Test func aSendThatCannotBeReadFailsItsRowsWithStoreFailed() async throws {
        let rig = try await DurableRig.make()
        defer { Task { await rig.shutdown() } }
        try await DurableDeliveryTests.withSQLite { store in
            let durable = DurableDelivery(router: rig.router, store: store, settings: DurableDeliveryTests.settings)
            let receipt = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(2))
            // Another (broken) writer damaged the stored content; a worker of another instance reads it.
            try await SQLiteTestSupport.execute(path: store.path, "UPDATE norq_sends SET content = 'not json'")
            let otherInstance = DurableDelivery(router: rig.router, store: store, settings: DurableDeliveryTests.settings)
            try await withWorker(DurableWorker(delivery: otherInstance)) {
                let report = try await durable.wait(for: receipt.sendID, timeout: .seconds(30))
                #expect(report.failed == 2)
                for outcome in report.outcomes {
                    guard case .failed(let error) = outcome.result else { continue }
                    #expect(error.code == .storeFailed)
                }
            }
            #expect(rig.emulator.requests.isEmpty, "nothing is sent from content that cannot be read")
        }
    }
}

@Suite struct DurableSendPlanCacheTests {
    /// A worker in the instance that enqueued delivers with the plan it committed, without reading it back.
    @Test func aWorkerOfTheEnqueuingInstanceUsesThePlanItCommitted() async throws {
        let rig = try await DurableRig.make()
        defer { Task { await rig.shutdown() } }
        try await DurableDeliveryTests.withSQLite { store in
            let durable = DurableDelivery(router: rig.router, store: store, settings: DurableDeliveryTests.settings)
            let receipt = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(2))
            #expect(durable.recentPlans.count == 1)
            try await SQLiteTestSupport.execute(path: store.path, "UPDATE norq_sends SET content = 'not json'")
            try await withWorker(DurableWorker(delivery: durable)) {
                let report = try await durable.wait(for: receipt.sendID, timeout: .seconds(30))
                #expect(report.delivered == 2)
            }
            #expect(rig.emulator.requests.count == 2)
        }
    }

    @Test func theCacheKeepsTheNewestPlansWithinItsCapacity() {
        let cache = SendPlanCache(capacity: 2)
        let plan = SendPlan(content: nil, templateName: nil, options: RouterSendOptions())
        cache.insert(plan, for: "a")
        cache.insert(plan, for: "b")
        cache.insert(plan, for: "a")
        cache.insert(plan, for: "c")
        #expect(Set(cache.plans(for: ["a", "b", "c"]).keys) == ["b", "c"], "the oldest insertion leaves first")
        cache.remove("b")
        #expect(Set(cache.plans(for: ["a", "b", "c"]).keys) == ["c"])
        #expect(cache.count == 1)
        let none = SendPlanCache(capacity: 0)
        none.insert(plan, for: "a")
        #expect(none.count == 0)
    }
}

@Suite struct DurableCrashLoopTests {
    @Test func aRowWhoseHoldersKeepLosingTheirLeasesEndsFailedWithoutAnotherAttempt() async throws {
        let rig = try await DurableRig.make(retry: RetryPolicy(retries: 1, backoff: .milliseconds(10)))
        defer { Task { await rig.shutdown() } }
        let store = InMemoryDeliveryStore()
        let durable = DurableDelivery(router: rig.router, store: store, settings: DurableDeliveryTests.settings)
        let receipt = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(1))
        // Five workers claimed it and died (the leases expire at once).
        let now = StoreClock.system.nowMillis()
        for _ in 0..<5 { _ = try await store.claim(owner: "crashed", limit: 1, now: now, leaseUntil: now) }
        try await withWorker(DurableWorker(delivery: durable)) {
            let report = try await durable.wait(for: receipt.sendID, timeout: .seconds(30))
            guard case .failed(let error)? = report.outcomes.first?.result else {
                Issue.record("the row must fail")
                return
            }
            #expect(error.code == .storeAttemptsExhausted)
            #expect(error.possiblyProcessed)
        }
        #expect(rig.emulator.requests.isEmpty)
    }

    /// A worker whose hint stream has ended (another worker consumed it, or the store's listener stopped) keeps
    /// delivering by polling: the end of the hints is not the end of the worker.
    @Test func aWorkerWhoseHintStreamEndedKeepsDelivering() async throws {
        let rig = try await DurableRig.make()
        defer { Task { await rig.shutdown() } }
        try await DurableDeliveryTests.withSQLite { store in
            let durable = DurableDelivery(router: rig.router, store: store, settings: DurableDeliveryTests.settings)
            let (hints, continuation) = AsyncStream.makeStream(of: Void.self)
            continuation.finish()
            let worker = DurableWorker(delivery: durable, hints: hints)
            try await withWorker(worker) {
                // Let the hint reader end first, then enqueue.
                try await Task.sleep(for: .milliseconds(200))
                let receipt = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(5))
                let report = try await durable.wait(for: receipt.sendID, timeout: .seconds(20))
                #expect(report.delivered == 5)
            }
        }
    }
}
