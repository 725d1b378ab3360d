import NorqCore
import NorqStore
import Testing

extension StoreConformance {
    /// `queueDepth(now:)` counts the hot outbox only, each row in exactly one group at `now`: due, scheduled (a
    /// retry's backoff), leased (a live lease), lease-expired, awaiting a receipt; finished rows (history) never.
    static func queueDepth(_ store: any DeliveryStore) async throws {
        #expect(try await store.queueDepth(now: 0) == QueueDepth())
        // History: a send finished at enqueue (routing decided it) and one delivered and finished.
        var routed = send(tokens: ["x"])
        routed.targets[0].outcome = StoredOutcome(state: .failed, code: "routing/no-provider")
        _ = try await store.enqueue(routed, now: 0, idempotencyWindow: window)
        _ = try await store.enqueue(send(tokens: ["done"]), now: 0, idempotencyWindow: window)
        let done = try await store.claim(owner: "w", limit: 10, now: 0, leaseUntil: 100)
        _ = try await store.complete(done.map { .finish($0.lease!, StoredOutcome(state: .delivered, status: 200)) }, now: 1)
        #expect(try await store.queueDepth(now: 1_000) == QueueDepth(), "history is never counted")

        // Two sends of two targets: two segments (a claim takes whole segments).
        _ = try await store.enqueue(send(tokens: ["a", "b"]), now: 1_000, idempotencyWindow: window)
        _ = try await store.enqueue(send(tokens: ["c", "d"]), now: 1_000, idempotencyWindow: window)
        #expect(try await store.queueDepth(now: 999) == QueueDepth(scheduled: 4), "not yet due")
        #expect(try await store.queueDepth(now: 1_000) == QueueDepth(due: 4))
        let claimed = try await store.claim(owner: "w", limit: 2, now: 1_000, leaseUntil: 5_000)
        #expect(claimed.count == 2)
        #expect(try await store.queueDepth(now: 1_000) == QueueDepth(due: 2, leased: 2))
        let last = StoredOutcome(state: .rejected, status: 503, classification: "retryable")
        _ = try await store.complete([.retry(claimed[0].lease!, at: 9_000, last: last)], now: 1_100)
        #expect(try await store.queueDepth(now: 1_100) == QueueDepth(due: 2, scheduled: 1, leased: 1))
        // The worker holding the other row stalls past its lease; later the retry comes due.
        #expect(try await store.queueDepth(now: 5_000) == QueueDepth(due: 2, scheduled: 1, leaseExpired: 1))
        let depth = try await store.queueDepth(now: 9_000)
        #expect(depth == QueueDepth(due: 3, leaseExpired: 1))
        #expect(depth.total == 4)
        // Every claimable row is due or lease-expired: a claim at that time takes exactly those.
        #expect(try await store.claim(owner: "w2", limit: 10, now: 9_000, leaseUntil: 20_000).count
                == depth.due + depth.leaseExpired)
        #expect(try await store.queueDepth(now: 9_000) == QueueDepth(leased: 4))

        // A target the service accepted (an Expo ticket) waits for its receipt in a receipt segment: counted as
        // awaiting its receipt, neither scheduled nor (once its poll is due) due.
        _ = try await store.enqueue(send(tokens: ["e"]), now: 9_000, idempotencyWindow: window)
        let ticketed = try await store.claim(owner: "w3", limit: 10, now: 9_000, leaseUntil: 20_000)
        #expect(ticketed.count == 1)
        let accepted = StoredOutcome(state: .delivered, status: 200,
                                     classification: StoredOutcome.acceptedClassification, messageID: "ticket-1")
        _ = try await store.complete([.retry(ticketed[0].lease!, at: 15_000, last: accepted)], now: 9_100)
        #expect(try await store.queueDepth(now: 9_100) == QueueDepth(leased: 4, awaitingReceipts: 1))
        let polled = try await store.queueDepth(now: 15_000)
        #expect(polled == QueueDepth(leased: 4, awaitingReceipts: 1), "a due poll is not a push waiting to be sent")
        #expect(polled.total == 5)
        #expect(polled.byLabel.map(\.label) == ["due", "scheduled", "leased", "lease-expired", "awaiting-receipt"])
    }
}
