import NorqCore
import Synchronization

/// The grouping rule of batch-capable providers (``BatchPushProvider``), pure: entries are grouped by the
/// provider's batch key; a group leaves when it is full (`maxBatchSize`), or when it has been quiet for `linger` (no
/// entry added for that long: a group still being filled, as after a full batch's answers free their slots, is not
/// cut short), and at the latest `maxHold` after its first entry and at its earliest deadline. No clock of its own
/// (`now` is passed in), no I/O: the caller arms the timers this returns and calls ``expire(key:generation:now:)``
/// when one fires.
///
/// Bound: a group holds at most `maxBatchSize` entries; there are at most as many groups as entries in flight
/// (the router's `maxInFlight`).
struct BatchAccumulator<Entry> {
    let maxBatchSize: Int
    let linger: Duration
    let maxHold: Duration

    private struct Group {
        var entries: [Entry] = []
        /// Bumped on each flush and each re-arm: a timer armed before finds nothing to do.
        var generation = 0
        /// When the armed timer fires.
        var timerAt: ContinuousClock.Instant?
        /// The group leaves by then whatever happens: first entry + `maxHold`, or the earliest deadline if sooner.
        var flushBy: ContinuousClock.Instant?
        var lastAdd: ContinuousClock.Instant?
    }
    private var groups: [String: Group] = [:]

    init(maxBatchSize: Int, linger: Duration, maxHold: Duration? = nil) {
        self.maxBatchSize = max(1, maxBatchSize)
        self.linger = linger
        self.maxHold = max(linger, maxHold ?? linger * 5)
    }

    enum Step {
        /// Send these entries now.
        case flush([Entry])
        /// Arm a timer for `key` at `at`; when it fires call `expire(key:generation:now:)`.
        case arm(key: String, generation: Int, at: ContinuousClock.Instant)
        /// Nothing to do (the group waits for more, its timer armed already).
        case wait
    }

    /// Adds `entry` (due by `deadline`) to the group of `key`.
    mutating func add(_ entry: consuming Entry, key: String, deadline: ContinuousClock.Instant,
                      now: ContinuousClock.Instant) -> Step {
        // In place (`groups[key, default:]` passed inout): a copy of the group out of the dictionary made every append
        // copy its whole array, O(n^2) per batch (found by Benchmarks/expo.sh under perf). The helper is static: as
        // an instance method it read `self` while `groups` was borrowed inout, so Swift passed it a copy of `self`,
        // whose dictionary and arrays then shared the group's storage: each append copied the array all the same
        // (a quarter of the samples, under perf again).
        // `entry` is moved into the group, not copied (a copy retained each of its references once more).
        Self.add(entry, to: &groups[key, default: Group()], key: key, deadline: deadline, now: now,
                 maxBatchSize: maxBatchSize, linger: linger, maxHold: maxHold)
    }

    private static func add(_ entry: consuming Entry, to group: inout Group, key: String, deadline: ContinuousClock.Instant,
                            now: ContinuousClock.Instant, maxBatchSize: Int, linger: Duration,
                            maxHold: Duration) -> Step {
        if group.entries.isEmpty { group.entries.reserveCapacity(maxBatchSize) }
        group.entries.append(consume entry)
        if group.entries.count >= maxBatchSize {
            let entries = group.entries
            group = Group(generation: group.generation + 1)
            return .flush(entries)
        }
        group.lastAdd = now
        let flushBy = min(group.flushBy ?? now + maxHold, deadline)
        group.flushBy = flushBy
        let due = min(now + linger, flushBy)
        if let timerAt = group.timerAt, timerAt <= due { return .wait }
        // The first entry, or one whose deadline comes before the group's timer: (re)arm earlier.
        group.generation += 1
        group.timerAt = due
        return .arm(key: key, generation: group.generation, at: due)
    }

    /// A timer of `key` fired at `now`: the group's entries when it is due (quiet for `linger`, or at its `flushBy`),
    /// a new timer when entries still came in meanwhile, nothing when the timer is not the group's current one.
    mutating func expire(key: String, generation: Int, now: ContinuousClock.Instant) -> Step {
        guard let group = groups[key], group.generation == generation, !group.entries.isEmpty,
              let lastAdd = group.lastAdd, let flushBy = group.flushBy else { return .wait }
        if now >= flushBy || lastAdd.duration(to: now) >= linger {
            let entries = group.entries
            groups[key] = Group(generation: generation + 1)
            return .flush(entries)
        }
        let at = min(lastAdd + linger, flushBy)
        groups[key]?.generation = generation + 1
        groups[key]?.timerAt = at
        return .arm(key: key, generation: generation + 1, at: at)
    }

    /// Entries waiting, all groups.
    var pending: Int { groups.values.reduce(0) { $0 + $1.entries.count } }
}

/// Groups the attempts of one send to a ``BatchPushProvider`` into its requests (``BatchAccumulator``) and
/// sends each group with `startBatchDelivery`, handing every attempt its own result. Only providers whose
/// `maxBatchSize` is above 1 get one: every other provider keeps the per-token path.
final class RequestBatcher: Sendable {
    typealias Completion = @Sendable (Result<DeliveryResponse, NorqError>) -> Void
    /// One attempt waiting for its request: the prepared job by reference (its request is not copied into the
    /// group; the provider's array of requests is the only copy).
    struct Entry: Sendable {
        let attempt: PreparedJob
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

    /// Runs a timer's wait as a child task of its owner (the pump's `run()` group): no unowned task per timer, and a
    /// cancelled send ends its timers' sleeps (the groups they guard leave at once).
    typealias TimerRunner = @Sendable (@escaping @Sendable () async -> Void) -> Void

    /// Queues one attempt (its request, due by its deadline); `completion` gets its own result exactly once.
    /// `timers` runs the waits of the linger timers this arms.
    func submit(_ attempt: PreparedJob, timers: @escaping TimerRunner, completion: @escaping Completion) {
        let key = provider.batchKey(for: attempt.request) ?? ""
        let entry = Entry(attempt: attempt, completion: completion)
        let now = clock.now()
        let step = accumulator.withLock { $0.add(entry, key: key, deadline: attempt.deadline, now: now) }
        perform(step, now: now, timers: timers)
    }

    private func perform(_ step: BatchAccumulator<Entry>.Step, now: ContinuousClock.Instant, timers: @escaping TimerRunner) {
        switch step {
        case .flush(let entries):
            send(entries)
        case .arm(let key, let generation, let at):
            let delay = now.duration(to: at)
            timers { [self] in
                // Cancelled (the send was): the group is due at once rather than never.
                if delay > .zero { try? await clock.sleep(delay) }
                let now = clock.now()
                perform(accumulator.withLock { $0.expire(key: key, generation: generation, now: now) }, now: now,
                        timers: timers)
            }
        case .wait:
            break
        }
    }

    private func send(_ entries: [Entry]) {
        var deadline = entries[0].attempt.deadline
        var requests: [PreparedRequest] = []
        requests.reserveCapacity(entries.count)
        for entry in entries {
            deadline = min(deadline, entry.attempt.deadline)
            requests.append(entry.attempt.request)
        }
        provider.startBatchDelivery(requests, deadline: deadline) { [self] results in
            // As one filling batch: the slots these answers free are refilled together when the last one is handled
            // (`CompletionBatch`), so the next request's targets are prepared in one loop, not one per answer.
            CompletionBatch.runFilling(ObjectIdentifier(self)) {
                for (entry, result) in zip(entries, results) { entry.completion(result) }
                if results.count < entries.count {
                    let missing = NorqError(.transportFailed, "the provider answered \(results.count) results for \(entries.count) requests")
                    for entry in entries[results.count...] { entry.completion(.failure(missing)) }
                }
            }
        }
    }
}
