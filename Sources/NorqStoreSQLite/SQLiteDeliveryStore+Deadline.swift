import NIOCore
import NorqCore
import NorqStore

extension SQLiteDeliveryStore {
    /// `withStoreDeadline` with the deadline as a timer of the connection's event loop instead of a sleeping task:
    /// every call of the hot path (a claim, a completion) starts and cancels one, and a loop timer costs no task, no
    /// job on the cooperative pool and no dispatch timer. Same contract: at `timeout` (or when the caller is
    /// cancelled) `store/deadline-exceeded` is thrown naming `what` and the operation, which runs in a task of its
    /// own on `executor`, is cancelled and abandoned; errors that are not `NorqError` are mapped by `mapError`.
    static func withDeadline<T: Sendable>(
        _ timeout: Duration, _ what: @autoclosure @escaping @Sendable () -> String, on eventLoop: any EventLoop,
        executor: EventLoopTaskExecutor, mapError: @escaping @Sendable (any Error) -> NorqError,
        _ operation: @escaping @Sendable () async throws -> T
    ) async throws(NorqError) -> T {
        // The first of the operation, the timer and the caller's cancellation completes the promise; a later
        // completion of a completed promise is ignored.
        let promise = eventLoop.makePromise(of: T.self)
        let timer = eventLoop.scheduleTask(in: .milliseconds(max(1, timeout.wholeMilliseconds))) {
            promise.fail(NorqError(.storeDeadlineExceeded, "\(what()) did not finish within \(timeout)"))
        }
        // The operation's task runs on the loop and cancels the timer there: from another thread, a cancel costs
        // the loop one more wake-up per call.
        let operationTask = Task(executorPreference: executor) {
            let result: Result<T, any Error>
            do { result = .success(try await operation()) } catch { result = .failure(error) }
            timer.cancel()
            promise.completeWith(result)
        }
        let result: Result<T, any Error>
        do {
            result = .success(try await withTaskCancellationHandler {
                try await promise.futureResult.get()
            } onCancel: {
                promise.fail(NorqError(.storeDeadlineExceeded, "\(what()) was cancelled"))
            })
        } catch {
            result = .failure(error)
            timer.cancel()
            operationTask.cancel()
        }
        return try storeDeadlineValue(result, what(), mapError: mapError)
    }
}
