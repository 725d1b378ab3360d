public import NorqCore
import DequeModule
import Synchronization

/// The outcomes of a streaming send, in completion order, with back-pressure: when the consumer falls
/// `capacity` outcomes behind, the send waits for it instead of buffering without bound. A slow consumer
/// therefore slows the send down; it never makes the process hold a million outcomes.
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

    /// The buffer between the send's workers (many producers) and the one consumer.
    final class Storage: Sendable {
        private struct State {
            var buffer = Deque<PushOutcome>()
            var consumer: CheckedContinuation<PushOutcome?, Never>?
            /// Producers waiting for room, each with the outcome it could not hand over yet.
            var waiting = Deque<(PushOutcome, CheckedContinuation<Void, Never>)>()
            var finished = false
            var terminated = false
            var onTermination: (@Sendable () -> Void)?
        }

        let capacity: Int
        private let state = Mutex(State())

        init(capacity: Int) {
            self.capacity = Swift.max(1, capacity)
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

        /// Hands `outcome` to the consumer; waits while `capacity` outcomes are already waiting for it.
        /// After the consumer went away, outcomes are dropped (the send is being cancelled).
        func send(_ outcome: PushOutcome) async {
            enum Action {
                case done
                case resume(CheckedContinuation<PushOutcome?, Never>)
                case wait
            }
            let action = state.withLock { state -> Action in
                if state.terminated || state.finished { return .done }
                if let consumer = state.consumer {
                    state.consumer = nil
                    return .resume(consumer)
                }
                if state.buffer.count < capacity {
                    state.buffer.append(outcome)
                    return .done
                }
                return .wait
            }
            switch action {
            case .done:
                return
            case .resume(let consumer):
                consumer.resume(returning: outcome)
            case .wait:
                // The outcome goes into the buffer when the consumer makes room (see `next`).
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let admitted = state.withLock { state -> Bool in
                        if state.terminated || state.finished { return true }
                        if state.buffer.count < capacity {
                            state.buffer.append(outcome)
                            return true
                        }
                        state.waiting.append((outcome, continuation))
                        return false
                    }
                    if admitted { continuation.resume() }
                }
            }
        }

        /// No more outcomes: the consumer gets what is buffered, then nil.
        func finish() {
            let consumer = state.withLock { state -> CheckedContinuation<PushOutcome?, Never>? in
                state.finished = true
                let consumer = state.consumer
                state.consumer = nil
                return consumer
            }
            consumer?.resume(returning: nil)
        }

        func next() async -> PushOutcome? {
            enum Action {
                case value(PushOutcome, CheckedContinuation<Void, Never>?)
                case end
                case wait
            }
            let action = state.withLock { state -> Action in
                if let outcome = state.buffer.popFirst() {
                    // Room for one waiting producer's outcome.
                    if let (waitingOutcome, producer) = state.waiting.popFirst() {
                        state.buffer.append(waitingOutcome)
                        return .value(outcome, producer)
                    }
                    return .value(outcome, nil)
                }
                if state.finished || state.terminated { return .end }
                return .wait
            }
            switch action {
            case .value(let outcome, let producer):
                producer?.resume()
                return outcome
            case .end:
                return nil
            case .wait:
                return await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<PushOutcome?, Never>) in
                        let immediate = state.withLock { state -> PushOutcome?? in
                            if let outcome = state.buffer.popFirst() { return .some(outcome) }
                            if state.finished || state.terminated { return .some(nil) }
                            state.consumer = continuation
                            return nil
                        }
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
                            [CheckedContinuation<Void, Never>](), (@Sendable () -> Void)?.none)
                }
                state.terminated = true
                let consumer = state.consumer
                state.consumer = nil
                let producers = state.waiting.map(\.1)
                state.waiting.removeAll()
                state.buffer.removeAll()
                let handler = state.onTermination
                state.onTermination = nil
                return (consumer, producers, handler)
            }
            consumer?.resume(returning: nil)
            for producer in producers { producer.resume() }
            handler?()
        }
    }
}
