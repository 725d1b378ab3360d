public import NorqCore
import DequeModule
import Synchronization

/// The outcomes of a streaming send, in completion order, with back-pressure: when the consumer falls
/// `capacity` outcomes behind, the send waits for it instead of buffering without bound, until the consumer has
/// caught up to half of that (a high and a low watermark, as NIO's `NIOAsyncSequenceProducer` has). A slow
/// consumer therefore slows the send down; it never makes the process hold a million outcomes.
///
/// Ending the iteration early (leaving the `for await` loop, or dropping the stream unread) or cancelling
/// the consuming task cancels the rest of the send, like `AsyncStream`'s termination.
public struct PushOutcomeStream: AsyncSequence, Sendable {
    public typealias Element = PushOutcome
    public typealias Failure = Never

    let storage: Storage
    /// Ends the send when both this value and every iterator made from it are gone.
    private let consumer: Consumer

    init(capacity: Int) {
        storage = Storage(capacity: capacity)
        consumer = Consumer(storage: storage)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Failure = Never
        let storage: Storage
        let consumer: Consumer

        public mutating func next() async -> PushOutcome? {
            await storage.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(storage: storage, consumer: consumer)
    }

    /// Ends the consumer side when the last value that can read the stream goes away.
    final class Consumer: Sendable {
        let storage: Storage
        init(storage: Storage) { self.storage = storage }
        deinit { storage.terminate() }
    }

    /// The buffer between the send's producers (its delivery pumps) and the one consumer.
    final class Storage: OutcomeSink {
        private struct State {
            var buffer = Deque<PushOutcome>()
            var consumer: CheckedContinuation<PushOutcome?, Never>?
            /// Producers waiting for room (called once the buffer drained to `resumeAt`, or the stream ended).
            var roomWaiters: [@Sendable () -> Void] = []
            var finished = false
            var terminated = false
            var onTermination: (@Sendable () -> Void)?
            /// The buffer reached `capacity` and has not drained to `resumeAt` since: producers wait.
            var full = false
        }

        let capacity: Int
        /// The low watermark: a full buffer takes producers again once the consumer has taken it down to this.
        /// Without it, a full buffer woke its producers for every outcome the consumer took and stopped them at the
        /// next one: a wake-up, a refill of one slot and a new wait per outcome, on the consumer's thread.
        let resumeAt: Int
        private let state = Mutex(State())
        /// `hasRoom`, stored by every change of the state (under its lock) and read without the lock: producers
        /// ask before each target they start, and taking the lock for it, against the consumer taking it per
        /// outcome and the other event loop's producers, was most of the lock's contention (futex calls) at 4x250.
        private let room = Atomic<Bool>(true)

        init(capacity: Int) {
            self.capacity = Swift.max(1, capacity)
            self.resumeAt = self.capacity / 2
        }

        /// Called once, when the consumer goes away or is cancelled: the send is cancelled.
        func setOnTermination(_ handler: @escaping @Sendable () -> Void) {
            let runNow = state.withLock { state -> Bool in
                if state.terminated { return true }
                state.onTermination = handler
                return false
            }
            if runNow { handler() }
        }

        /// Hands `outcome` to the consumer, or buffers it (producers ask `hasRoom` before starting more work,
        /// so the buffer exceeds `capacity` by at most what was in flight). After the consumer went away,
        /// outcomes are dropped (the send is being cancelled).
        func emit(_ position: Int, _ outcome: consuming PushOutcome) {
            var moving: PushOutcome? = outcome  // moved into the buffer below, not copied
            let consumer = state.withLock { state -> CheckedContinuation<PushOutcome?, Never>? in
                if state.terminated || state.finished { return nil }
                if let consumer = state.consumer {
                    state.consumer = nil
                    return consumer
                }
                state.buffer.append(moving.take()!)
                updateRoom(&state)
                return nil
            }
            // A waiting consumer is woken once per completion batch (the answers of one read), not per outcome:
            // the outcomes after this one go to the buffer, where it finds them.
            if let consumer, let outcome = moving.take() {
                CompletionBatch.afterBatch { consumer.resume(returning: outcome) }
            }
        }

        var hasRoom: Bool {
            room.load(ordering: .relaxed)
        }

        /// Called under the lock after the buffer or the end flags changed: latches `full` at `capacity`,
        /// releases it at `resumeAt`.
        private func updateRoom(_ state: inout State) {
            if state.buffer.count >= capacity {
                state.full = true
            } else if state.buffer.count <= resumeAt {
                state.full = false
            }
            room.store(!state.full || state.terminated || state.finished, ordering: .relaxed)
        }

        /// The next buffered outcome, and the producers to wake when taking it released the buffer.
        private func take(_ state: inout State) -> (PushOutcome, [@Sendable () -> Void])? {
            guard let outcome = state.buffer.popFirst() else { return nil }
            updateRoom(&state)
            guard !state.full, !state.roomWaiters.isEmpty else { return (outcome, []) }
            let waiters = state.roomWaiters
            state.roomWaiters.removeAll()
            return (outcome, waiters)
        }

        func waitForRoom(_ resume: @escaping @Sendable () -> Void) -> Bool {
            state.withLock { state in
                if !state.full || state.terminated || state.finished { return true }
                state.roomWaiters.append(resume)
                return false
            }
        }

        /// No more outcomes: the consumer gets what is buffered, then nil.
        func finish() {
            let (consumer, waiters) = state.withLock { state in
                state.finished = true
                updateRoom(&state)
                let consumer = state.consumer
                state.consumer = nil
                let waiters = state.roomWaiters
                state.roomWaiters.removeAll()
                return (consumer, waiters)
            }
            consumer?.resume(returning: nil)
            for resume in waiters { resume() }
        }

        func next() async -> PushOutcome? {
            enum Action {
                case value(PushOutcome, [@Sendable () -> Void])
                case end
                case wait
            }
            let action = state.withLock { state -> Action in
                if let (outcome, waiters) = take(&state) { return .value(outcome, waiters) }
                if state.finished || state.terminated { return .end }
                return .wait
            }
            switch action {
            case .value(let outcome, let waiters):
                for resume in waiters { resume() }
                return outcome
            case .end:
                return nil
            case .wait:
                return await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<PushOutcome?, Never>) in
                        var waiters: [@Sendable () -> Void] = []
                        let immediate = state.withLock { state -> PushOutcome?? in
                            if let (outcome, wake) = take(&state) {
                                waiters = wake
                                return .some(outcome)
                            }
                            if state.finished || state.terminated { return .some(nil) }
                            state.consumer = continuation
                            return nil
                        }
                        for resume in waiters { resume() }
                        if let immediate { continuation.resume(returning: immediate) }
                    }
                } onCancel: {
                    terminate()
                }
            }
        }

        /// The consumer went away or was cancelled: wake everyone, drop what is buffered, cancel the send.
        func terminate() {
            let (consumer, producers, handler) = state.withLock { state in
                if state.terminated {
                    return (CheckedContinuation<PushOutcome?, Never>?.none,
                            [@Sendable () -> Void](), (@Sendable () -> Void)?.none)
                }
                state.terminated = true
                let consumer = state.consumer
                state.consumer = nil
                let producers = state.roomWaiters
                state.roomWaiters.removeAll()
                state.buffer.removeAll()
                updateRoom(&state)
                let handler = state.onTermination
                state.onTermination = nil
                return (consumer, producers, handler)
            }
            // Cancel first, so that the woken producers see the cancellation and start nothing new.
            handler?()
            consumer?.resume(returning: nil)
            for resume in producers { resume() }
        }
    }
}
