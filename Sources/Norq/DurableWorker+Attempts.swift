import DequeModule
import NorqCore
import NorqStore
import Synchronization

// The attempts of one claimed batch, without a task per target: each attempt is started by a call and answered in
// the provider's completion (for APNs on the connection's event loop), as `DeliveryPump` delivers a send without a
// store. The completion decides the row's completion (`RowCompletion`) and hands it to the batch's one consumer,
// which records them at checkpoints. Only the rare waits (a re-queue's backoff) and the checkpoint timer run in
// child tasks of the batch's task group. (A task and a continuation per target cost the worker about a fifth of
// its CPU per push: `Benchmarks/README.md`, "stop 31".) At most `attemptWindow` attempts of a lane are in flight:
// the lane's window starts the first ones, and each attempt that ends starts the next row from its completion
// (`BatchFeeder`), on the thread that answered it (stop 32), from the next batch when this one has none left
// (stop 33: the lane claims the next batch while this one's last rows are in flight).

extension DurableWorker {
    /// What the attempts of a batch hand to its consumer, and the consumer takes in one go.
    struct BatchEvents: Sendable {
        var completions: [RowCompletion] = []
        /// Child tasks to start: a re-queue's backoff.
        var waits: [@Sendable () async -> Void] = []
        /// The checkpoint timer fired.
        var tick = false

        var isEmpty: Bool { completions.isEmpty && waits.isEmpty && !tick }
    }

    /// The meeting point of a batch's attempts (any thread) and its consumer (the lane's task). Bounded: at most one
    /// completion per claimed row is ever held.
    ///
    /// The consumer is woken only when it has something to do: the first completion since its last checkpoint (it
    /// arms the checkpoint timer), enough completions for a checkpoint (`minimum`), the last one, a wait to start,
    /// or the timer. (Waking it for every completion cost a task switch per push.)
    final class AttemptBatch: Sendable {
        private struct State {
            var events = BatchEvents()
            /// Rows without their completion yet.
            var remaining: Int
            /// Completions since the consumer's last checkpoint (held here or handed to it).
            var window = 0
            var consumer: CheckedContinuation<BatchEvents?, Never>?
        }
        private let state: Mutex<State>
        private let minimum: Int

        init(rows: Int, minimum: Int) {
            state = Mutex(State(remaining: rows))
            self.minimum = max(1, minimum)
        }

        func complete(_ completion: RowCompletion) {
            deliver { state in
                state.events.completions.append(completion)
                state.remaining -= 1
                state.window += 1
                return state.window == 1 || state.window >= minimum || state.remaining <= 0
            }
        }

        func wait(_ body: @escaping @Sendable () async -> Void) {
            deliver { state in
                state.events.waits.append(body)
                return true
            }
        }

        func tick() {
            deliver { state in
                state.events.tick = true
                return true
            }
        }

        /// The consumer recorded `count` completions.
        func checkpointed(_ count: Int) { state.withLock { $0.window -= count } }

        /// Applies `change`; resumes the consumer when it waits and `change` says it has something to do.
        private func deliver(_ change: (inout State) -> Bool) {
            let handOff = state.withLock { state -> (CheckedContinuation<BatchEvents?, Never>, BatchEvents)? in
                guard change(&state), let consumer = state.consumer else { return nil }
                state.consumer = nil
                defer { state.events = BatchEvents() }
                return (consumer, state.events)
            }
            if let (consumer, events) = handOff { consumer.resume(returning: events) }
        }

        /// What happened since the last call; nil once every row has its completion and every event was taken.
        func next() async -> BatchEvents? {
            await withCheckedContinuation { (continuation: CheckedContinuation<BatchEvents?, Never>) in
                let now = state.withLock { state -> BatchEvents?? in
                    if !state.events.isEmpty {
                        defer { state.events = BatchEvents() }
                        return .some(state.events)
                    }
                    if state.remaining <= 0 { return .some(nil) }
                    state.consumer = continuation
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        }
    }

    /// A lane's rows not started yet, of one or two claimed batches, and how many more may start: the lane's window
    /// (`attemptWindow`) is owed at first, and each attempt that ends owes one more, from its completion, on whatever
    /// thread answered it (for HTTP/2 providers the connection's event loop, where the next request is written
    /// without a hop, as `DeliveryPump` does). A start owed while no row is queued waits for the next batch's rows,
    /// so the window carries over from one batch to the next (stop 33). One caller at a time drains what is owed;
    /// a call made meanwhile (another loop, or an attempt that failed at once inside the drain's own `start`) only
    /// adds to the debt, so starts never recurse, however many fail synchronously. Bounded: at most two claimed
    /// batches' rows (`claimBatchSize` plus one segment each) are queued.
    final class BatchFeeder: Sendable {
        struct Item: Sendable {
            let row: OutboxRow
            let lease: Lease
            let plan: SendPlan
            let batch: AttemptBatch
            let router: NotificationRouter
            /// The provider's request grouper when it sends many targets per request (Expo).
            let batcher: RequestBatcher?
        }
        private struct State {
            var queue = Deque<Item>()
            /// Attempts that may start now.
            var owed: Int
            var draining = false
            /// The lane waiting for the queue to run low (`waitUntilLow`).
            var lane: CheckedContinuation<Void, Never>?
        }
        private let state: Mutex<State>
        /// The queue is low (the lane claims its next batch) at this many rows or fewer.
        let lowMark: Int

        init(window: Int) {
            state = Mutex(State(owed: max(1, window)))
            lowMark = max(1, window) / 2
        }

        /// Queues a batch's rows. Returns the first row for the caller to start when it is to drain what is owed
        /// (no one else is), nil otherwise.
        func append(_ items: [Item]) -> Item? {
            let (item, low) = state.withLock { state -> (Item?, CheckedContinuation<Void, Never>?) in
                state.queue.append(contentsOf: items)
                guard !state.draining else { return (nil, nil) }
                state.draining = true
                return take(&state)
            }
            low?.resume()
            return item
        }

        /// Owes `count` more starts. Returns the first row for the caller to start when it is to drain them (no one
        /// else is), nil otherwise: the drainer takes this debt with the rest.
        func owe(_ count: Int) -> Item? {
            let (item, low) = state.withLock { state -> (Item?, CheckedContinuation<Void, Never>?) in
                state.owed += count
                guard !state.draining else { return (nil, nil) }
                state.draining = true
                return take(&state)
            }
            low?.resume()
            return item
        }

        /// The drainer's next row while a start is owed; nil ends the drain. Taking a row spends one owed start (a
        /// row that is not sent after all gives it back: ``refund()``): one lock per start on the hot path.
        func next() -> Item? {
            let (item, low) = state.withLock { take(&$0) }
            low?.resume()
            return item
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

        /// Takes the next row when a start is owed; also hands back the lane's continuation when the queue just ran
        /// low (the caller resumes it outside the lock).
        private func take(_ state: inout State) -> (Item?, CheckedContinuation<Void, Never>?) {
            guard state.owed > 0, let item = state.queue.popFirst() else {
                state.draining = false
                return (nil, nil)
            }
            state.owed -= 1
            var low: CheckedContinuation<Void, Never>?
            if state.queue.count <= lowMark, let lane = state.lane {
                state.lane = nil
                low = lane
            }
            return (item, low)
        }
    }

    /// One target's attempts: what each of them needs (one object per target).
    final class TargetAttempt: Sendable {
        let row: OutboxRow
        let lease: Lease
        let prepared: PreparedJob
        let requestID: String
        let router: NotificationRouter
        let batch: AttemptBatch
        let feeder: BatchFeeder
        /// The provider's request grouper when it sends many targets per request (Expo), nil otherwise.
        let batcher: RequestBatcher?

        init(row: OutboxRow, lease: Lease, prepared: PreparedJob, requestID: String, router: NotificationRouter,
             batch: AttemptBatch, feeder: BatchFeeder, batcher: RequestBatcher?) {
            self.row = row
            self.lease = lease
            self.prepared = prepared
            self.requestID = requestID
            self.router = router
            self.batch = batch
            self.feeder = feeder
            self.batcher = batcher
        }
    }

    /// Starts a claimed batch's attempts: reads its sends' plans, queues its rows in the lane's feeder (the rows
    /// that cannot be sent get their completion at once; rows waiting for a receipt are polled, not sent), and
    /// returns the batch for ``record(_:)``.
    func startAttempts(_ rows: [OutboxRow], router: NotificationRouter, leases: HeldLeases,
                       feeder: BatchFeeder) async -> StartedBatch {
        let plans = await plans(for: rows.map(\.sendID))
        let rule = CheckpointRule(batchSize: rows.count)
        let batch = AttemptBatch(rows: rows.reduce(0) { $0 + ($1.lease == nil ? 0 : 1) }, minimum: rule.minimumCompletions)
        var batchers: [String: RequestBatcher] = [:]
        for (name, provider) in router.providers {
            if let batcher = RequestBatcher(provider: provider, clock: router.clock) { batchers[name] = batcher }
        }
        var startable: [BatchFeeder.Item] = []
        startable.reserveCapacity(rows.count)
        var polls: [(row: OutboxRow, lease: Lease)] = []
        for row in rows {
            guard let lease = row.lease else { continue }
            // A target the service accepted waits for its receipt: a poll, not a send (`pollReceipts`).
            if row.last?.isAccepted == true {
                polls.append((row, lease))
                continue
            }
            switch plans[row.sendID] ?? .unreadable(NorqError(.storeFailed, "the send \(row.sendID) is missing")) {
            case .plan(let plan):
                startable.append(BatchFeeder.Item(row: row, lease: lease, plan: plan, batch: batch, router: router,
                                                  batcher: row.provider.flatMap { batchers[$0] }))
            case .unreadable(let error):
                batch.complete(fail(row, lease: lease, error, router: router))
            case .unavailable:
                batch.complete(.release(lease))
            }
        }
        // Started as the lane's window allows: at once up to what is owed, then one per attempt that ends (`feed`).
        drain(feeder, from: feeder.append(startable))
        return StartedBatch(router: router, leases: leases, attempts: batch, polls: polls, rule: rule)
    }

    /// Records a started batch's outcomes as they come: whenever `CheckpointRule` says so (enough completions, or
    /// the oldest waited long enough), so a crash re-sends at most what was in flight or waiting for the next
    /// checkpoint, not the whole batch; the rest when the last attempt has ended.
    func record(_ started: StartedBatch) async {
        let batch = started.attempts, rule = started.rule, leases = started.leases, router = started.router
        await withTaskGroup(of: Void.self) { group in
            if !started.polls.isEmpty {
                let polls = started.polls
                group.addTask { await self.pollReceipts(polls, router: router, batch: batch) }
            }
            var waiting: [RowCompletion] = []
            var oldest: ContinuousClock.Instant?
            var ticking = false
            func checkpoint() async {
                let written = waiting
                waiting = []
                oldest = nil
                await finish(written)
                batch.checkpointed(written.count)
                leases.held.withLock { held in
                    for completion in written { held.removeValue(forKey: completion.lease.rowID) }
                }
            }
            while let events = await batch.next() {
                for wait in events.waits { group.addTask { await wait() } }
                if events.tick { ticking = false }
                if !events.completions.isEmpty {
                    waiting += events.completions
                    if oldest == nil { oldest = .now }
                }
                if let since = oldest, rule.isDue(waiting: waiting.count, oldestWaited: since.duration(to: .now)) {
                    await checkpoint()
                } else if oldest != nil, !ticking {
                    ticking = true
                    let interval = rule.maximumWait
                    group.addTask {
                        try? await Task.sleep(for: interval)
                        batch.tick()
                    }
                }
            }
            group.cancelAll()  // only a pending tick can be left
            if !waiting.isEmpty { await checkpoint() }
        }
    }

    /// Attempts of one batch in flight at once: the router's largest `maxInFlight` shared by the lanes (a claim of
    /// 500 on each of 4 lanes no longer puts 2,000 requests in the providers' queues at once).
    func attemptWindow(_ router: NotificationRouter) -> Int {
        max(1, (router.providers.values.map(\.policy.maxInFlight).max() ?? 1_000) / lanes)
    }

    /// Starts the lane's next rows that can be sent, one per start owed (`count` more now): rows that cannot (an
    /// unreadable target, a crash loop) get their completion and the next is tried; once the worker is stopping,
    /// every row not started is given back.
    func feed(_ feeder: BatchFeeder, count: Int = 1) {
        drain(feeder, from: feeder.owe(count))
    }

    /// Drains what `feeder` owes, starting with `first` (the row it handed this caller, if any).
    private func drain(_ feeder: BatchFeeder, from first: BatchFeeder.Item?) {
        var next = first
        while let item = next {
            if isStopping {
                // Claimed but not started: given back at once (its start is owed again: the next row is tried).
                item.batch.complete(.release(item.lease))
                feeder.refund()
            } else if !startAttempt(item, feeder: feeder) {
                feeder.refund()
            }
            next = feeder.next()
        }
    }

    /// An attempt's last answer of this claim: its completion, then the batch's next row.
    private func ended(_ attempt: TargetAttempt, _ completion: RowCompletion) {
        attempt.batch.complete(completion)
        feed(attempt.feeder)
    }

    /// Prepares a row's request and sends it (true); a row that cannot be sent gets its completion at once (false).
    private func startAttempt(_ item: BatchFeeder.Item, feeder: BatchFeeder) -> Bool {
        let row = item.row, lease = item.lease, plan = item.plan, router = item.router, batch = item.batch
        func fail(_ error: NorqError) -> Bool {
            batch.complete(self.fail(row, lease: lease, error, router: router))
            return false
        }
        let target: DeliveryTarget
        do { target = try DurableCodec.decodeTarget(row.target, identity: row.identity) } catch { return fail(error) }
        guard let name = row.provider, let provider = router.providers[name] else {
            return fail(NorqError(.unknownProvider,
                                  "provider \"\(row.provider ?? "?")\" is not configured in this instance"))
        }
        // Claims beyond what the retry policy allows (their holders lost the leases while sending: a crash loop)
        // end the row instead of sending again.
        let allowed = DurableWorker.allowedClaims(retries: provider.policy.retry.retries)
        guard row.attempts <= allowed else {
            return fail(NorqError(.storeAttemptsExhausted,
                                  "claimed \(row.attempts) times (at most \(allowed)): earlier workers lost their leases while sending",
                                  possiblyProcessed: row.mayHaveBeenDelivered))
        }
        let job = DeliveryJob(position: row.position, target: target, recipientID: row.recipientID,
                              provider: provider, plan: plan)
        // Rows enqueued before stop 31 carry their message id; later ones make it again from the send's key.
        let requestID = row.messageID ?? job.requestID
        let request: PreparedRequest
        do {
            request = try router.prepareRequest(target: target, provider: provider, plan: plan, requestID: requestID)
        } catch {
            return fail(error)
        }
        // The attempt is bounded by the send's deadline and, inside the provider, by its own request timeout
        // (`timeout:` in its configuration); never by the lease, which the heartbeat renews for as long as the row
        // is held. (Capping it at half the lease re-sent every push to a service slower than that.)
        let started = router.clock.now()
        let prepared = PreparedJob(job: consume job, request: consume request,
                                   deadline: started.advanced(by: plan.options.deadline))
        send(TargetAttempt(row: row, lease: lease, prepared: prepared, requestID: requestID, router: router,
                           batch: batch, feeder: feeder, batcher: item.batcher),
             started: started, requeues: 0, ambiguous: false)
        return true
    }

    private func send(_ attempt: TargetAttempt, started: ContinuousClock.Instant, requeues: Int, ambiguous: Bool) {
        let router = attempt.router
        let provider = attempt.prepared.job.provider
        router.metrics.count("sent", provider: provider.name)
        router.metrics.inFlightChanged(by: 1)
        if let batcher = attempt.batcher {
            // Grouped with the batch's other attempts to this provider into its requests (up to its
            // `maxBatchSize` targets, a short linger); each attempt still gets its own answer. The linger timers
            // run as child tasks of the batch's group.
            batcher.submit(attempt.prepared, timers: { wait in attempt.batch.wait(wait) }) { answer in
                self.answered(answer, attempt, started: started, requeues: requeues, ambiguous: ambiguous)
            }
            return
        }
        provider.startDelivery(attempt.prepared.request, deadline: attempt.prepared.deadline) { answer in
            self.answered(answer, attempt, started: started, requeues: requeues, ambiguous: ambiguous)
        }
    }

    /// One attempt's answer. An attempt the server provably did not process (refused stream, above a GOAWAY's last
    /// stream id, a connection closed before the request was written) is re-sent within this claim at once
    /// (backing off when refused again), bounded by the send's deadline, without spending the retry budget: the
    /// lease is held by the heartbeat meanwhile, and nothing reaches the store for it (issue 30's rule, as the
    /// in-memory router). Anything else is the row's completion.
    private func answered(_ answer: Result<DeliveryResponse, NorqError>, _ attempt: TargetAttempt,
                          started: ContinuousClock.Instant, requeues: Int, ambiguous: Bool) {
        let router = attempt.router
        router.metrics.inFlightChanged(by: -1)
        var ambiguous = ambiguous
        if case .failure(let error) = answer, error.possiblyProcessed { ambiguous = true }
        let step = router.afterAttempt(answer, attempt: attempt.prepared, attempts: attempt.row.attempts + requeues,
                                       started: started, earlierPossiblyProcessed: ambiguous, requeues: requeues)
        if case .retry(let delay, _, let lastError, _) = step, NotificationRouter.isRequeue(lastError), !isStopping,
           router.clock.now() < attempt.prepared.deadline {
            guard delay > .zero else {
                return send(attempt, started: started, requeues: requeues + 1, ambiguous: ambiguous)
            }
            attempt.batch.wait { [ambiguous] in
                do {
                    try await Task.sleep(for: delay)
                } catch {
                    return self.ended(attempt, self.completion(step, attempt, ambiguous: ambiguous))
                }
                self.send(attempt, started: started, requeues: requeues + 1, ambiguous: ambiguous)
            }
            return
        }
        ended(attempt, completion(step, attempt, ambiguous: ambiguous))
    }

    /// The row's completion after its last attempt of this claim.
    private func completion(_ step: NotificationRouter.AttemptStep, _ attempt: TargetAttempt,
                            ambiguous: Bool) -> RowCompletion {
        let row = attempt.row
        // Read in place (`attempt.prepared.request`), not copied: a copy of a prepared request retains each of its
        // fields (a few percent of the worker's CPU per push).
        let mayHaveBeenDelivered = row.mayHaveBeenDelivered || ambiguous
        switch step {
        case .done(let result, let lastResponse):
            let outcome = attempt.router.finish(attempt.prepared, result: result, attempts: row.attempts,
                                                lastResponse: lastResponse)
            var stored = DurableCodec.stored(outcome.result, messageID: attempt.requestID,
                                             mayHaveBeenDelivered: mayHaveBeenDelivered)
            // The id sent is made again by readers (`DurableCodec.withMessageIDs`): a delivered target whose answer
            // carries it costs its segment one bit, not the id.
            if stored.state == .delivered, stored.messageID == attempt.requestID { stored.messageID = nil }
            // Only accepted (a ticket): on to a receipt segment, when the provider fetches receipts.
            if let waiting = awaitingReceipt(stored, lease: attempt.lease, provider: attempt.prepared.job.provider) {
                return waiting
            }
            // The environment the attempt went to: a token-invalid answer is recorded for it only (issue 29).
            return .finish(attempt.lease, stored.attempted(in: attempt.prepared.request.environment))
        case .retry(let delay, let lastResponse, let lastError, _):
            let last = DurableCodec.stored(NotificationRouter.finalResult(lastResponse, lastError,
                                                                          request: attempt.prepared.request),
                                           messageID: attempt.requestID, mayHaveBeenDelivered: mayHaveBeenDelivered)
            return .retry(attempt.lease, at: DeliveryStoreRules.retryAt(now: delivery.clock.nowMillis(), delay: delay),
                          last: last)
        }
    }
}
