import Metrics
import NorqCore
import NorqStore
import Synchronization

/// The store's health as a background check sees it, so that `/readyz` and `/metrics` answer from memory at once
/// whatever the database does. `NorqServer.run()` runs ``run(store:interval:)`` in its own task group: the check
/// ends with the server.
///
/// Each round reads one primary key (the readiness probe) and then the queue depth, each within the store's own
/// call deadline. The store counts as down when the last probe failed, or when a probe has been waiting for longer
/// than `stallAfter` (a database that accepts connections but never answers).
final class StoreHealth: Sendable {
    /// What the last rounds found.
    struct State: Sendable {
        /// When the last probe answered.
        var lastAnswer: ContinuousClock.Instant?
        /// Why the last probe failed (an error code and message, no secret), nil when it answered.
        var failure: String?
        /// When the probe now waiting started; nil when none is waiting.
        var probing: ContinuousClock.Instant?
        /// The last queue depth read, and when.
        var depth: QueueDepth?
        var depthReadAt: ContinuousClock.Instant?
    }

    /// A send id that never exists (ids are random or time-ordered UUIDs, never the nil UUID).
    static let probeID = "00000000-0000-0000-0000-000000000000"

    let state = Mutex(State())
    /// A probe waiting for longer than this makes the store count as down.
    let stallAfter: Duration

    init(stallAfter: Duration = .seconds(2)) {
        self.stallAfter = stallAfter
    }

    /// Why the store is not ready, or nil when its last probe answered and none is stalled.
    func unavailable(now: ContinuousClock.Instant = .now) -> String? {
        let state = self.state.withLock { $0 }
        if let probing = state.probing, now - probing > stallAfter {
            return "the store has not answered for \(Self.seconds(now - probing)) s"
        }
        if let failure = state.failure { return "the store does not answer: \(failure)" }
        if state.lastAnswer == nil { return "the store has not been checked yet" }
        return nil
    }

    /// The last queue depth read and its age, or nil before the first read.
    func lastDepth(now: ContinuousClock.Instant = .now) -> (depth: QueueDepth, age: Duration)? {
        state.withLock { state in
            guard let depth = state.depth, let at = state.depthReadAt else { return nil }
            return (depth, now - at)
        }
    }

    /// One round: the probe, then (when it answered) the queue depth.
    func check(_ store: any DeliveryStore) async {
        state.withLock { $0.probing = .now }
        do {
            _ = try await store.send(id: Self.probeID)
            state.withLock {
                $0.probing = nil
                $0.lastAnswer = .now
                $0.failure = nil
            }
        } catch {
            state.withLock {
                $0.probing = nil
                $0.failure = "\(error.code): \(error.message.prefix(200))"
            }
            Counter(label: "norq_outbox_depth_read_failures_total").increment()
            return
        }
        do {
            let depth = try await store.queueDepth(now: StoreClock.system.nowMillis())
            for (label, rows) in depth.byLabel {
                Gauge(label: "norq_outbox_rows", dimensions: [("state", label)]).record(rows)
            }
            state.withLock {
                $0.depth = depth
                $0.depthReadAt = .now
            }
        } catch {
            Counter(label: "norq_outbox_depth_read_failures_total").increment()
        }
    }

    /// Checks every `interval` until cancelled.
    func run(store: any DeliveryStore, interval: Duration) async {
        while !Task.isCancelled {
            await check(store)
            try? await Task.sleep(for: interval)
        }
    }

    static func seconds(_ duration: Duration) -> String {
        let millis = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        return "\(millis / 1000).\(millis % 1000 / 100)"
    }
}
