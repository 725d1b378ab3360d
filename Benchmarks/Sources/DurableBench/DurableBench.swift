#if canImport(Glibc)
import Glibc
#endif
import BenchSupport
import Foundation
import Logging
import Norq
import NorqAPNs
import NorqCore
import NorqStore
import NorqStorePostgres
import NorqStoreSQLite
import Synchronization

/// `--mode durable` (issue 18): durable delivery through a `DeliveryStore` (SQLite or PostgreSQL), one JSON line per
/// phase (`--phases`, in this order):
///
/// - `enqueue`: one bulk send of `--count` pushes through `DurableDelivery.enqueue` (render, routing, message ids,
///   one transaction with multi-row inserts); enqueued rows/s.
/// - `deliver`: a `DurableWorker` (`--lanes`, `--claim-batch`) claims, delivers (APNs provider, TLS HTTP/2) and
///   completes the rows the enqueue phase left; delivered pushes/s over all of them, and the wall time spent in
///   claim and complete calls.
/// - `store`: the store alone: enqueue `--count` rows, then claim and complete them (finished as delivered) in
///   batches with no delivery; CPU of this process plus the database server (`--db-pid`) per 10,000 pushes.
/// - `latency`: an open-loop producer enqueues `--latency-count` pushes at `--rate` pushes/s in sends of
///   `--send-size` tokens while the worker delivers; enqueue-call-start to provider-send-start (the request's
///   first byte is written right after) and to the answer, p50/p99.
///
/// `--mode durable-recovery`: crash recovery. Enqueues `--count` pushes, starts a second instance of this binary
/// (`--mode durable-hold`, a worker delivering the same outbox), kills it with SIGKILL after `--kill-after`
/// seconds while it holds leases, and measures until this instance has re-sent every row the killed one held.
package struct DurableBench {
    package let options: Options
    package init(options: Options) { self.options = options }

    // MARK: - Setup

    var settings: DeliveryStoreSettings {
        DeliveryStoreSettings(leaseDuration: .milliseconds(Int64(options.leaseSeconds * 1000)),
                              callTimeout: .seconds(30), claimBatchSize: options.claimBatch,
                              pollInterval: .milliseconds(options.pollMillis), poolSize: options.poolSize)
    }

    /// Opens (and migrates) the store of `--store` for the duration of `body`; PostgreSQL's pool runs meanwhile.
    func withStore<T: Sendable>(_ body: @escaping @Sendable (MeasuredStore, PostgresDeliveryStore?) async throws -> T) async throws -> T {
        guard let spec = options.store else { throw BenchError("--mode durable needs --store sqlite:PATH or postgres://...") }
        let logger = RouterBench.quietLogger("norq.bench.store")
        if spec.hasPrefix("postgres://") || spec.hasPrefix("postgresql://") {
            let store = PostgresDeliveryStore(configuration: try PostgresStoreConfiguration(url: spec), settings: settings,
                                              logger: logger)
            return try await store.withMigrated { try await body(MeasuredStore($0), $0) }
        }
        let path = spec.hasPrefix("sqlite:") ? String(spec.dropFirst("sqlite:".count)) : spec
        return try await SQLiteDeliveryStore.withMigrated(path: path, settings: settings, logger: logger) {
            try await body(MeasuredStore($0), nil)
        }
    }

    /// The router (APNs to `--endpoint`), wrapped to time each token from its enqueue.
    func makeRouter(clock: TokenClock) throws -> (NotificationRouter, JSONValue) {
        try RouterBench.makeRouter(options, provider: TokenTimedProvider(inner: RouterBench.makeAPNsProvider(options),
                                                                         clock: clock))
    }

    func durable(_ router: NotificationRouter, _ store: MeasuredStore) -> DurableDelivery {
        DurableDelivery(router: router, store: store, settings: settings,
                        logger: RouterBench.quietLogger("norq.bench.durable"))
    }

    func base(_ phase: String) -> RunResult {
        var result = RunResult()
        result.add("client", "norq-durable")
        result.add("phase", phase)
        if let label = options.label { result.add("label", label) }
        result.add("store", options.store.map { $0.hasPrefix("postgres") ? "postgres" : "sqlite" } ?? "?")
        result.add("load_1m", LoadAverage.oneMinute(), digits: 2)
        return result
    }

    // MARK: - Phases

    package func run() async throws -> [String] {
        let phases = options.phases.split(separator: ",").map(String.init)
        let options = self.options
        return try await withStore { store, postgres in
            let clock = TokenClock(capacity: max(options.count, options.latencyCount))
            let (router, data) = try self.makeRouter(clock: clock)
            let durable = self.durable(router, store)
            var lines: [String] = []
            var pendingSend: (id: String, count: Int)?
            do {
                for phase in phases {
                    switch phase {
                    case "enqueue":
                        let (result, sendID) = try await self.enqueuePhase(durable, data: data)
                        pendingSend = (sendID, options.count)
                        lines.append(result.json)
                    case "deliver":
                        guard let pending = pendingSend else { throw BenchError("the deliver phase needs the enqueue phase first") }
                        lines.append(try await self.deliverPhase(durable, store: store, hints: postgres?.hints,
                                                                 count: pending.count).json)
                        pendingSend = nil
                    case "store":
                        lines.append(try await self.storePhase(durable, store: store, data: data).json)
                    case "latency":
                        lines.append(try await self.latencyPhase(durable, store: store, clock: clock, data: data,
                                                                 hints: postgres?.hints).json)
                    default: throw BenchError("unknown phase \(phase): enqueue, deliver, store, latency")
                    }
                    FileHandleErr.write("norq-bench durable: \(phase) done\n")
                }
            } catch {
                await router.shutdown(gracePeriod: .seconds(1))
                throw error
            }
            await router.shutdown(gracePeriod: .seconds(5))
            return lines
        }
    }

    /// One bulk send of `--count` pushes.
    func enqueuePhase(_ durable: DurableDelivery, data: JSONValue) async throws -> (RunResult, String) {
        // The recipients are made as the enqueue reads them, as a caller streaming them from its own database
        // would (`enqueue` takes any sequence): the peak RSS is the enqueue's, not a `[Recipient]` of the caller's
        // (277 MB for a million). `--eager-recipients` builds the array first, as before.
        let range = 0..<options.count
        let eager = options.eagerRecipients ? RouterBench.recipients(range) : nil
        let recipients = eager.map { AnySequence($0) } ?? AnySequence(range.lazy.map {
            Recipient(tokens: [PushToken(token: BenchTokens.token($0), platform: .ios)])
        })
        let rssBefore = ProcessStats.currentRSSMegabytes()
        let db = ProcessTreeCPU(root: options.dbPID)
        let cpu = ProcessStats.cpuSeconds(), dbCPU = db.seconds()
        let start = ContinuousClock.now
        let receipt = try await durable.enqueue(template: options.template, data: data, to: recipients)
        let elapsed = start.duration(to: .now).seconds
        var result = base("enqueue")
        result.add("rss_before_mb", rssBefore, digits: 1)
        result.add("peak_rss_mb", ProcessStats.peakRSSMegabytes(), digits: 1)
        result.add("count", receipt.targetCount)
        result.add("seconds", elapsed)
        result.add("rows_per_s", Double(receipt.targetCount) / elapsed, digits: 0)
        result.add("cpu_s", ProcessStats.cpuSeconds() - cpu)
        result.add("db_cpu_s", db.seconds() - dbCPU)
        return (result, receipt.sendID)
    }

    /// Runs a worker until `count` more rows are finished; returns the time it took.
    func drain(_ durable: DurableDelivery, store: MeasuredStore, hints: AsyncStream<Void>?, count: Int,
               while work: (@Sendable () async throws -> Void)? = nil) async throws -> Duration {
        let target = store.finished + count
        let worker = DurableWorker(delivery: durable, name: options.workerName, lanes: options.lanes, hints: hints)
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await worker.run() }
            if let work { group.addTask { try await work() } }
            let reached = await store.waitForFinished(target, timeout: .seconds(options.timeout * 10))
            worker.stop()
            try await group.waitForAll()
            if !reached { throw BenchError("only \(store.finished - (target - count)) of \(count) rows finished in time") }
        }
        return start.duration(to: .now)
    }

    func deliverPhase(_ durable: DurableDelivery, store: MeasuredStore, hints: AsyncStream<Void>?,
                      count: Int) async throws -> RunResult {
        let db = ProcessTreeCPU(root: options.dbPID)
        let cpu = ProcessStats.cpuSeconds(), dbCPU = db.seconds()
        store.resetTimes()
        let outcomesBefore = store.outcomes
        let elapsed = try await drain(durable, store: store, hints: hints, count: count).seconds
        let times = store.times
        var result = base("deliver")
        result.add("count", count)
        result.add("lanes", options.lanes)
        result.add("claim_batch", options.claimBatch)
        result.add("in_flight", options.inFlight)
        result.add("seconds", elapsed)
        result.add("pushes_per_s", Double(count) / elapsed, digits: 0)
        let processCPU = ProcessStats.cpuSeconds() - cpu
        result.add("cpu_s", processCPU)
        result.add("cpu_s_per_10k", processCPU / Double(count) * 10_000, digits: 4)
        result.add("db_cpu_s", db.seconds() - dbCPU)
        result.add("claims", times.claims)
        result.add("claim_wall_s", times.claim.seconds)
        result.add("completes", times.completes)
        result.add("complete_wall_s", times.complete.seconds)
        var outcomes = store.outcomes
        for (key, value) in outcomesBefore { outcomes[key, default: 0] -= value }
        result.addObject("outcomes", outcomes.filter { $0.value != 0 })
        result.add("all_delivered", outcomes["delivered"] == count ? 1 : 0)
        return result
    }

    /// The store alone: claim + complete of `--count` rows with no delivery.
    func storePhase(_ durable: DurableDelivery, store: MeasuredStore, data: JSONValue) async throws -> RunResult {
        let receipt = try await durable.enqueue(template: options.template, data: data,
                                                to: RouterBench.recipients(0..<options.count))
        let db = ProcessTreeCPU(root: options.dbPID)
        let cpu = ProcessStats.cpuSeconds(), dbCPU = db.seconds()
        let start = ContinuousClock.now
        let owner = "bench-store-" + RequestID.random().prefix(6)
        var done = 0, claims = 0
        let lease = Int64(options.leaseSeconds * 1000)
        while done < receipt.targetCount {
            let now = StoreClock.system.nowMillis()
            let rows = try await store.claim(owner: owner, limit: options.claimBatch, now: now, leaseUntil: now + lease)
            if rows.isEmpty { break }
            claims += 1
            let completions = rows.compactMap { row in
                row.lease.map {
                    RowCompletion.finish($0, StoredOutcome(state: .delivered, status: 200, messageID: row.messageID))
                }
            }
            done += try await store.complete(completions, now: StoreClock.system.nowMillis()).applied.count
        }
        let elapsed = start.duration(to: .now).seconds
        let processCPU = ProcessStats.cpuSeconds() - cpu
        let serverCPU = db.seconds() - dbCPU
        var result = base("store")
        result.add("count", done)
        result.add("claim_batch", options.claimBatch)
        result.add("claims", claims)
        result.add("seconds", elapsed)
        result.add("rows_per_s", Double(done) / elapsed, digits: 0)
        result.add("cpu_s", processCPU)
        result.add("db_cpu_s", serverCPU)
        result.add("store_cpu_s_per_10k", (processCPU + serverCPU) / Double(max(done, 1)) * 10_000, digits: 4)
        result.add("all_finished", done == receipt.targetCount ? 1 : 0)
        return result
    }

    /// An open-loop producer at `--rate` pushes/s while the worker delivers.
    func latencyPhase(_ durable: DurableDelivery, store: MeasuredStore, clock: TokenClock, data: JSONValue,
                      hints: AsyncStream<Void>?) async throws -> RunResult {
        let count = options.latencyCount, size = max(1, options.sendSize)
        let rate = Double(options.rate)
        let interval = Duration.nanoseconds(Int64(Double(size) / rate * 1e9))
        let template = options.template
        clock.reset()
        clock.recording.store(true, ordering: .relaxed)
        let enqueueErrors = AtomicCounter()
        let elapsed = try await drain(durable, store: store, hints: hints, count: count) {
            try await Task.sleep(for: .milliseconds(200))  // the worker's first (empty) claim
            let start = ContinuousClock.now
            await withTaskGroup(of: Void.self) { group in
                var first = 0, index = 0
                while first < count {
                    let range = first..<min(count, first + size)
                    first = range.upperBound
                    try? await Task.sleep(until: start.advanced(by: interval * index), clock: .continuous)
                    index += 1
                    group.addTask {
                        clock.markEnqueued(range)
                        do {
                            _ = try await durable.enqueue(template: template, data: data,
                                                          to: RouterBench.recipients(range))
                        } catch {
                            enqueueErrors.value.add(1, ordering: .relaxed)
                        }
                    }
                }
                await group.waitForAll()
            }
        }
        clock.recording.store(false, ordering: .relaxed)
        let (toSend, toAnswer) = clock.latencies()
        let sendP = Percentiles(microseconds: toSend), answerP = Percentiles(microseconds: toAnswer)
        var result = base("latency")
        result.add("count", count)
        result.add("rate_per_s", options.rate)
        result.add("send_size", size)
        result.add("seconds", elapsed.seconds)
        result.add("enqueue_errors", enqueueErrors.value.load(ordering: .relaxed))
        result.add("enqueue_to_send_p50_ms", sendP.p50); result.add("enqueue_to_send_p99_ms", sendP.p99)
        result.add("enqueue_to_answer_p50_ms", answerP.p50); result.add("enqueue_to_answer_p99_ms", answerP.p99)
        result.add("enqueue_to_answer_max_ms", answerP.max)
        result.add("samples", toAnswer.count)
        return result
    }

    // MARK: - Crash recovery

    /// `--mode durable-hold`: the instance that gets killed: a worker on the same outbox, until killed.
    package func hold() async throws {
        try await withStore { store, postgres in
            let (router, _) = try self.makeRouter(clock: TokenClock(capacity: 0))
            let worker = DurableWorker(delivery: self.durable(router, store), name: self.options.workerName,
                                       lanes: self.options.lanes, hints: postgres?.hints)
            try await worker.run()
        }
    }

    /// `--mode durable-recovery`.
    package func recover() async throws -> String {
        let options = self.options
        let childName = "killed-" + RequestID.random().prefix(6)
        return try await withStore { store, postgres in
            let (router, data) = try self.makeRouter(clock: TokenClock(capacity: 0))
            let durable = self.durable(router, store)
            let receipt = try await durable.enqueue(template: options.template, data: data,
                                                    to: RouterBench.recipients(0..<options.count))
            store.trackFinishedIDs()
            let killedAt = LockedBox<ContinuousClock.Instant?>(nil)
            let held = LockedBox<Set<Int64>>([])
            let heldCount = AtomicCounter()
            let elapsed = try await self.drain(durable, store: store, hints: postgres?.hints, count: options.count) {
                let child = try Self.spawnSelf(self.childArguments(name: childName))
                try await Task.sleep(for: .milliseconds(Int64(options.killAfter * 1000)))
                Glibc.kill(child, SIGKILL)
                var status: Int32 = 0
                waitpid(child, &status, 0)
                killedAt.value.withLock { $0 = .now }
                // The rows the killed instance held: leased to it and not expired yet.
                let rows = try await store.deliveries(ofSend: receipt.sendID)
                let ids = Set(rows.filter { $0.state == .leased && $0.leaseOwner == childName }.map(\.id))
                held.value.withLock { $0 = ids }
                heldCount.value.store(ids.count, ordering: .relaxed)
                store.watch(ids)
                // Rows the killed instance finished count towards the total. A completion it wrote just before
                // the kill can still commit after this read (one statement needs no reply from the client), so
                // the count is read again every second until every row is accounted for (bounded by the drain's
                // deadline).
                store.countFinished(elsewhere: Set(rows.filter(\.state.isFinal).map(\.id)))
                let deadline = ContinuousClock.now.advanced(by: .seconds(options.timeout * 10))
                while store.finished < options.count, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .seconds(1))
                    let now = try await store.deliveries(ofSend: receipt.sendID)
                    store.countFinished(elsewhere: Set(now.filter(\.state.isFinal).map(\.id)))
                }
            }
            let finishedAt = store.watchedFinishTimes()
            let killTime = killedAt.value.withLock { $0 }
            let heldIDs = held.value.withLock { $0 }
            let last = finishedAt.values.max()
            let rows = try await store.deliveries(ofSend: receipt.sendID)
            let heldRows = rows.filter { heldIDs.contains($0.id) }
            var states: [String: Int] = [:]
            for row in rows { states[row.state.rawValue, default: 0] += 1 }
            await router.shutdown(gracePeriod: .seconds(5))
            var result = self.base("recovery")
            result.add("count", options.count)
            result.add("lease_s", options.leaseSeconds)
            result.add("kill_after_s", options.killAfter)
            result.add("seconds", elapsed.seconds)
            result.add("killed_instance_held", heldCount.value.load(ordering: .relaxed))
            result.add("held_resent", finishedAt.count)
            if let killTime, let last { result.add("recovery_s", killTime.duration(to: last).seconds) }
            result.add("held_flagged_may_have_been_delivered", heldRows.filter(\.mayHaveBeenDelivered).count)
            result.add("held_same_message_id", heldRows.filter { $0.last?.messageID == $0.messageID && $0.messageID != nil }.count)
            result.addObject("final_states", states)
            result.add("all_delivered_one_outcome", states == ["delivered": options.count] ? 1 : 0)
            return result.json
        }
    }

    func childArguments(name: String) -> [String] {
        var arguments = ["--mode", "durable-hold", "--store", options.store ?? "", "--endpoint", options.endpoint,
                         "--key", options.key, "--team", options.team, "--key-id", options.keyID,
                         "--bundle-id", options.bundleID, "--templates", options.templates,
                         "--template", options.template, "--lanes", "\(options.lanes)",
                         "--claim-batch", "\(options.claimBatch)", "--lease", "\(options.leaseSeconds)",
                         "--in-flight", "\(options.inFlight)", "--connections", "\(options.connections)",
                         "--worker-name", name, "--poll-ms", "\(options.pollMillis)"]
        if let ca = options.ca { arguments += ["--ca", ca] }
        return arguments
    }

    /// Starts this executable with `arguments` (stdout and stderr inherited); returns its pid.
    static func spawnSelf(_ arguments: [String]) throws -> pid_t {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { throw BenchError("cannot read /proc/self/exe") }
        let path = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) }
        argv.append(nil)
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, path, nil, nil, argv, environ)
        guard status == 0 else { throw BenchError("posix_spawn failed: \(status)") }
        return pid
    }
}

// MARK: - Measuring

/// A value shared with child tasks.
final class LockedBox<Value: Sendable>: Sendable {
    let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
}

/// A counter shared with child tasks.
final class AtomicCounter: Sendable {
    let value = Atomic<Int>(0)
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

package enum LoadAverage {
    package static func oneMinute() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return 0 }
        return Double(text.split(separator: " ").first ?? "") ?? 0
    }
}

/// CPU seconds (user + system) of a process and its children (a PostgreSQL postmaster and its backends), from
/// /proc. Zero without a pid.
struct ProcessTreeCPU {
    let root: Int32?
    init(root: Int32?) { self.root = root }

    func seconds() -> Double {
        guard let root else { return 0 }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        var total = 0.0
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return 0 }
        for entry in entries {
            guard let pid = Int32(entry),
                  let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            // fields[0] is the state; ppid is fields[1]; utime fields[11], stime fields[12].
            guard fields.count > 12, let ppid = Int32(fields[1]) else { continue }
            guard pid == root || ppid == root else { continue }
            total += (Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)
        }
        return total / ticks
    }
}

/// Enqueue times of benchmark tokens (by index) and, while recording, the time from enqueue to the provider's
/// send and to the answer of each.
final class TokenClock: Sendable {
    let base = ContinuousClock.now
    let recording = Atomic<Bool>(false)
    private struct State {
        var enqueued: [Int64]
        var toSend: [UInt32] = []
        var toAnswer: [UInt32] = []
    }
    private let state: Mutex<State>

    init(capacity: Int) {
        state = Mutex(State(enqueued: Array(repeating: -1, count: capacity)))
    }

    private func nanos() -> Int64 {
        let (seconds, attoseconds) = base.duration(to: .now).components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    func reset() {
        state.withLock { state in
            for index in state.enqueued.indices { state.enqueued[index] = -1 }
            state.toSend.removeAll(keepingCapacity: true)
            state.toAnswer.removeAll(keepingCapacity: true)
        }
    }

    func markEnqueued(_ range: Range<Int>) {
        let now = nanos()
        state.withLock { state in
            for index in range where index < state.enqueued.count { state.enqueued[index] = now }
        }
    }

    /// The benchmark token index of a request path `/3/device/<token>` (nil for others).
    static func tokenIndex(_ path: String) -> Int? {
        guard let slash = path.lastIndex(of: "/") else { return nil }
        let token = path[path.index(after: slash)...]
        guard token.count == 64, token.hasPrefix("ab") else { return nil }
        return Int(token.dropFirst(2), radix: 16)
    }

    func sending(_ path: String) -> Int? {
        guard recording.load(ordering: .relaxed), let index = Self.tokenIndex(path) else { return nil }
        let now = nanos()
        return state.withLock { state -> Int? in
            guard index < state.enqueued.count, state.enqueued[index] >= 0 else { return nil }
            state.toSend.append(UInt32(clamping: (now - state.enqueued[index]) / 1000))
            return index
        }
    }

    func answered(_ index: Int) {
        let now = nanos()
        state.withLock { state in
            guard index < state.enqueued.count, state.enqueued[index] >= 0 else { return }
            state.toAnswer.append(UInt32(clamping: (now - state.enqueued[index]) / 1000))
            state.enqueued[index] = -1  // a re-send is not a second sample
        }
    }

    func latencies() -> ([UInt32], [UInt32]) { state.withLock { ($0.toSend, $0.toAnswer) } }
}

/// The APNs provider, timing each benchmark token from its enqueue (`TokenClock`).
final class TokenTimedProvider: PushProvider {
    let inner: APNsProvider
    let clock: TokenClock
    init(inner: APNsProvider, clock: TokenClock) {
        self.inner = inner
        self.clock = clock
    }
    var name: String { inner.name }
    var typeName: String { inner.typeName }
    var platforms: Set<Platform> { inner.platforms }
    var policy: DeliveryPolicy { inner.policy }

    func prepare(_ content: PushContent, for token: PushToken, options: SendOptions) throws(NorqError) -> PreparedRequest {
        try inner.prepare(content, for: token, options: options)
    }

    func deliver(_ request: PreparedRequest, deadline: ContinuousClock.Instant) async throws(NorqError) -> DeliveryResponse {
        let index = clock.sending(request.path)
        defer { if let index { clock.answered(index) } }
        return try await inner.deliver(request, deadline: deadline)
    }

    func startDelivery(_ request: PreparedRequest, deadline: ContinuousClock.Instant,
                       completion: @escaping @Sendable (Result<DeliveryResponse, NorqError>) -> Void) {
        let index = clock.sending(request.path)
        inner.startDelivery(request, deadline: deadline) { [clock] result in
            if let index { clock.answered(index) }
            completion(result)
        }
    }

    func shutdown() async { await inner.shutdown() }
}

/// A `DeliveryStore` that forwards to another and measures: wall time in claim and complete, rows finished (with a
/// wait for a count), and the finish times of watched rows.
final class MeasuredStore: DeliveryStore {
    let inner: any DeliveryStore
    struct Times: Sendable {
        var claims = 0, completes = 0
        var claim = Duration.zero, complete = Duration.zero
    }
    private struct State {
        var times = Times()
        var finished = 0
        var outcomes: [String: Int] = [:]
        var waiters: [(target: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var watched: Set<Int64> = []
        var watchedFinished: [Int64: ContinuousClock.Instant] = [:]
        /// Row ids finished here (crash recovery only).
        var trackIDs = false
        var finishedIDs: Set<Int64> = []
    }
    private let state = Mutex(State())

    init(_ inner: any DeliveryStore) { self.inner = inner }

    /// The wrapped store's: a send is cut to it once, at enqueue (a wrapper with the default would make the store
    /// cut every send again when `--claim-batch` changes its size).
    var segmentSize: Int { inner.segmentSize }

    var finished: Int { state.withLock { $0.finished } }
    var outcomes: [String: Int] { state.withLock { $0.outcomes } }
    var times: Times { state.withLock { $0.times } }
    func resetTimes() { state.withLock { $0.times = Times() } }
    func watch(_ ids: Set<Int64>) { state.withLock { $0.watched = ids } }
    func watchedFinishTimes() -> [Int64: ContinuousClock.Instant] { state.withLock { $0.watchedFinished } }
    func trackFinishedIDs() { state.withLock { $0.trackIDs = true } }

    /// Counts rows another instance finished (`elsewhere`: every row final in a snapshot) as finished too: from
    /// now on `finished` counts the rows finished by any instance (this store tracked its ids from the start).
    func countFinished(elsewhere: Set<Int64>) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.finished = state.finishedIDs.union(elsewhere).count
            let finished = state.finished
            let ready = state.waiters.filter { $0.target <= finished }.map(\.continuation)
            state.waiters.removeAll { $0.target <= finished }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    /// Waits until `target` rows were finished through this store (false after `timeout`).
    func waitForFinished(_ target: Int, timeout: Duration) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let ready = self.state.withLock { state -> Bool in
                        if state.finished >= target { return true }
                        state.waiters.append((target, continuation))
                        return false
                    }
                    if ready { continuation.resume() }
                }
                return true
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            if !first {
                // Wake the waiter so the group can end.
                let waiters = self.state.withLock { state in
                    defer { state.waiters.removeAll() }
                    return state.waiters
                }
                for waiter in waiters { waiter.continuation.resume() }
            }
            group.cancelAll()
            return first
        }
    }

    func migrate() async throws(NorqError) { try await inner.migrate() }

    func enqueue(_ send: NewSend, now: Int64, idempotencyWindow: Duration) async throws(NorqError) -> EnqueueResult {
        try await inner.enqueue(send, now: now, idempotencyWindow: idempotencyWindow)
    }

    func claim(owner: String, limit: Int, now: Int64, leaseUntil: Int64) async throws(NorqError) -> [OutboxRow] {
        let start = ContinuousClock.now
        let rows = try await inner.claim(owner: owner, limit: limit, now: now, leaseUntil: leaseUntil)
        let took = start.duration(to: .now)
        state.withLock { state in
            state.times.claims += 1
            state.times.claim += took
        }
        return rows
    }

    func renew(_ leases: [Lease], until: Int64) async throws(NorqError) -> Set<Int64> {
        try await inner.renew(leases, until: until)
    }

    func complete(_ completions: [RowCompletion], now: Int64) async throws(NorqError) -> CompletionReport {
        let start = ContinuousClock.now
        let report = try await inner.complete(completions, now: now)
        let end = ContinuousClock.now
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.times.completes += 1
            state.times.complete += start.duration(to: end)
            // Cheap per row (this runs inside the measured CPU): no set lookup when every row applied, outcome
            // counts kept per run of one state and added to the dictionary once per run.
            let all = report.lost.isEmpty && report.applied.count >= completions.count
            let track = state.trackIDs || !state.watched.isEmpty
            var run: (state: String, count: Int)?
            for completion in completions {
                guard case .finish(let lease, let outcome) = completion,
                      all || report.applied.contains(lease.rowID) else { continue }
                state.finished += 1
                if let current = run, current.state == outcome.state.rawValue {
                    run = (current.state, current.count + 1)
                } else {
                    if let current = run { state.outcomes[current.state, default: 0] += current.count }
                    run = (outcome.state.rawValue, 1)
                }
                if track {
                    if state.trackIDs { state.finishedIDs.insert(lease.rowID) }
                    if state.watched.contains(lease.rowID) { state.watchedFinished[lease.rowID] = end }
                }
            }
            if let current = run { state.outcomes[current.state, default: 0] += current.count }
            let finished = state.finished
            let ready = state.waiters.filter { $0.target <= finished }.map(\.continuation)
            state.waiters.removeAll { $0.target <= finished }
            return ready
        }
        for continuation in ready { continuation.resume() }
        return report
    }

    func send(id: String) async throws(NorqError) -> StoredSend? { try await inner.send(id: id) }
    func deliveries(ofSend id: String) async throws(NorqError) -> [OutboxRow] { try await inner.deliveries(ofSend: id) }
    func invalidTokens(limit: Int) async throws(NorqError) -> [InvalidTokenRecord] { try await inner.invalidTokens(limit: limit) }
    func registerToken(_ token: String, provider: String?, environment: String?, at: Int64) async throws(NorqError) {
        try await inner.registerToken(token, provider: provider, environment: environment, at: at)
    }
    func prune(finishedBefore before: Int64, limit: Int) async throws(NorqError) -> Int {
        try await inner.prune(finishedBefore: before, limit: limit)
    }
    func counts() async throws(NorqError) -> [DeliveryState: Int] { try await inner.counts() }
    func queueDepth(now: Int64) async throws(NorqError) -> QueueDepth { try await inner.queueDepth(now: now) }
    func close() async { await inner.close() }
}

extension DurableBench {
    /// The entry of `--mode durable`, `durable-recovery` and `durable-hold`: prints one JSON line per result.
    package func main() async throws {
        switch options.mode {
        case "durable": for line in try await run() { print(line) }
        case "durable-recovery": print(try await recover())
        default: try await hold()
        }
    }
}
