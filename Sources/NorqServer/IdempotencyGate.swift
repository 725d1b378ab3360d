import Synchronization

/// The `Idempotency-Key`s being accepted right now in this process: a second request with a key in the set is
/// `server/idempotency-in-progress` (409). Bounded by the requests in flight (each removes its key when done).
/// Across instances the store itself decides (the second enqueue returns the first send).
package final class IdempotencyGate: Sendable {
    private let inFlight = Mutex<Set<String>>([])

    package init() {}

    /// True when `key` was free and is now held by the caller, who must `release` it.
    package func acquire(_ key: String) -> Bool {
        inFlight.withLock { $0.insert(key).inserted }
    }

    package func release(_ key: String) {
        _ = inFlight.withLock { $0.remove(key) }
    }
}
