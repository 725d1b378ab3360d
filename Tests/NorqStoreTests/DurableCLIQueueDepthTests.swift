import Foundation
import NorqCore
import NorqStore
import NorqStoreSQLite
import Testing

/// `norq status` without a send id: the store's queue depth (hot outbox only), as text and JSON.
@Suite(.serialized) struct DurableCLIQueueDepthTests {
    @Test func statusWithoutASendIDPrintsTheQueueDepth() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let db = directory.appendingPathComponent("norq.db").path
        let store = try await SQLiteDeliveryStore.open(path: db)
        try await store.migrate()
        let now = StoreClock.system.nowMillis()
        // Two sends of two targets: two segments (a claim takes whole segments).
        _ = try await store.enqueue(StoreConformance.send(tokens: ["a", "b"]), now: now,
                                    idempotencyWindow: StoreConformance.window)
        _ = try await store.enqueue(StoreConformance.send(tokens: ["c", "d"]), now: now,
                                    idempotencyWindow: StoreConformance.window)
        // One row retried an hour from now, one held under a long lease, two due; and a finished send (history).
        let claimed = try await store.claim(owner: "w", limit: 2, now: now, leaseUntil: now + 3_600_000)
        _ = try await store.complete([.retry(claimed[0].lease!, at: now + 3_600_000,
                                             last: StoredOutcome(state: .rejected, status: 503))], now: now)
        var finished = StoreConformance.send(tokens: ["x"])
        finished.targets[0].outcome = StoredOutcome(state: .failed, code: "routing/no-provider")
        _ = try await store.enqueue(finished, now: now, idempotencyWindow: StoreConformance.window)
        await store.close()

        let text = try DurableCLITests.norq(["status", "--store", db])
        #expect(text.status == 0, "\(text)")
        #expect(text.out.contains("queue: 4 rows waiting or in flight: 2 due, 1 scheduled, 1 leased, 0 lease-expired"),
                "\(text.out)")
        let json = try DurableCLITests.norq(["status", "--store", db, "--json"])
        #expect(json.status == 0, "\(json)")
        let queue = try JSONValue(parsing: Array(json.out.utf8))["queue"]
        #expect(queue?["due"] == .int(2) && queue?["scheduled"] == .int(1) && queue?["leased"] == .int(1)
                && queue?["lease-expired"] == .int(0) && queue?["total"] == .int(4), "\(json.out)")
    }
}
