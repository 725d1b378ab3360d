import DequeModule
import NorqCore
import NorqStore
import Synchronization
import Tracing

extension DurableWorker {
    /// A row of the lane's queue: the durable worker's (``LaneRow``), or a test's.
    protocol LaneItem: Sendable {
        /// The batch the row was claimed in (its completion goes there).
        var batch: AttemptBatch { get }
    }

    /// A claimed row to start.
    struct LaneRow: LaneItem {
        let row: OutboxRow
        let lease: Lease
        let plan: SendPlan
        /// The batch the row was claimed in (its completion goes there).
        let batch: AttemptBatch
        /// The batch's leases: a row whose lease expired or was taken over while it waited is not started.
        let leases: HeldLeases
        let router: NotificationRouter
        /// The provider's request grouper when it sends many targets per request (Expo), nil otherwise.
        let batcher: RequestBatcher?
        /// The parent of the row's attempts (the `norq.claim` span of its send; nil when not traced).
        var trace: DeliveryTracing.Parent? = nil
    }

    /// The durable worker's lane feeder.
    typealias Feeder = LaneFeeder<LaneRow>

    /// What a caller does outside the feeder's lock after taking (or failing to take) a row.
    enum LaneSignal: Sendable {
        /// Nothing.
        case none
        /// The lane nears its unrecorded bound: its batches write their completions now.
        case flush([AttemptBatch])
    }

    /// A lane's rows not started yet, from one or more claimed batches, and how many more may start (stop 34).
    ///
    /// - **The window** (`attemptWindow`, `maxInFlight / lanes`): at most that many of the lane's attempts are in
    ///   flight. The lane owes the first `window` starts, and each attempt that ends owes one more, from its
    ///   completion, on whatever thread answered it (for HTTP/2 providers the connection's event loop, where the next
    ///   request is written without a hop, as `DeliveryPump` does). The window carries over from one batch to the
    ///   next: a start owed while the current batch has no row left goes to the next batch's first row, so the lane
    ///   does not empty and refill its window at every claim (the claim's round trip and the last answers of a batch
    ///   overlap with the next batch's first requests). The lane claims its next batch when at most ``lowMark`` rows
    ///   are queued (``waitUntilLow()``).
    /// - **The unrecorded bound** (`claimBatchSize`): at most that many of the lane's rows are taken (started, or
    ///   ended at once) without their completion written to the store. A crash re-sends only such rows, so it
    ///   re-sends at most `claimBatchSize` rows per lane, as when a lane held one batch at a time. A start that would
    ///   pass the bound waits for a checkpoint (``recorded(_:)``). So that starts rarely wait, the lane's batches are
    ///   asked to write their completions (``LaneSignal/flush(_:)``, once per checkpoint) as soon as the rows taken
    ///   and not recorded reach ``flushAt`` (the bound less half a window: the write has half a window's answers of
    ///   time before a start would wait), so a lane writes about once per `claimBatchSize - window` answers (with
    ///   the defaults and 4 lanes, 1,000 and 250: about once per 600-700 answers, and when a batch's last answer
    ///   comes).
    ///
    /// One caller at a time drains what is owed; a call made meanwhile (another loop, or an attempt that failed at
    /// once inside the drain's own `start`) only adds to the debt, so starts never recurse, however many fail
    /// synchronously. Bounded: the queue holds at most ``lowMark`` rows plus one claim (`claimBatchSize` rows).
    final class LaneFeeder<Item: LaneItem>: Sendable {
        typealias Signal = LaneSignal
        private struct State {
            var queue = Deque<Item>()
            /// Attempts that may start now.
            var owed: Int
            var draining = false
            /// Rows claimed by the lane whose completion is not written yet (queued ones included).
            var held = 0
            /// `flush` was signalled since the last checkpoint (it is not repeated until one is written).
            var flushSent = false
            /// The lane's batches whose completions are not all written.
            var batches: [ObjectIdentifier: AttemptBatch] = [:]
            /// The lane waiting for the queue to run low (`waitUntilLow`).
            var lane: CheckedContinuation<Void, Never>?

            /// Rows taken and not recorded: started, or ended at once.
            var unrecorded: Int { held - queue.count }
        }

        private let state: Mutex<State>
        /// The queue is low (the lane claims its next batch) at this many rows or fewer.
        let lowMark: Int
        /// At most this many rows are taken and not recorded (`claimBatchSize`).
        let unrecordedLimit: Int
        /// The lane's batches are asked to write their completions when this many rows are taken and not recorded.
        let flushAt: Int

        /// `window` is at most `unrecordedLimit` (no more can be in flight).
        init(window: Int, unrecordedLimit: Int) {
            let limit = max(1, unrecordedLimit)
            let window = min(max(1, window), limit)
            state = Mutex(State(owed: window))
            lowMark = window / 2
            self.unrecordedLimit = limit
            flushAt = max(limit - window / 2, limit / 2, 1)
        }

        /// Rows held by the lane whose completion is not written yet.
        var held: Int { state.withLock { $0.held } }

        /// Adds a claimed batch: `held` rows (every row with a lease: all of them get a completion, sent or not), of
        /// which `items` are to be started in order. Returns the first row for the caller to start when it is to
        /// drain what is owed (no one else is), nil otherwise, and what to signal.
        func append(_ items: [Item], held: Int, batch: AttemptBatch) -> (Item?, Signal) {
            let (item, signal, low) = state.withLock { state -> (Item?, Signal, CheckedContinuation<Void, Never>?) in
                state.held += held
                state.queue.append(contentsOf: items)
                state.batches[ObjectIdentifier(batch)] = batch
                return startDrain(&state)
            }
            low?.resume()
            return (item, signal)
        }

        /// The batch's completions are all written: it is no longer asked to flush.
        func ended(_ batch: AttemptBatch) {
            _ = state.withLock { $0.batches.removeValue(forKey: ObjectIdentifier(batch)) }
        }

        /// Owes `count` more starts (an attempt ended). Returns the first row to start when the caller is to drain.
        func owe(_ count: Int) -> (Item?, Signal) {
            let (item, signal, low) = state.withLock { state -> (Item?, Signal, CheckedContinuation<Void, Never>?) in
                state.owed += count
                return startDrain(&state)
            }
            low?.resume()
            return (item, signal)
        }

        /// `count` completions were written (or given up on): they no longer count against the unrecorded bound.
        /// Returns the first row to start when the caller is to drain (a start waited for the bound).
        func recorded(_ count: Int) -> (Item?, Signal) {
            let (item, signal, low) = state.withLock { state -> (Item?, Signal, CheckedContinuation<Void, Never>?) in
                state.held -= count
                state.flushSent = false
                return startDrain(&state)
            }
            low?.resume()
            return (item, signal)
        }

        /// The drainer's next row while a start is owed; nil ends the drain. Taking a row spends one owed start (a
        /// row that is not sent after all gives it back: ``refund()``): one lock per start on the hot path.
        func next() -> (Item?, Signal) {
            let (item, signal, low) = state.withLock { take(&$0) }
            low?.resume()
            return (item, signal)
        }

        /// A row taken was not sent (it failed at once, or was given back): its start is owed again.
        func refund() { state.withLock { $0.owed += 1 } }

        /// Returns once at most ``lowMark`` rows are queued (at once when that is so already).
        func waitUntilLow() async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    guard state.queue.count > lowMark else { return true }
                    state.lane = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        }

        private func startDrain(_ state: inout State) -> (Item?, Signal, CheckedContinuation<Void, Never>?) {
            guard !state.draining else { return (nil, .none, nil) }
            state.draining = true
            return take(&state)
        }

        /// Takes the next row when a start is owed and the unrecorded bound allows it; also hands back the lane's
        /// continuation when the queue just ran low (the caller resumes it outside the lock).
        private func take(_ state: inout State) -> (Item?, Signal, CheckedContinuation<Void, Never>?) {
            guard state.owed > 0, !state.queue.isEmpty else {
                state.draining = false
                return (nil, .none, nil)
            }
            guard state.unrecorded < unrecordedLimit else {
                state.draining = false
                return (nil, flushSignal(&state), nil)
            }
            // Moved out of the queue (reading `first` and then removing it copied the row: a retain and a release of
            // each of its references).
            let first = state.queue.removeFirst()
            state.owed -= 1
            var low: CheckedContinuation<Void, Never>?
            if state.queue.count <= lowMark, let lane = state.lane {
                state.lane = nil
                low = lane
            }
            return (first, state.unrecorded >= flushAt ? flushSignal(&state) : .none, low)
        }

        /// Asks the lane's batches to write their completions, once per checkpoint.
        private func flushSignal(_ state: inout State) -> Signal {
            guard !state.flushSent else { return .none }
            state.flushSent = true
            return .flush(Array(state.batches.values))
        }
    }
}

extension DurableWorker.LaneSignal {
    /// Asks the batches concerned to write their completions now.
    func send() {
        guard case .flush(let batches) = self else { return }
        for batch in batches { batch.flush() }
    }
}
