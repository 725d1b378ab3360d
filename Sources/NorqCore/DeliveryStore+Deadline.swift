import Synchronization

/// Runs `operation` with a deadline: when `timeout` passes first, the operation is cancelled and
/// `store/deadline-exceeded` is thrown naming `what`. Errors that are not `NorqError` are mapped by `mapError`.
/// Store implementations wrap every database call in it.
package func withStoreDeadline<T: Sendable>(
    _ timeout: Duration, _ what: String,
    mapError: @escaping @Sendable (any Error) -> NorqError,
    _ operation: @escaping @Sendable () async throws -> T
) async throws(NorqError) -> T {
    do {
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await operation() }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else {
                throw NorqError(.storeDeadlineExceeded, "\(what) did not finish within \(timeout)")
            }
            return value
        }
    } catch let error as NorqError {
        throw error
    } catch is CancellationError {
        throw NorqError(.storeDeadlineExceeded, "\(what) was cancelled")
    } catch {
        throw mapError(error)
    }
}

/// A lock for async code that is held across suspension points (a database connection's transaction), with FIFO
/// waiters; a cancelled waiter leaves the queue at once and throws `CancellationError`.
package final class AsyncExclusiveLock: Sendable {
    private struct State {
        var held = false
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
        var nextID: UInt64 = 0
    }
    private let state = Mutex(State())

    package init() {}

    /// Runs `body` while holding the lock.
    package func withLock<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        try await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let action = state.withLock { state -> Bool? in
                    if Task.isCancelled { return false }
                    if !state.held {
                        state.held = true
                        return true
                    }
                    state.waiters.append((id, continuation))
                    return nil
                }
                switch action {
                case true?: continuation.resume()
                case false?: continuation.resume(throwing: CancellationError())
                case nil: break
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            if state.waiters.isEmpty {
                state.held = false
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        next?.resume()
    }
}
