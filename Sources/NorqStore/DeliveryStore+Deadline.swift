package import NorqCore
import Synchronization

/// Runs `operation` with a deadline: when `timeout` passes first, `store/deadline-exceeded` is thrown naming `what`
/// and the operation is cancelled and abandoned. Errors that are not `NorqError` are mapped by `mapError`. Store
/// implementations wrap every database call in it.
///
/// The operation runs in a task of its own (cancelled at the deadline or when the caller is cancelled) rather than
/// in a child task: a database driver call that ignores cancellation (a query written to a connection that stopped
/// answering) must not hold the caller past its deadline, and a task group would wait for it.
package func withStoreDeadline<T: Sendable>(
    _ timeout: Duration, _ what: String, executor: (any TaskExecutor)? = nil,
    mapError: @escaping @Sendable (any Error) -> NorqError,
    _ operation: @escaping @Sendable () async throws -> T
) async throws(NorqError) -> T {
    let gate = DeadlineGate<T>()
    // `executor`: where the operation's jobs run (a store whose driver answers on one thread resumes there
    // without another thread hop).
    let operationTask = Task(executorPreference: executor) {
        do { gate.finish(.success(try await operation())) } catch { gate.finish(.failure(error)) }
    }
    let timer = Task {
        do { try await Task.sleep(for: timeout) } catch { return }
        gate.finish(.failure(NorqError(.storeDeadlineExceeded, "\(what) did not finish within \(timeout)")))
    }
    let result = await withTaskCancellationHandler {
        await gate.wait()
    } onCancel: {
        gate.finish(.failure(NorqError(.storeDeadlineExceeded, "\(what) was cancelled")))
    }
    operationTask.cancel()
    timer.cancel()
    return try storeDeadlineValue(result, what, mapError: mapError)
}

/// The value of a deadline race's result, or its error as a `NorqError`: a cancellation is
/// `store/deadline-exceeded` naming `what`, any other error that is not a `NorqError` goes through `mapError`.
package func storeDeadlineValue<T>(_ result: Result<T, any Error>, _ what: @autoclosure () -> String,
                                   mapError: (any Error) -> NorqError) throws(NorqError) -> T {
    switch result {
    case .success(let value):
        return value
    case .failure(let error as NorqError):
        throw error
    case .failure(is CancellationError):
        throw NorqError(.storeDeadlineExceeded, "\(what()) was cancelled")
    case .failure(let error):
        throw mapError(error)
    }
}

/// The first result of a deadline race: later ones are dropped.
final class DeadlineGate<T: Sendable>: Sendable {
    private struct State {
        var result: Result<T, any Error>?
        var waiter: CheckedContinuation<Result<T, any Error>, Never>?
    }
    private let state = Mutex(State())

    func finish(_ result: Result<T, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<Result<T, any Error>, Never>? in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: result)
    }

    func wait() async -> Result<T, any Error> {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Result<T, any Error>? in
                if let result = state.result { return result }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
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
