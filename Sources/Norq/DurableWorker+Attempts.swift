import NorqCore
import NorqStore
import Synchronization
import Tracing
import NorqSpanAttributes

// The attempts of one claimed batch, without a task per target: each attempt is started by a call and answered in
// the provider's completion (for APNs on the connection's event loop), as `DeliveryPump` delivers a send without a
// store. The completion decides the row's completion (`RowCompletion`) and hands it to the batch's one consumer,
// which records them at checkpoints. Only the rare waits (a re-queue's backoff) and the checkpoint timer run in
// child tasks of the batch's task group. (A task and a continuation per target cost the worker about a fifth of
// its CPU per push: `Benchmarks/README.md`, "stop 31".) At most `attemptWindow` attempts of a lane are in flight:
// the lane starts the first ones, and each attempt that ends starts the next row from its completion, on the thread
// that answered it (stop 32), from the lane's next batch when this one has none left (`LaneFeeder`, stop 34).

extension DurableWorker {
    /// What the attempts of a batch hand to its consumer, and the consumer takes in one go.
    struct BatchEvents: Sendable {
        var completions: [RowCompletion] = []
        /// Child tasks to start: a re-queue's backoff.
        var waits: [@Sendable () async -> Void] = []
        /// The checkpoint timer fired.
        var tick = false
        /// The lane asks for the completions to be written now (`LaneFeeder.Signal`).
        var flush = false

        var isEmpty: Bool { completions.isEmpty && waits.isEmpty && !tick && !flush }
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
                return state.window == 1 || state.window >= minimum || state.remaining <= 0 || state.events.flush
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

        /// Asks the consumer to write the completions it holds now; when it holds none yet, with the next one.
        func flush() {
            deliver { state in
                state.events.flush = true
                return state.window > 0
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

    /// One target's attempts: what each of them needs (one object per target).
    final class TargetAttempt: Sendable {
        let row: OutboxRow
        let lease: Lease
        let prepared: PreparedJob
        let requestID: String
        let router: NotificationRouter
        let batch: AttemptBatch
        let feeder: Feeder
        /// The provider's request grouper when it sends many targets per request (Expo), nil otherwise.
        let batcher: RequestBatcher?
        /// The parent of its attempts' spans (the claim's); nil when the router does not trace.
        let trace: DeliveryTracing.Parent?

        init(row: OutboxRow, lease: Lease, prepared: PreparedJob, requestID: String, router: NotificationRouter,
             batch: AttemptBatch, feeder: Feeder, batcher: RequestBatcher?, trace: DeliveryTracing.Parent?) {
            self.trace = trace
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

    /// A claimed batch whose rows are in the lane's feeder: what ``record(_:feeder:)`` needs to write its outcomes.
    struct StartedBatch: Sendable {
        let router: NotificationRouter
        let leases: HeldLeases
        let attempts: AttemptBatch
        let polls: [(row: OutboxRow, lease: Lease)]
        let rule: CheckpointRule
    }

    /// Starts a claimed batch: reads its sends' plans, opens a `norq.claim` span per send when the router traces,
    /// queues its rows in the lane's feeder (rows that cannot be sent get their completion at once; rows waiting for
    /// a receipt are polled, not sent by the feeder) and starts what the lane's window allows.
    func startBatch(_ rows: [OutboxRow], router: NotificationRouter, leases: HeldLeases, feeder: Feeder,
                    claimed: DefaultTracerClock.Instant? = nil) async -> StartedBatch {
        let plans = await plans(for: rows.map(\.sendID))
        // One `norq.claim` span per send of the batch (from the claim's start to now: the store's claim and the
        // plans read), a child of the context stored with the send; its rows' attempts are the claim's children.
        var claims: [String: DeliveryTracing.Parent] = [:]
        if let recorder = router.spanRecorder {
            var rowsPerSend: [String: Int] = [:]
            rowsPerSend.reserveCapacity(rows.count)
            for row in rows where row.lease != nil { rowsPerSend[row.sendID, default: 0] += 1 }
            claims.reserveCapacity(rowsPerSend.count)
            let start = claimed ?? DefaultTracerClock.now
            for (sendID, count) in rowsPerSend {
                guard case .plan(let plan)? = plans[sendID] else { continue }
                let span = recorder.startSpan(DeliveryTracing.claimSpan, context: plan.trace ?? .topLevel,
                                              ofKind: .consumer, at: start)
                claims[sendID] = DeliveryTracing.Parent(span, recorder: recorder)
                if span.isRecording {
                    var attributes = SpanAttributeList(capacity: 3)
                    attributes.add("norq.send.id", .string(sendID))
                    attributes.add("norq.rows", .int(Int64(count)))
                    attributes.add("norq.worker", .string(name))
                    recorder.end(span, attributes: attributes)
                } else {
                    recorder.end(span)
                }
            }
        }
        let held = rows.reduce(0) { $0 + ($1.lease == nil ? 0 : 1) }
        let rule = CheckpointRule(batchSize: rows.count)
        let batch = AttemptBatch(rows: held, minimum: rule.minimumCompletions)
        // Per provider that sends many targets per request (``BatchPushProvider``): the grouper of this batch's
        // attempts into its requests, as the router's `DeliveryPump` has one per send.
        var batchers: [String: RequestBatcher] = [:]
        for (name, provider) in router.providers {
            if let batcher = RequestBatcher(provider: provider, clock: router.clock) { batchers[name] = batcher }
        }
        var startable: [LaneRow] = []
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
                startable.append(LaneRow(row: row, lease: lease, plan: plan, batch: batch, leases: leases, router: router,
                                                 batcher: row.provider.flatMap { batchers[$0] },
                                                 trace: claims[row.sendID]))
            case .unreadable(let error):
                batch.complete(fail(row, lease: lease, error, router: router))
            case .unavailable:
                batch.complete(.release(lease))
            }
        }
        // Started as the lane's window allows: at once up to what is owed, then one per attempt that ends (`feed`).
        drain(feeder, from: feeder.append(startable, held: held, batch: batch))
        return StartedBatch(router: router, leases: leases, attempts: batch, polls: polls, rule: rule)
    }

    /// Records a started batch's outcomes as they come: whenever `CheckpointRule` says so (enough completions, or the
    /// oldest waited long enough) or the lane asks (the batch's last queued row was taken, or a start waits for the
    /// lane's unrecorded bound), so a crash re-sends at most what was in flight or waiting for the next checkpoint;
    /// the rest when the last attempt has ended.
    func record(_ started: StartedBatch, feeder: Feeder) async {
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
                // Starts that waited for the lane's unrecorded bound may go now.
                drain(feeder, from: feeder.recorded(written.count))
            }
            while let events = await batch.next() {
                for wait in events.waits { group.addTask { await wait() } }
                if events.tick { ticking = false }
                if !events.completions.isEmpty {
                    waiting += events.completions
                    if oldest == nil { oldest = .now }
                }
                if let since = oldest,
                   events.flush || rule.isDue(waiting: waiting.count, oldestWaited: since.duration(to: .now)) {
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
        feeder.ended(batch)
    }

    /// Attempts of a lane in flight at once: the router's largest `maxInFlight` shared by the lanes (a claim of
    /// 500 on each of 4 lanes no longer puts 2,000 requests in the providers' queues at once).
    func attemptWindow(_ router: NotificationRouter) -> Int {
        max(1, (router.providers.values.map(\.policy.maxInFlight).max() ?? 1_000) / lanes)
    }

    /// Starts the lane's next rows that can be sent, one per start owed (`count` more now): rows that cannot (an
    /// unreadable target, a crash loop) get their completion and the next is tried; once the worker is stopping,
    /// every row not started is given back.
    func feed(_ feeder: Feeder, count: Int = 1) {
        drain(feeder, from: feeder.owe(count))
    }

    /// Drains what `feeder` owes, starting with `first` (the row it handed this caller, if any), and passes on what
    /// each take signals (a batch to write its completions now).
    func drain(_ feeder: Feeder, from first: (LaneRow?, LaneSignal)) {
        var (next, signal) = first
        signal.send()
        // A row is started only while its lease holds for a third of the lease duration more (the heartbeat renews
        // at every third: less left means the heartbeat is late, the process was paused or the database is away).
        let margin = (settings.leaseDuration / 3).wholeMilliseconds
        while let item = next {
            if isStopping {
                // Claimed but not started: given back at once (its start is owed again: the next row is tried).
                item.batch.complete(.release(item.lease))
                feeder.refund()
            } else if !item.leases.allowsStart(of: item.lease, now: delivery.clock.nowMillis(), margin: margin) {
                // Its lease expired or was taken over while it waited in the lane's queue: not sent here (the
                // worker holding it now sends it); given back in case it is still ours.
                item.batch.complete(.release(item.lease))
                feeder.refund()
            } else if !start(item, feeder: feeder) {
                feeder.refund()
            }
            (next, signal) = feeder.next()
            signal.send()
        }
    }

    /// An attempt's last answer of this claim: its completion, then the lane's next row.
    private func ended(_ attempt: TargetAttempt, _ completion: RowCompletion) {
        attempt.batch.complete(completion)
        feed(attempt.feeder)
    }

    /// Prepares a row's request and sends it (true); a row that cannot be sent gets its completion at once (false).
    private func start(_ item: LaneRow, feeder: Feeder) -> Bool {
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
                           batch: batch, feeder: feeder, batcher: item.batcher, trace: item.trace),
             started: started, requeues: 0, ambiguous: false)
        return true
    }

    private func send(_ attempt: TargetAttempt, started: ContinuousClock.Instant, requeues: Int, ambiguous: Bool) {
        let router = attempt.router
        let provider = attempt.prepared.job.provider
        router.metrics.count("sent", provider: provider.name)
        router.metrics.inFlightChanged(by: 1)
        // The attempt's span (only when the router traces): a child of the claim of its send.
        let span = DeliveryTracing.startAttempt(router, parent: attempt.trace, job: attempt.prepared.job,
                                                attempt: attempt.row.attempts + requeues, sendID: attempt.row.sendID)
        if let batcher = attempt.batcher {
            // Grouped with the batch's other attempts to this provider into its requests (up to its
            // `maxBatchSize` targets, a short linger); each attempt still gets its own answer. The linger timers
            // run as child tasks of the batch's group.
            batcher.submit(attempt.prepared, timers: { wait in attempt.batch.wait(wait) }) { answer in
                self.answered(answer, attempt, started: started, requeues: requeues, ambiguous: ambiguous, span: span)
            }
            return
        }
        provider.startDelivery(attempt.prepared.request, deadline: attempt.prepared.deadline) { answer in
            self.answered(answer, attempt, started: started, requeues: requeues, ambiguous: ambiguous, span: span)
        }
    }

    /// One attempt's answer. An attempt the server provably did not process (refused stream, above a GOAWAY's last
    /// stream id, a connection closed before the request was written) is re-sent within this claim at once
    /// (backing off when refused again), bounded by the send's deadline, without spending the retry budget: the
    /// lease is held by the heartbeat meanwhile, and nothing reaches the store for it (issue 30's rule, as the
    /// in-memory router). Anything else is the row's completion.
    private func answered(_ answer: Result<DeliveryResponse, NorqError>, _ attempt: TargetAttempt,
                          started: ContinuousClock.Instant, requeues: Int, ambiguous: Bool,
                          span: DeliveryTracing.AttemptSpan?) {
        let router = attempt.router
        router.metrics.inFlightChanged(by: -1)
        var ambiguous = ambiguous
        if case .failure(let error) = answer, error.possiblyProcessed { ambiguous = true }
        let step = router.afterAttempt(answer, attempt: attempt.prepared, attempts: attempt.row.attempts + requeues,
                                       started: started, earlierPossiblyProcessed: ambiguous, requeues: requeues)
        if let span { DeliveryTracing.endAttempt(span, answer: answer, step: step) }
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
