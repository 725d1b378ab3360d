import NorqCore
import NorqStore
public import ServiceLifecycle
import Logging
import Synchronization
import Tracing

/// Delivers the outbox of a `DurableDelivery`: claims batches of due rows under a lease, makes one attempt per row
/// through the router's providers, and completes the batch with one compare-and-set per row on its lease.
///
/// - A failed attempt that the provider's retry policy retries goes back to the outbox with `next_attempt_at`
///   (the backoff survives restarts); the attempt count lives in the row, so a crash loop is bounded too.
/// - Leases are renewed while a batch is in flight; a worker that loses a lease (paused, lost database) cannot
///   finish the row: the one that took it over does, with the same message id.
/// - Graceful shutdown stops claiming, lets the attempts in flight finish (each has a deadline), completes them,
///   and releases rows that were claimed but not started.
/// - A lost database never crashes the worker: claims back off and retry; completions are retried until the
///   database answers (rows whose lease was taken meanwhile are finished by their new holder).
///
/// Background work (the lanes, the heartbeats, the pruner) is owned by `run()`'s task group.
public final class DurableWorker: Service {
    public let delivery: DurableDelivery
    /// The lease owner written in claimed rows (host, process and a random suffix).
    public let name: String
    /// Batches in flight at once (each up to `settings.claimBatchSize` rows).
    public let lanes: Int
    /// Extra wake-ups (PostgreSQL LISTEN/NOTIFY): each element is a hint to look for due rows now.
    let hints: AsyncStream<Void>?
    private let stopping = Atomic<Bool>(false)
    private let stopSignal = WakeSignal()
    var logger: Logger { delivery.logger }
    var settings: DeliveryStoreSettings { delivery.settings }

    public init(delivery: DurableDelivery, name: String? = nil, lanes: Int = 2, hints: AsyncStream<Void>? = nil) {
        self.delivery = delivery
        self.name = name ?? "worker-" + RequestID.random().prefix(8)
        self.lanes = max(1, lanes)
        self.hints = hints
    }

    /// Runs until graceful shutdown or cancellation.
    public func run() async throws {
        logger.info("durable worker started", metadata: ["norq.worker": "\(name)"])
        await withGracefulShutdownHandler {
            // Each child says whether it was the lanes' group: only their end ends the worker (a hint stream that
            // ends, e.g. one another worker consumed already, leaves the worker polling).
            await withTaskGroup(of: Bool.self) { outer in
                outer.addTask {
                    // The lanes and the pruner end once `stop()` was called and their batches are finished.
                    await withTaskGroup(of: Void.self) { group in
                        for lane in 0..<self.lanes {
                            group.addTask { await self.lane(lane) }
                        }
                        group.addTask { await self.prune() }
                        await group.waitForAll()
                    }
                    return true
                }
                if let hints {
                    outer.addTask {
                        for await _ in hints { self.delivery.enqueued.signal() }
                        return false
                    }
                }
                while let lanesEnded = await outer.next(), !lanesEnded {}
                // Only the hint reader can still be running: it ends when cancelled.
                outer.cancelAll()
            }
        } onGracefulShutdown: {
            self.stop()
        }
        logger.info("durable worker stopped", metadata: ["norq.worker": "\(name)"])
    }

    /// Asks the worker to stop: no new claims; batches in flight finish.
    public func stop() {
        stopping.store(true, ordering: .relaxed)
        stopSignal.latch()
        delivery.enqueued.signal()
    }

    var isStopping: Bool { stopping.load(ordering: .relaxed) || Task.isCancelled }

    // MARK: claiming

    /// One lane: claims a batch, queues its rows in the lane's feeder (``LaneFeeder``: at most `attemptWindow`
    /// attempts in flight, at most `claimBatchSize` rows taken and not recorded), and claims the next batch as soon as
    /// at most half a window of rows is left to start, so the claim's round trip and a batch's last answers overlap
    /// with the next batch's first requests instead of leaving the lane idle between batches (stop 34). Each batch
    /// keeps its own leases, heartbeat and checkpoints; at most two are unfinished per lane (one ending, one starting).
    private func lane(_ index: Int) async {
        var failures = 0
        let feeder = Feeder(window: attemptWindow(delivery.router), unrecordedLimit: settings.claimBatchSize)
        await withTaskGroup(of: Void.self) { batches in
            var unfinished = 0
            while !isStopping {
                if unfinished >= 2 {
                    // The older batch ends first (its rows were all taken): at most two per lane.
                    await batches.next()
                    unfinished -= 1
                    continue
                }
                if delivery.router.isShuttingDown {
                    // Its attempts would be given back at once: wait for this worker's own stop instead of spinning.
                    await stopSignal.wait(upTo: settings.pollInterval)
                    continue
                }
                let rows: [OutboxRow]
                let now = delivery.clock.nowMillis()
                // When the claim began: the start of its `norq.claim` spans (read only when the router traces).
                let claimed = delivery.router.tracer == nil ? nil : DefaultTracerClock.now
                do throws(NorqError) {
                    rows = try await delivery.store.claim(
                        owner: name, limit: settings.claimBatchSize, now: now,
                        leaseUntil: DeliveryStoreRules.leaseExpiry(now: now, leaseDuration: settings.leaseDuration))
                    failures = 0
                } catch {
                    failures += 1
                    let delay = Self.backoff(failures: failures, base: settings.pollInterval)
                    logger.notice("claiming failed; retrying", metadata: ["norq.error": "\(error.code)",
                                                                          "norq.retry-in": "\(delay)"])
                    await stopSignal.wait(upTo: delay)
                    continue
                }
                if rows.isEmpty {
                    await delivery.enqueued.wait(upTo: settings.pollInterval)
                    continue
                }
                // The batch is counted on its router (once, not per row): a router replaced by a reload waits for
                // the batch's attempts before closing its providers. A router shutting down gets none: the rows go
                // back.
                guard let router = delivery.enterRouter() else {
                    await finish(rows.compactMap { $0.lease.map(RowCompletion.release) })
                    continue
                }
                // A row's lease is renewed until its outcome is recorded (not only while its attempt runs): `held`
                // loses a row only once its completion was written (or found taken over).
                let leases = HeldLeases(rows.compactMap(\.lease),
                                        until: DeliveryStoreRules.leaseExpiry(now: now, leaseDuration: settings.leaseDuration))
                let started = await startBatch(rows, router: router, leases: leases, feeder: feeder, claimed: claimed)
                unfinished += 1
                batches.addTask { await self.run(started, feeder: feeder) }
                // Claim again once at most half a window of rows is left to start.
                await feeder.waitUntilLow()
            }
            await batches.waitForAll()
        }
    }

    /// How many claims a row may have: the attempts of the retry policy and 3 more for leases lost while sending.
    static func allowedClaims(retries: Int) -> Int { max(0, retries) + 1 + 3 }

    /// Exponential backoff for a lost database: the poll interval doubled per failure, at most 5 s.
    static func backoff(failures: Int, base: Duration) -> Duration {
        min(.seconds(5), base * (1 << min(max(failures - 1, 0), 8)))
    }

    // MARK: one batch

    /// Runs a started batch until every outcome is recorded, renewing its leases meanwhile.
    private func run(_ started: StartedBatch, feeder: Feeder) async {
        defer { started.router.endSend() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.heartbeat(started.leases) }
            await self.record(started, feeder: feeder)
            group.cancelAll()  // every outcome is recorded: stop the heartbeat
        }
    }

    /// Renews the held leases every third of the lease duration until cancelled (when every outcome of the batch is
    /// recorded); a renewal that fails is tried again sooner (backoff from the poll interval), never later than the
    /// next period.
    private func heartbeat(_ leases: HeldLeases) async {
        let period = settings.leaseDuration / 3
        var wait = period
        var failures = 0
        while !Task.isCancelled {
            do { try await Task.sleep(for: wait) } catch { break }
            let held = leases.held.withLock { Array($0.values) }
            if held.isEmpty {
                wait = period
                continue
            }
            let now = delivery.clock.nowMillis()
            do {
                let until = DeliveryStoreRules.leaseExpiry(now: now, leaseDuration: settings.leaseDuration)
                let renewed = try await delivery.store.renew(held, until: until)
                leases.renewed(until: until)
                failures = 0
                wait = period
                if renewed.count < held.count {
                    // Taken over (or finished meanwhile by this worker's own checkpoint): not renewed again.
                    let lost = held.filter { !renewed.contains($0.rowID) }
                    leases.held.withLock { current in
                        for lease in lost where current[lease.rowID] == lease { current.removeValue(forKey: lease.rowID) }
                    }
                    logger.debug("leases not renewed", metadata: ["norq.rows": "\(lost.count)"])
                }
            } catch {
                failures += 1
                wait = min(period, Self.backoff(failures: failures, base: settings.pollInterval))
                logger.notice("renewing leases failed; retrying", metadata: ["norq.error": "\(error.code)",
                                                                            "norq.retry-in": "\(wait)"])
            }
        }
    }

    /// What reading a send's plan gave.
    enum PlanLookup: Sendable {
        case plan(SendPlan)
        /// The send is missing or its content cannot be decoded: its rows fail (`store/failed`).
        case unreadable(NorqError)
        /// The store did not answer: the rows are given back and tried again later.
        case unavailable(NorqError)
    }

    /// The plans (content, options, key) of a batch's sends, read with one store call.
    func plans(for sendIDs: [String]) async -> [String: PlanLookup] {
        let all = Set(sendIDs)
        var plans = delivery.recentPlans.plans(for: all).mapValues(PlanLookup.plan)
        let unique = all.subtracting(plans.keys)
        guard !unique.isEmpty else { return plans }
        let sends: [String: StoredSend]
        do {
            sends = try await delivery.store.sends(ids: Array(unique))
        } catch {
            logger.notice("could not read the sends of a batch; its rows are given back",
                          metadata: ["norq.sends": "\(unique.count)", "norq.error": "\(error.code)"])
            for sendID in unique { plans[sendID] = .unavailable(error) }
            return plans
        }
        for sendID in unique {
            guard let send = sends[sendID] else {
                plans[sendID] = .unreadable(NorqError(.storeFailed, "the send \(sendID) is missing"))
                continue
            }
            do {
                let stored = try DurableCodec.decodePlan(send.content)
                // The stored context of the request that enqueued it: the claim's and attempts' parent.
                let trace = delivery.router.tracer.flatMap { DeliveryTracing.context(from: stored.trace, tracer: $0) }
                plans[sendID] = .plan(SendPlan(content: stored.content, templateName: stored.templateName,
                                               options: stored.options, trace: trace))
            } catch {
                logger.notice("could not decode a send", metadata: ["norq.send": "\(sendID)", "norq.error": "\(error.code)"])
                plans[sendID] = .unreadable(NorqError(.storeFailed, "the send \(sendID) could not be read: \(error.message)"))
            }
        }
        return plans
    }

    /// The row finished as failed with `error`.
    func fail(_ row: OutboxRow, lease: Lease, _ error: NorqError, router: NotificationRouter) -> RowCompletion {
        router.countFinal(.failed(error), provider: row.provider)
        return .finish(lease, DurableCodec.stored(.failed(error), messageID: row.messageID,
                                                  mayHaveBeenDelivered: row.mayHaveBeenDelivered))
    }

    /// Writes a batch's completions, retrying while the database is unreachable (bounded: after ten lease
    /// durations the rows are left to expire and be taken over).
    func finish(_ completions: [RowCompletion]) async {
        guard !completions.isEmpty else { return }
        let giveUp = ContinuousClock.now.advanced(by: settings.leaseDuration * 10)
        var failures = 0
        while true {
            do {
                let report = try await delivery.store.complete(completions, now: delivery.clock.nowMillis())
                if !report.lost.isEmpty {
                    logger.notice("rows taken over by another worker were not finished here",
                                  metadata: ["norq.rows": "\(report.lost.count)"])
                }
                delivery.completed.signal()
                return
            } catch {
                failures += 1
                guard ContinuousClock.now < giveUp, !Task.isCancelled else {
                    logger.notice("could not record outcomes; their leases will expire and the rows be re-sent",
                                   metadata: ["norq.rows": "\(completions.count)", "norq.error": "\(error.code)"])
                    return
                }
                let delay = Self.backoff(failures: failures, base: settings.pollInterval)
                logger.notice("recording outcomes failed; retrying", metadata: ["norq.error": "\(error.code)",
                                                                                "norq.retry-in": "\(delay)"])
                try? await Task.sleep(for: delay)
            }
        }
    }

    // MARK: pruning

    /// Every minute: deletes history older than the retention, in batches of 10,000 (never one unbounded DELETE).
    private func prune() async {
        while !isStopping {
            let now = delivery.clock.nowMillis()
            let before = DeliveryStoreRules.pruneBefore(now: now, retention: settings.retention)
            do {
                while !isStopping, try await delivery.store.prune(finishedBefore: before, limit: 10_000) == 10_000 {}
            } catch {
                logger.notice("pruning history failed", metadata: ["norq.error": "\(error.code)"])
            }
            await stopSignal.wait(upTo: .seconds(60))
        }
    }
}

/// The leases of a batch not finished yet (what the heartbeat renews), and until when they were last known to hold.
final class HeldLeases: Sendable {
    let held: Mutex<[Int64: Lease]>
    /// The lease expiry (store clock, ms) of the claim or of the last renewal that succeeded.
    private let expiry: Atomic<Int64>

    init(_ leases: [Lease], until expiry: Int64 = .max) {
        held = Mutex(Dictionary(leases.map { ($0.rowID, $0) }, uniquingKeysWith: { first, _ in first }))
        self.expiry = Atomic(expiry)
    }

    /// The held leases were renewed until `until`.
    func renewed(until: Int64) { expiry.store(until, ordering: .relaxed) }

    /// Whether a row waiting to start may still be sent: its lease is held, and holds for more than `margin` ms
    /// after `now` (a process paused past its leases, or a heartbeat that could not reach the database, must not
    /// send rows another worker may have taken over meanwhile).
    func allowsStart(of lease: Lease, now: Int64, margin: Int64) -> Bool {
        guard expiry.load(ordering: .relaxed) - now > margin else { return false }
        return held.withLock { $0[lease.rowID] == lease }
    }
}
