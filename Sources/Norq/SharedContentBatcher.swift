import NorqCore
import Synchronization

/// The per-batch path of one send to a ``SharedContentBatchProvider``: the content every target shares is prepared
/// once per platform (``SharedContentBatchProvider/prepareShared(_:platform:options:)``), and the first attempts of
/// the send's tokens are grouped into requests (``BatchAccumulator``: by the provider's batch key, at most
/// `maxBatchSize`, the linger and the earliest deadline, as ``RequestBatcher``) without a ``PreparedRequest``, a
/// ``PreparedJob`` or a completion closure per target. The answers of a request come back together, one result per
/// target in order, to the caller's `answers`. Retries are not sent here: a target not delivered at once gets its
/// own request and continues on the per-token path (``DeliveryPump``).
///
/// Bound: a group holds at most `maxBatchSize` entries; entries are at most the send's targets in flight.
final class SharedContentBatcher: Sendable {
    /// One first attempt waiting for its request.
    struct Entry: Sendable {
        let job: DeliveryJob
        let target: SharedBatchTarget
        /// When the attempt started (its latency is measured from here).
        let started: ContinuousClock.Instant
        let deadline: ContinuousClock.Instant
    }
    /// A request's entries and their results, one per entry in order (a provider answering fewer is filled up with
    /// a failure by the batcher).
    typealias Answers = @Sendable ([Entry], [Result<DeliveryResponse, NorqError>]) -> Void
    typealias TimerRunner = RequestBatcher.TimerRunner

    private let provider: any SharedContentBatchProvider
    private let clock: RouterClock
    /// The shared content of each platform the provider could prepare it for (few: a linear search).
    private let contents: [SharedBatchContent]
    private let accumulator: Mutex<BatchAccumulator<Entry>>

    /// nil unless `provider` is a ``SharedContentBatchProvider`` batching more than one target per request and the
    /// send's content has a shared form for at least one platform. A plan whose requests the router refuses (a
    /// disabled template, validate-only to a provider without it), or whose requests carry a per-token request id,
    /// has no per-batch path: its targets take the per-token path, which says why.
    init?(provider: any PushProvider, plan: SendPlan, clock: RouterClock) {
        guard let batching = provider as? any SharedContentBatchProvider, batching.maxBatchSize > 1,
              !plan.templateDisabled, !plan.sendOptions.validateOnly, !provider.readsRequestID else { return nil }
        var options = plan.sendOptions
        options.requestID = nil
        var contents: [SharedBatchContent] = []
        for platform in provider.platforms.sorted(by: { $0.rawValue < $1.rawValue }) {
            // An error here is each target's own on the per-token path.
            if let content = try? batching.prepareShared(plan.deliverable, platform: platform, options: options) {
                contents.append(content)
            }
        }
        guard !contents.isEmpty else { return nil }
        self.provider = batching
        self.clock = clock
        self.contents = contents
        self.accumulator = Mutex(BatchAccumulator(maxBatchSize: batching.maxBatchSize, linger: batching.batchLinger))
    }

    /// The per-batch form of `target`, or nil when it takes the per-token path (a channel, a platform without
    /// shared content, a token the provider does not accept).
    func batchTarget(for target: DeliveryTarget) -> SharedBatchTarget? {
        guard case .token(let token) = target else { return nil }
        for content in contents where content.platform == token.platform {
            return provider.accepts(token, for: content) ? SharedBatchTarget(token: token, content: content) : nil
        }
        return nil
    }

    /// Queues one first attempt at `now` (the router clock's time, as the caller just read it). `answers` gets its
    /// request's results (with those of the other targets of that request); `timers` runs the waits of the linger
    /// timers this arms.
    func submit(_ entry: consuming Entry, now: ContinuousClock.Instant, timers: @escaping TimerRunner,
                answers: @escaping Answers) {
        let key = provider.batchKey(forToken: entry.target.token) ?? ""
        let deadline = entry.deadline
        // Moved into the accumulator, not copied.
        var moving: Entry? = consume entry
        let step = accumulator.withLock { $0.add(moving.take()!, key: key, deadline: deadline, now: now) }
        perform(step, now: now, timers: timers, answers: answers)
    }

    private func perform(_ step: BatchAccumulator<Entry>.Step, now: ContinuousClock.Instant,
                         timers: @escaping TimerRunner, answers: @escaping Answers) {
        switch step {
        case .flush(let entries):
            send(entries, answers: answers)
        case .arm(let key, let generation, let at):
            let delay = now.duration(to: at)
            timers { [self] in
                // Cancelled (the send was): the group is due at once rather than never.
                if delay > .zero { try? await clock.sleep(delay) }
                let now = clock.now()
                perform(accumulator.withLock { $0.expire(key: key, generation: generation, now: now) }, now: now,
                        timers: timers, answers: answers)
            }
        case .wait:
            break
        }
    }

    private func send(_ entries: [Entry], answers: @escaping Answers) {
        var deadline = entries[0].deadline
        var targets: [SharedBatchTarget] = []
        targets.reserveCapacity(entries.count)
        // By index: each entry read in place (iterating copied it whole, retaining and releasing its references).
        for index in entries.indices {
            deadline = min(deadline, entries[index].deadline)
            targets.append(entries[index].target)
        }
        provider.startSharedBatchDelivery(targets, deadline: deadline) { [self] results in
            // As one filling batch, as `RequestBatcher` does: the slots these answers free are refilled together.
            CompletionBatch.runFilling(ObjectIdentifier(self)) {
                guard results.count < entries.count else { return answers(entries, results) }
                let missing = NorqError(.transportFailed,
                                        "the provider answered \(results.count) results for \(entries.count) targets")
                answers(entries, results + Array(repeating: .failure(missing), count: entries.count - results.count))
            }
        }
    }
}
