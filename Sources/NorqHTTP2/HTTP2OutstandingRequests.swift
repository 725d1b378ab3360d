import Synchronization

/// The count of a pool's requests accepted and not yet complete, and the wait for it to reach zero at shutdown.
/// What a request holds of its pool (it is told when the request completes), so that a request never references the
/// pool itself: the pool owns it, as it owns its connections; requests and connections report back through it and
/// ``HTTP2ConnectionDelegate``.
final class HTTP2OutstandingRequests: Sendable {
    private let count = Atomic<Int>(0)
    private let shuttingDown = Atomic<Bool>(false)
    private let drained = Mutex<CheckedContinuation<Void, Never>?>(nil)

    init() {}

    /// Shutdown began: no request is accepted any more (the pool's check).
    var isShuttingDown: Bool { shuttingDown.load(ordering: .relaxed) }

    /// A request was accepted.
    func started() {
        count.add(1, ordering: .relaxed)
    }

    /// A request completed (called once per request, by the request).
    func finished() {
        let left = count.subtract(1, ordering: .sequentiallyConsistent).newValue
        if left == 0, shuttingDown.load(ordering: .sequentiallyConsistent) {
            drained.withLock { $0.take() }?.resume()
        }
    }

    /// Marks the shutdown (``isShuttingDown``) before the pool fails what waits.
    func beginShutdown() {
        shuttingDown.store(true, ordering: .sequentiallyConsistent)
    }

    /// Returns once every accepted request completed (each ends by its deadline at the latest).
    func waitUntilDrained() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            drained.withLock { $0 = continuation }
            if count.load(ordering: .sequentiallyConsistent) == 0 {
                drained.withLock { $0.take() }?.resume()
            }
        }
    }
}
