import Foundation
import NorqCore
import NorqStore
import NorqStoreSQLite
import NorqTesting
import Testing

@testable import Norq

/// A service slower than half the lease (issue 29: every push was sent up to three times and reported failed).
@Suite(.serialized) struct DurableSlowProviderTests {
    @Test func aServiceSlowerThanTheLeaseGetsEachPushOnceAndEveryOneIsDelivered() async throws {
        var faults = APNsEmulator.Faults()
        faults.latency = .milliseconds(1_500)
        let rig = try await DurableRig.make(faults: faults)
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("norq.db").path
        // A lease of 1 s: the answer (1.5 s) outlasts it; the heartbeat must keep it (renewing every third).
        let settings = DeliveryStoreSettings(leaseDuration: .seconds(1), callTimeout: .seconds(5), claimBatchSize: 8,
                                             pollInterval: .milliseconds(50))
        let storeA = try await SQLiteDeliveryStore.open(path: path, settings: settings)
        try await storeA.migrate()
        let storeB = try await SQLiteDeliveryStore.open(path: path, settings: settings)
        let a = DurableDelivery(router: rig.router, store: storeA, settings: settings)
        let b = DurableDelivery(router: rig.router, store: storeB, settings: settings)
        do {
            let receipt = try await a.enqueue(content: DurableRig.content, to: DurableRig.recipients(24),
                                              options: RouterSendOptions(idempotencyKey: "slow-1"))
            // Two workers on one database, as two instances: neither may take the other's rows while they are held.
            let report = try await withWorker(DurableWorker(delivery: a, name: "a")) {
                try await withWorker(DurableWorker(delivery: b, name: "b")) {
                    try await a.wait(for: receipt.sendID, timeout: .seconds(60))
                }
            }
            #expect(report.delivered == 24, "\(report.outcomes.filter { $0.result.kind != "delivered" })")
            #expect(report.failed == 0)
            #expect(report.mayHaveBeenDelivered == 0)
            let perID = rig.requestsByID()
            #expect(perID.count == 24)
            #expect(perID.values.allSatisfy { $0 == 1 }, "requests per apns-id: \(perID.values.sorted())")
        } catch {
            Issue.record("\(error)")
        }
        await storeA.close()
        await storeB.close()
        await rig.shutdown()
    }
}

@Suite struct CheckpointRuleTests {
    @Test func aFastBatchIsRecordedOnceAtItsEnd() {
        let rule = CheckpointRule(batchSize: 500)
        // 499 of 500 done within the wait: not yet (the last completion ends the batch and records it all).
        #expect(!rule.isDue(waiting: 499, oldestWaited: .milliseconds(10)))
        #expect(rule.isDue(waiting: 500, oldestWaited: .zero))
    }

    @Test func aSlowBatchRecordsWhatFinishedEveryMaximumWait() {
        let rule = CheckpointRule(batchSize: 500, maximumWait: .milliseconds(250))
        #expect(!rule.isDue(waiting: 3, oldestWaited: .milliseconds(249)))
        #expect(rule.isDue(waiting: 3, oldestWaited: .milliseconds(250)))
        #expect(!rule.isDue(waiting: 0, oldestWaited: .seconds(10)))
    }

    @Test func aHugeBatchRecordsEveryThousand() {
        let rule = CheckpointRule(batchSize: 50_000)
        #expect(rule.minimumCompletions == 1_000)
        #expect(rule.isDue(waiting: 1_000, oldestWaited: .zero))
        #expect(CheckpointRule(batchSize: 0).minimumCompletions == 1)
    }
}
