import Logging
import NorqCore
import Synchronization
import Tracing

/// Delivers the targets of one send that route to one provider, keeping at most `policy.maxInFlight` of them
/// between "taken from the cursor" and "outcome emitted".
///
/// There is no task per target. Each answer arrives in the provider's completion (for APNs on the
/// connection's event loop). That completion emits the outcome and starts the next target right there. Only
/// the rare waits run in tasks: a retry backoff, and the calls to a dedup store that is not an
/// `ImmediateDeduplicationStore`. They are child tasks of `run()` (handed to it through `State.waits`), so that a
/// cancelled send cancels them and `run()` returns only after the last one.
///
/// Any thread that frees a slot fills free slots (`fill`), so each event loop keeps its own connections busy.
/// A slot is filled at once, inside the completion that freed it, even in the middle of a read's answers: the
/// stream is reused while the rest of the read is processed, and the server gets the next requests while the
/// client still reads (with a refill at the end of each read instead, every slot answered in a read sat idle
/// until the whole read was processed: 0.84 against 1.05-1.09 x h2load at APNs 1x1000, `Benchmarks/README.md`,
/// "Refilling a slot at once, stop 26"). A completion that runs synchronously inside this pump's `fill` does not
/// recurse into it (the running loop takes the slot), and one inside another pump's `fill` on the same thread is
/// refilled when that thread's completion batch ends (`CompletionBatch.filler`).
final class DeliveryPump: Sendable {
    private let router: NotificationRouter
    private let provider: any PushProvider
    private let plan: SendPlan
    private let cursor: TargetCursor
    private let sink: any OutcomeSink
    private let limit: Int
    /// The router's dedup store when it answers without waiting (then no task is started per token).
    private let immediateStore: (any ImmediateDeduplicationStore)?
    /// The provider's metric instruments, looked up once per send (not by name per push).
    private let instruments: RouterMetrics.ProviderInstruments?
    /// Groups attempts into requests for a provider that takes many targets per request (`BatchPushProvider` with
    /// a `maxBatchSize` above 1); nil for every other provider, whose attempts go out one request each.
    private let batcher: RequestBatcher?
    /// The per-batch path of a ``SharedContentBatchProvider`` (the content prepared once, the first attempts grouped
    /// without a request per target); nil for every other provider, and when the router traces (each attempt has
    /// its span on the per-token path).
    private let sharedBatcher: SharedContentBatcher?
    /// Set when the send is cancelled: targets not started yet fail with `routing/send-cancelled`.
    private let cancelled = Atomic<Bool>(false)
    /// A wait: work on a target in a slot that suspends (a backoff, a dedup store call).
    private typealias Wait = @Sendable () async -> Void

    private struct State {
        /// Targets taken from the cursor whose outcome is not emitted yet.
        var taken = 0
        var exhausted = false
        /// The sink is full: nothing new starts until it calls back.
        var waitingForRoom = false
        /// Every target has its outcome.
        var finished = false
        /// Waits not handed to `run()` yet (each belongs to a target in a slot: at most `limit`), and `run()`
        /// waiting for the next one.
        var waits: [Wait] = []
        var waitsConsumer: CheckedContinuation<[Wait]?, Never>?
    }
    private let state = Mutex(State())

    init(router: NotificationRouter, provider: any PushProvider, plan: SendPlan, cursor: TargetCursor,
         sink: any OutcomeSink) {
        self.router = router
        self.provider = provider
        self.plan = plan
        self.cursor = cursor
        self.sink = sink
        self.limit = max(1, provider.policy.maxInFlight)
        self.immediateStore = router.deduplication as? any ImmediateDeduplicationStore
        self.instruments = router.metrics.instruments(of: provider.name)
        self.batcher = RequestBatcher(provider: provider, clock: router.clock)
        self.sharedBatcher = router.tracer == nil ? SharedContentBatcher(provider: provider, plan: plan, clock: router.clock) : nil
    }

    /// Delivers every target routed to the provider; returns when each has its outcome. Cancelling the calling
    /// task cancels the send: targets not started get `routing/send-cancelled`, backoffs end with the last answer.
    func run() async {
        await withTaskCancellationHandler {
            await withDiscardingTaskGroup { group in
                fill()
                while let waits = await nextWaits() {
                    for wait in waits { group.addTask { await wait() } }
                }
            }
        } onCancel: {
            cancel()
        }
    }

    private func cancel() {
        cancelled.store(true, ordering: .relaxed)
        fill()
    }

    /// Runs `wait` as a child task of `run()`.
    private func runWaiting(_ wait: @escaping Wait) {
        let consumer = state.withLock { state -> CheckedContinuation<[Wait]?, Never>? in
            if let consumer = state.waitsConsumer {
                state.waitsConsumer = nil
                return consumer
            }
            state.waits.append(wait)
            return nil
        }
        consumer?.resume(returning: [wait])
    }

    /// The waits for `run()` to start next; nil once every target has its outcome. Not ended by cancellation:
    /// a cancelled send still ends each of its targets, and its waits end early as cancelled child tasks.
    private func nextWaits() async -> [Wait]? {
        await withCheckedContinuation { (continuation: CheckedContinuation<[Wait]?, Never>) in
            let now = state.withLock { state -> [Wait]?? in
                if !state.waits.isEmpty {
                    defer { state.waits.removeAll() }
                    return .some(state.waits)
                }
                if state.finished { return .some(nil) }
                state.waitsConsumer = continuation
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    // MARK: filling slots

    private enum FillStep {
        case take
        case stop
        case finished(CheckedContinuation<[Wait]?, Never>?)
    }

    /// Starts targets while slots are free, as one completion batch; slots freed meanwhile on this thread are
    /// taken by this loop (see `release`).
    private func fill() {
        CompletionBatch.runFilling(ObjectIdentifier(self)) { fillFreeSlots() }
    }

    private func fillFreeSlots() {
        while true {
            let isCancelled = cancelled.load(ordering: .relaxed)
            if !isCancelled, !sink.hasRoom { waitForRoom() }
            let step = state.withLock { state -> FillStep in
                if state.taken < limit, !state.waitingForRoom || isCancelled, !state.exhausted {
                    state.taken += 1
                    return .take
                }
                if state.exhausted, state.taken == 0, !state.finished {
                    state.finished = true
                    let consumer = state.waitsConsumer
                    state.waitsConsumer = nil
                    return .finished(consumer)
                }
                return .stop
            }
            switch step {
            case .stop:
                return
            case .finished(let consumer):
                consumer?.resume(returning: nil)
                return
            case .take:
                guard let (position, target, recipientID) = cursor.next() else {
                    state.withLock { state in
                        state.taken -= 1
                        state.exhausted = true
                    }
                    continue
                }
                start(position: position, target: target, recipientID: recipientID)
            }
        }
    }

    /// After a cancel or a router shutdown, the (counted) failure of a target not sent yet; nil otherwise.
    private func notStarting() -> NorqError? {
        let isCancelled = cancelled.load(ordering: .relaxed)
        guard isCancelled || router.isStopped else { return nil }
        let error = isCancelled
            ? NorqError(.sendCancelled, "the send was cancelled before this token was delivered")
            : NorqError(.providerShutDown, "the router shut down before this token was delivered")
        router.countFinal(.failed(error), provider: provider.name)
        return error
    }

    /// Frees a slot and fills it: at once, unless a `fill` runs on this thread. This pump's takes the slot in its
    /// loop; another pump's leaves it to the end of this thread's completion batch.
    private func release() {
        state.withLock { $0.taken -= 1 }
        switch CompletionBatch.filler {
        case nil:
            fill()
        case ObjectIdentifier(self):
            return
        default:
            CompletionBatch.afterBatch { [self] in fill() }
        }
    }

    /// The sink is full: stop starting targets until it has room again. One wait at a time: every slot freed
    /// while the sink is full calls `fill`, on either event loop, and each of them registered a waiter of its own;
    /// the sink woke them all at once, each refill found the sink full again and registered anew, so the waiters
    /// multiplied (up to 160 wake-ups per notification at 4x250, measured with a uprobe) and the sink's lock and
    /// the consumer's thread did little else. The one waiter's `fill` takes every free slot.
    private func waitForRoom() {
        let first = state.withLock { state -> Bool in
            if state.waitingForRoom { return false }
            state.waitingForRoom = true
            return true
        }
        guard first else { return }
        let roomNow = sink.waitForRoom { [self] in
            state.withLock { $0.waitingForRoom = false }
            fill()
        }
        if roomNow { state.withLock { $0.waitingForRoom = false } }
    }

    /// Emits a target's one outcome and frees its slot.
    private func emit(_ position: Int, _ outcome: consuming PushOutcome) {
        sink.emit(position, consume outcome)
        release()
    }

    // MARK: one target

    /// `target` is this pump's: the cursor hands out only the targets routed to its provider.
    private func start(position: Int, target: DeliveryTarget, recipientID: String?) {
        if let error = notStarting() {
            emit(position, PushOutcome(target: target, recipientID: recipientID, provider: provider.name,
                                       result: .failed(error)))
            return
        }
        let job = DeliveryJob(position: position, target: target, recipientID: recipientID, provider: provider,
                              plan: plan)
        guard let dedupKey = job.dedupKey else {
            prepareAndSend(job)
            return
        }
        if let store = immediateStore {
            reserved(store.reserveImmediately(dedupKey), job: job)
            return
        }
        let deduplication = router.deduplication
        runWaiting {
            let lookup = await deduplication.reserve(dedupKey)
            self.reserved(lookup, job: job)
        }
    }

    /// What the dedup store said about a target sent with the caller's idempotency key.
    private func reserved(_ lookup: DeduplicationLookup, job: DeliveryJob) {
        switch lookup {
        case .completed(let first):
            router.metrics.count("deduplicated", provider: provider.name)
            router.requestLogger(job).debug("duplicate of an earlier send with the same idempotency key",
                                            metadata: ["norq.first": "\(first.kind)"])
            emit(job.position, job.outcome(.duplicate(of: first), attempts: 0))
        case .inFlight:
            router.metrics.count("deduplicated", provider: provider.name)
            let skip = PushOutcome.Skipped(code: .duplicateInFlight,
                                           reason: "another send with the same idempotency key is delivering this token")
            emit(job.position, job.outcome(.skipped(skip), attempts: 0))
        case .reserved:
            prepareAndSend(job)
        }
    }

    /// Prepares the request of `job` and sends it; a request that cannot be prepared (logged and counted) ends
    /// the target with its failure.
    private func prepareAndSend(_ job: DeliveryJob) {
        if let sharedBatcher, let target = sharedBatcher.batchTarget(for: job.target) {
            sendInBatch(job, target, batcher: sharedBatcher)
            return
        }
        let prepared: PreparedJob
        let now = router.clock.now()
        do {
            let request = try router.prepareRequest(target: job.target, provider: provider, plan: plan,
                                                    requestID: provider.readsRequestID ? job.requestID : nil)
            prepared = PreparedJob(job: job, request: request, deadline: now.advanced(by: plan.options.deadline))
        } catch {
            router.requestLogger(job).notice("could not prepare the request", metadata: ["norq.error": "\(error.code)"])
            router.countFinal(.failed(error), provider: provider.name)
            endReservation(of: job, result: nil) { job.outcome(.failed(error), attempts: 0) }
            return
        }
        send(prepared, previousAttempts: 0, now: now)
    }

    // MARK: the per-batch path

    /// The first attempt of `job` on the per-batch path: no request of its own; its answer comes back with those
    /// of the other targets of its request (`firstAnswered`, one per target).
    private func sendInBatch(_ job: DeliveryJob, _ target: SharedBatchTarget, batcher: SharedContentBatcher) {
        if let instruments { instruments.sent.increment() } else { router.metrics.count("sent", provider: provider.name) }
        router.metrics.inFlightChanged(by: 1)
        let now = router.clock.now()
        let entry = SharedContentBatcher.Entry(job: job, target: target, started: now,
                                               deadline: now.advanced(by: plan.options.deadline))
        batcher.submit(entry, now: now, timers: { [self] wait in runWaiting(wait) }) { [self] entries, results in
            // By index: the entries are read in place (iterating copied each, retaining its references).
            for index in 0..<min(entries.count, results.count) { firstAnswered(results[index], entries[index]) }
        }
    }

    /// A per-batch first attempt's answer: delivered (or accepted), its outcome; anything else, the target gets its
    /// own request (as `prepareAndSend` makes it) and the answer goes on as that request's first attempt (the retry
    /// policy, the invalid-token event, the outcome), so only the targets of a batch that failed are sent again.
    private func firstAnswered(_ answer: Result<DeliveryResponse, NorqError>, _ entry: SharedContentBatcher.Entry) {
        if case .success(let response) = answer,
           let delivered = router.delivered(response, job: entry.job, requestID: nil, attempts: 1) {
            router.metrics.inFlightChanged(by: -1)
            router.recordLatency(since: entry.started, provider: provider, instruments: instruments)
            let result = PushOutcome.Result.delivered(delivered)
            guard entry.job.dedupKey != nil else {
                emit(entry.job.position, router.finish(entry.job, environment: nil, result: result, attempts: 1,
                                                       lastResponse: nil, instruments: instruments))
                return
            }
            let job = entry.job
            endReservation(of: job, result: result) { [router, instruments] in
                router.finish(job, environment: nil, result: result, attempts: 1, lastResponse: nil,
                              instruments: instruments)
            }
            return
        }
        let job = entry.job
        let request: PreparedRequest
        do {
            request = try router.prepareRequest(target: job.target, provider: provider, plan: plan, requestID: nil)
        } catch {
            // Not expected (the shared content and the token were accepted): the target ends with the error.
            router.metrics.inFlightChanged(by: -1)
            router.requestLogger(job).notice("could not prepare the request", metadata: ["norq.error": "\(error.code)"])
            router.countFinal(.failed(error), provider: provider.name)
            endReservation(of: job, result: nil) { job.outcome(.failed(error), attempts: 1) }
            return
        }
        answered(answer, attempt: PreparedJob(job: job, request: request, deadline: entry.deadline), attempts: 1,
                 started: entry.started, possiblyProcessed: false, requeues: 0, span: nil)
    }

    /// Ends the dedup reservation of `job`, if it holds one: records `result` when it is definitive, else releases
    /// the key. Then emits `outcome()`: after the store has it, so that a repeat of the send finds it.
    private func endReservation(of job: DeliveryJob, result: PushOutcome.Result?,
                                then outcome: @escaping @Sendable () -> PushOutcome) {
        guard let dedupKey = job.dedupKey else {
            emit(job.position, outcome())
            return
        }
        let definitive = result.flatMap { NotificationRouter.isDefinitive($0) ? $0 : nil }
        if let store = immediateStore {
            if let definitive { store.recordImmediately(dedupKey, result: definitive) } else { store.releaseImmediately(dedupKey) }
            emit(job.position, outcome())
            return
        }
        let deduplication = router.deduplication
        runWaiting {
            if let definitive { await deduplication.record(dedupKey, result: definitive) } else { await deduplication.release(dedupKey) }
            self.emit(job.position, outcome())
        }
    }

    /// One attempt; its answer comes back through the provider's completion.
    /// `possiblyProcessed`: an earlier attempt may have been processed by the server.
    /// `requeues`: earlier attempts that were re-queued (not processed by the server: no retry budget spent).
    /// `now`: the router clock's time when the caller has just read it (one clock read per push less).
    private func send(_ attempt: PreparedJob, previousAttempts: Int, possiblyProcessed: Bool = false,
                      requeues: Int = 0, now: ContinuousClock.Instant? = nil) {
        if previousAttempts > 0, router.isStopped {
            finished(attempt, .failed(NorqError(.providerShutDown, "the router shut down before a retry",
                                                possiblyProcessed: possiblyProcessed)),
                     attempts: previousAttempts, lastResponse: nil, requeues: requeues)
            return
        }
        let attempts = previousAttempts + 1
        if let instruments { instruments.sent.increment() } else { router.metrics.count("sent", provider: provider.name) }
        router.metrics.inFlightChanged(by: 1)
        let started = now ?? router.clock.now()
        // The attempt's span (only when the router traces): a child of the caller's context.
        let span = DeliveryTracing.startAttempt(router, parent: attempt.job.plan.trace.map { .context($0) }, job: attempt.job,
                                                attempt: attempts)
        if let batcher {
            // A batch-capable provider: the attempt joins a request of its batch key; its own answer comes back
            // alone, so a retry re-sends this target only.
            batcher.submit(attempt, timers: { [self] wait in runWaiting(wait) }) {
                [self] answer in
                answered(answer, attempt: attempt, attempts: attempts, started: started,
                         possiblyProcessed: possiblyProcessed, requeues: requeues, span: span)
            }
            return
        }
        provider.startDelivery(attempt.request, deadline: attempt.deadline) { [self] answer in
            answered(answer, attempt: attempt, attempts: attempts, started: started,
                     possiblyProcessed: possiblyProcessed, requeues: requeues, span: span)
        }
    }

    /// One attempt's answer: the outcome, or a retry.
    @inline(__always)
    private func answered(_ answer: Result<DeliveryResponse, NorqError>, attempt: PreparedJob, attempts: Int,
                          started: ContinuousClock.Instant, possiblyProcessed: Bool, requeues: Int,
                          span: DeliveryTracing.AttemptSpan?) {
        router.metrics.inFlightChanged(by: -1)
        let step = router.afterAttempt(answer, attempt: attempt, attempts: attempts, started: started,
                                       earlierPossiblyProcessed: possiblyProcessed, instruments: instruments,
                                       requeues: requeues)
        if let span { DeliveryTracing.endAttempt(span, answer: answer, step: step) }
        switch step {
        case .done(let result, let lastResponse):
            finished(attempt, result, attempts: attempts, lastResponse: lastResponse, requeues: requeues)
        case .retry(let delay, let lastResponse, let lastError, let possiblyProcessed):
            let requeued = NotificationRouter.isRequeue(lastError)
            retry(attempt, after: delay, attempts: attempts, lastResponse: lastResponse, lastError: lastError,
                  possiblyProcessed: possiblyProcessed, requeues: requeues + (requeued ? 1 : 0))
        }
    }

    /// Waits `delay` (the router's clock) in a child task of `run()`, then sends again. A cancelled send ends
    /// the wait (the child is cancelled with `run()`) and reports the last answer. A re-queue without delay (the
    /// first after a refusal) does not sleep, and does not read the clock.
    private func retry(_ attempt: PreparedJob, after delay: Duration, attempts: Int,
                       lastResponse: DeliveryResponse?, lastError: NorqError?, possiblyProcessed: Bool,
                       requeues: Int) {
        let clock = router.clock
        let sleeps = delay > .zero || !NotificationRouter.isRequeue(lastError)
        if !cancelled.load(ordering: .relaxed) {
            runWaiting {
                var slept = true
                if sleeps || Task.isCancelled {
                    do { try await clock.sleep(delay) } catch { slept = false }
                }
                if slept {
                    self.send(attempt, previousAttempts: attempts, possiblyProcessed: possiblyProcessed,
                              requeues: requeues)
                } else {
                    self.finished(attempt, NotificationRouter.finalResult(lastResponse, lastError, request: attempt.request,
                                                                          job: attempt.job,
                                                                          possiblyProcessed: possiblyProcessed),
                                  attempts: attempts, lastResponse: lastResponse, requeues: requeues)
                }
            }
        } else {
            finished(attempt, NotificationRouter.finalResult(lastResponse, lastError, request: attempt.request,
                                                             job: attempt.job, possiblyProcessed: possiblyProcessed),
                     attempts: attempts, lastResponse: lastResponse, requeues: requeues)
        }
    }

    /// Records or releases the idempotency key, then emits the outcome.
    private func finished(_ attempt: PreparedJob, _ result: PushOutcome.Result, attempts: Int,
                          lastResponse: DeliveryResponse?, requeues: Int = 0) {
        guard attempt.job.dedupKey != nil else {
            // The common case, without the closure `endReservation` needs (an allocation per notification).
            emit(attempt.job.position, router.finish(attempt, result: result, attempts: attempts, lastResponse: lastResponse,
                                                     instruments: instruments, requeues: requeues))
            return
        }
        endReservation(of: attempt.job, result: result) { [router, instruments] in
            router.finish(attempt, result: result, attempts: attempts, lastResponse: lastResponse, instruments: instruments,
                          requeues: requeues)
        }
    }
}

/// One routed target on its way: what every step of its delivery knows about it (a value: the one object per
/// target is the `PreparedJob` that holds it).
struct DeliveryJob: Sendable {
    /// Its place in the send's report.
    let position: Int
    let target: DeliveryTarget
    let recipientID: String?
    let provider: any PushProvider
    let plan: SendPlan
    /// The stable per-target request id (UUIDv5 of the idempotency key and the target), made when asked for:
    /// a provider that does not read it (`readsRequestID`) needs it only for an answer without a message id.
    var requestID: String { RequestID.make(idempotencyKey: plan.key, token: target.identity) }
    /// Set when the caller gave an idempotency key: only then is the dedup store consulted.
    let dedupKey: DeduplicationKey?

    init(position: Int, target: DeliveryTarget, recipientID: String?, provider: any PushProvider, plan: SendPlan) {
        self.position = position
        self.target = target
        self.recipientID = recipientID
        self.provider = provider
        self.plan = plan
        self.dedupKey = plan.callerKey ? DeduplicationKey(idempotencyKey: plan.key, target: target.identity) : nil
    }

    func outcome(_ result: PushOutcome.Result, attempts: Int, requeues: Int = 0) -> PushOutcome {
        PushOutcome(target: target, recipientID: recipientID, provider: provider.name, attempts: attempts,
                    requeues: requeues, result: result)
    }
}

/// A prepared job: the request every attempt sends and the deadline of them all.
final class PreparedJob: Sendable {
    let job: DeliveryJob
    let request: PreparedRequest
    let deadline: ContinuousClock.Instant

    init(job: DeliveryJob, request: PreparedRequest, deadline: ContinuousClock.Instant) {
        self.job = job
        self.request = request
        self.deadline = deadline
    }
}
