import Synchronization

/// A wake-up hint between tasks of one process: `signal` resumes every waiter; `wait(upTo:)` returns at a signal
/// or after the time given, whichever is first. Waiters are continuations, removed when cancelled.
final class WakeSignal: Sendable {
    private struct State {
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextID: UInt64 = 0
        /// Set by `latch()`: every wait, now and later, returns at once (a stop cannot be missed by a task that
        /// was between checking a flag and starting to wait).
        var latched = false
    }
    private let state = Mutex(State())

    func signal() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Signals and keeps signalled: later waits return at once.
    func latch() {
        state.withLock { $0.latched = true }
        signal()
    }

    /// Returns at a signal (or at once when latched, or when the task is cancelled).
    func wait() async {
        if state.withLock({ $0.latched }) { return }
        await waitForSignal()
    }

    func wait(upTo timeout: Duration) async {
        if state.withLock({ $0.latched }) { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: timeout) }
            group.addTask { await self.waitForSignal() }
            await group.next()
            group.cancelAll()
        }
    }

    private func waitForSignal() async {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let cancelled = state.withLock { state -> Bool in
                    if Task.isCancelled || state.latched { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if cancelled { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }
}
