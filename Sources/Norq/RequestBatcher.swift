import NorqCore
import Synchronization

/// The grouping rule of batch-capable providers (``BatchPushProvider``), pure: entries are grouped by the
/// provider's batch key; a group leaves when it is full (`maxBatchSize`), or when its linger ends: `linger` after
/// its first entry, never later than the earliest deadline among its entries. No clock of its own (`now` is passed
/// in), no I/O: the caller arms the timers this returns and calls ``expire(key:generation:)`` when one fires.
///
/// Bound: a group holds at most `maxBatchSize` entries; there are at most as many groups as entries in flight
/// (the router's `maxInFlight`).
struct BatchAccumulator<Entry> {
    let maxBatchSize: Int
    let linger: Duration

    private struct Group {
        var entries: [Entry] = []
        /// Bumped on each flush: a timer armed for an earlier group of the same key finds nothing.
        var generation = 0
        var flushAt: ContinuousClock.Instant?
    }
    private var groups: [String: Group] = [:]

    init(maxBatchSize: Int, linger: Duration) {
        self.maxBatchSize = max(1, maxBatchSize)
        self.linger = linger
    }

    enum Step {
        /// Send these entries now.
        case flush([Entry])
        /// Arm a timer for `key` at `at`; when it fires call `expire(key:generation:)`.
        case arm(key: String, generation: Int, at: ContinuousClock.Instant)
        /// Nothing to do (the group waits for more, its timer armed already).
        case wait
    }

    /// Adds `entry` (due by `deadline`) to the group of `key`.
    mutating func add(_ entry: Entry, key: String, deadline: ContinuousClock.Instant, now: ContinuousClock.Instant) -> Step {
        var group = groups[key] ?? Group()
        group.entries.append(entry)
        if group.entries.count >= maxBatchSize {
            let entries = group.entries
            groups[key] = Group(generation: group.generation + 1)
            return .flush(entries)
        }
        let due = min(now + linger, deadline)
        if let flushAt = group.flushAt, flushAt <= due {
            groups[key] = group
            return .wait
        }
        // The first entry, or one whose deadline comes before the group's timer: (re)arm earlier.
        group.generation += 1
        group.flushAt = due
        groups[key] = group
        return .arm(key: key, generation: group.generation, at: due)
    }

    /// A timer of `key` fired: the group's entries when the timer is its current one, else nothing.
    mutating func expire(key: String, generation: Int) -> [Entry] {
        guard let group = groups[key], group.generation == generation, !group.entries.isEmpty else { return [] }
        groups[key] = Group(generation: group.generation + 1)
        return group.entries
    }

    /// Entries waiting, all groups.
    var pending: Int { groups.values.reduce(0) { $0 + $1.entries.count } }
}

/// Groups the attempts of one send to a ``BatchPushProvider`` into its requests (``BatchAccumulator``) and
/// sends each group with `startBatchDelivery`, handing every attempt its own result. Only providers whose
/// `maxBatchSize` is above 1 get one: every other provider keeps the per-token path.
final class RequestBatcher: Sendable {
    typealias Completion = @Sendable (Result<DeliveryResponse, NorqError>) -> Void
    struct Entry: Sendable {
        let request: PreparedRequest
        let deadline: ContinuousClock.Instant
        let completion: Completion
    }

    private let provider: any BatchPushProvider
    private let clock: RouterClock
    private let accumulator: Mutex<BatchAccumulator<Entry>>

    init?(provider: any PushProvider, clock: RouterClock) {
        guard let batching = provider as? any BatchPushProvider, batching.maxBatchSize > 1 else { return nil }
        self.provider = batching
        self.clock = clock
        self.accumulator = Mutex(BatchAccumulator(maxBatchSize: batching.maxBatchSize, linger: batching.batchLinger))
    }

    /// Queues one attempt; `completion` gets its own result exactly once.
    func submit(_ request: PreparedRequest, deadline: ContinuousClock.Instant, completion: @escaping Completion) {
        let key = provider.batchKey(for: request) ?? ""
        let entry = Entry(request: request, deadline: deadline, completion: completion)
        let now = clock.now()
        let step = accumulator.withLock { $0.add(entry, key: key, deadline: deadline, now: now) }
        switch step {
        case .flush(let entries):
            send(entries)
        case .arm(let key, let generation, let at):
            let delay = now.duration(to: at)
            Task { [self] in
                if delay > .zero { try? await clock.sleep(delay) }
                let entries = accumulator.withLock { $0.expire(key: key, generation: generation) }
                if !entries.isEmpty { send(entries) }
            }
        case .wait:
            break
        }
    }

    private func send(_ entries: [Entry]) {
        let deadline = entries.map(\.deadline).min()!
        provider.startBatchDelivery(entries.map(\.request), deadline: deadline) { results in
            for (entry, result) in zip(entries, results) { entry.completion(result) }
            if results.count < entries.count {
                let missing = NorqError(.transportFailed, "the provider answered \(results.count) results for \(entries.count) requests")
                for entry in entries[results.count...] { entry.completion(.failure(missing)) }
            }
        }
    }
}
