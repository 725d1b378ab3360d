import Crypto
import Foundation
import Norq
import NorqAPNs
import NorqCore
import NorqStore
import NorqStorePostgres
import NorqStoreSQLite
import NorqTesting
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `norq worker` processes against the in-process emulator and a real database: killed with SIGKILL mid-burst,
/// paused past their lease, the database restarted or unreachable. In every case: no token lost, none finished twice,
/// at most the killed worker's in-flight requests re-sent and each with the same apns-id, no hang.
enum Chaos {
    /// The built `norq` executable (next to the test bundle).
    static let executable: URL = {
        var candidates: [URL] = []
        for bundle in Bundle.allBundles + [Bundle.main] {
            candidates.append(bundle.bundleURL.appendingPathComponent("norq"))
            candidates.append(bundle.bundleURL.deletingLastPathComponent().appendingPathComponent("norq"))
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        candidates.append(root.appendingPathComponent(".build/debug/norq"))
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[candidates.count - 1]
    }()

    /// A scenario: the emulator (answering after `latency`), a directory with the key, the CA and a norq.yaml whose
    /// APNs provider points at the emulator and whose store is `store`.
    struct Setup {
        let rig: DurableRig
        let directory: URL
        let config: URL
        /// Every worker started: killed at cleanup, so a failed test leaves no process behind.
        let workers = WorkerList()

        static func make(store: String, latency: Duration = .milliseconds(40), claimBatchSize: Int = 16,
                         leaseDuration: String = "2s", recordLimit: Int = 10_000,
                         providerTimeout: String = "10s") async throws -> Setup {
            let directory = try temporaryDirectory()
            let rig = try await DurableRig.make(faults: .init(latency: latency), recordLimit: recordLimit)
            try rig.emulator.writeCACertificate(to: directory.appendingPathComponent("ca.pem").path)
            try rig.keyPEM.write(to: directory.appendingPathComponent("key.p8"), atomically: true, encoding: .utf8)
            let yaml = """
                providers:
                  apns:
                    config:
                      keyId: KEY123ABCD
                      teamId: TEAM123ABC
                      bundleId: com.example.app
                      keyPath: ./key.p8
                      endpoint: https://localhost:\(rig.emulator.port)
                      caPath: ./ca.pem
                      timeout: \(providerTimeout)
                    retry: { retries: 3, backoff: 20ms }
                routing:
                  push: apns
                store:
                  \(store)
                  leaseDuration: \(leaseDuration)
                  pollInterval: 50ms
                  claimBatchSize: \(claimBatchSize)
                  callTimeout: 5s

                """
            let config = directory.appendingPathComponent("norq.yaml")
            try yaml.write(to: config, atomically: true, encoding: .utf8)
            return Setup(rig: rig, directory: directory, config: config)
        }

        func cleanup() async {
            workers.killAll()
            await rig.shutdown()
            try? FileManager.default.removeItem(at: directory)
        }

        /// Starts `norq worker` (stderr kept in a file for failures).
        func startWorker(_ name: String, lanes: Int = 2) throws -> Process {
            let process = Process()
            process.executableURL = Chaos.executable
            process.arguments = ["worker", "-c", config.path, "--name", name, "--lanes", "\(lanes)"]
            process.currentDirectoryURL = directory
            process.standardOutput = FileHandle.nullDevice
            let log = directory.appendingPathComponent("\(name).log")
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            process.standardError = try FileHandle(forWritingTo: log)
            try process.run()
            workers.add(process.processIdentifier)
            return process
        }

        func log(_ name: String) -> String {
            (try? String(contentsOf: directory.appendingPathComponent("\(name).log"), encoding: .utf8)) ?? ""
        }
    }

    /// Waits until `condition` holds, at most `timeout` (then records an issue).
    static func waitUntil(_ what: String, timeout: Duration = .seconds(60),
                          _ condition: () async throws -> Bool) async throws {
        let end = ContinuousClock.now.advanced(by: timeout)
        while ContinuousClock.now < end {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("timed out waiting for \(what)")
        throw NorqError(.storeDeadlineExceeded, "timed out waiting for \(what)")
    }

    /// Stops a worker with SIGTERM and waits (bounded) for a clean exit.
    static func stop(_ process: Process, _ setup: Setup, _ name: String) async throws {
        guard process.isRunning else { return }
        process.terminate()
        let end = ContinuousClock.now.advanced(by: .seconds(20))
        while process.isRunning, ContinuousClock.now < end { try await Task.sleep(for: .milliseconds(20)) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            Issue.record("worker \(name) did not stop within 20 s of SIGTERM: \(setup.log(name))")
            return
        }
        #expect(process.terminationStatus == 0, "worker \(name) exit status \(process.terminationStatus): \(setup.log(name))")
    }

    /// The invariants after a chaos run: every target delivered exactly once in the store; every request carried
    /// its row's apns-id; re-sent only rows marked may-have-been-delivered, at most `maxResent` of them.
    static func verify(_ store: any DeliveryStore, sendID: String, count: Int, setup: Setup, maxResent: Int) async throws {
        let rows = try await DurableDelivery.rows(of: sendID, in: store)
        #expect(rows.count == count, "no row lost")
        for row in rows where row.state != .delivered {
            print("chaos: row \(row.id) \(row.state) attempts \(row.attempts): [\(row.last?.code ?? "-")] \(row.last?.reason ?? "-")")
        }
        #expect(rows.allSatisfy { $0.state == .delivered }, "every token ends delivered: \(Dictionary(grouping: rows, by: \.state.rawValue).mapValues(\.count))")
        #expect(Set(rows.map(\.id)).count == count)
        let sent = setup.rig.requestsByID()
        let ids = Set(rows.compactMap(\.messageID))
        #expect(ids.count == count)
        let mismatched = Set(sent.keys).symmetricDifference(ids)
        #expect(mismatched.isEmpty, "every request carried its row's apns-id, and every row was sent: \(mismatched.count) differ, e.g. \(mismatched.prefix(3))")
        let resent = sent.filter { $0.value > 1 }
        #expect(resent.count <= maxResent, "re-sent \(resent.count), at most the in-flight requests (\(maxResent))")
        let flagged = Set(rows.filter(\.mayHaveBeenDelivered).compactMap(\.messageID))
        let unflagged = Set(resent.keys).subtracting(flagged)
        #expect(unflagged.isEmpty, "every re-sent row says it may have been delivered: \(unflagged.count) do not")
        #expect(resent.values.allSatisfy { $0 <= 3 })
        let counts = try await store.counts()
        #expect(counts[.pending] == nil && counts[.leased] == nil)
    }
}

/// The pids of started workers.
final class WorkerList: Sendable {
    private let pids = Mutex<[pid_t]>([])
    func add(_ pid: pid_t) { pids.withLock { $0.append(pid) } }
    func killAll() {
        for pid in pids.withLock({ $0 }) {
            kill(pid, SIGCONT)
            kill(pid, SIGKILL)
        }
    }
}

extension DurableRig {
    var keyPEM: String { key.pemRepresentation }
}

@Suite(.serialized) struct SQLiteChaosTests {
    @Test func killedWorkerProcessIsRestartedAndNothingIsLostOrFinishedTwice() async throws {
        let setup = try await Chaos.Setup.make(store: "sqlite: ./norq.db", latency: .milliseconds(150))
        // The enqueuing instance uses the workers' settings (norq.yaml): segments of at most claimBatchSize (16).
        let store = try await SQLiteDeliveryStore.open(path: setup.directory.appendingPathComponent("norq.db").path,
                                                       settings: DeliveryStoreSettings(claimBatchSize: 16))
        do {
            try await Self.killAndRestart(setup, store)
        } catch {
            await store.close()
            await setup.cleanup()
            throw error
        }
        await store.close()
        await setup.cleanup()
    }

    static func killAndRestart(_ setup: Chaos.Setup, _ store: SQLiteDeliveryStore) async throws {
        try await store.migrate()
        let durable = DurableDelivery(router: setup.rig.router, store: store)
        let count = 400
        let receipt = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(count),
                                                options: RouterSendOptions(idempotencyKey: "chaos-sqlite"))
        let first = try setup.startWorker("w1")
        try await Chaos.waitUntil("the first worker to send 60 requests") { setup.rig.emulator.requests.count >= 60 }
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        let killedAt = ContinuousClock.now
        let second = try setup.startWorker("w2")
        try await Chaos.waitUntil("every target to finish") {
            (try await store.counts())[.delivered] == count
        }
        #expect(ContinuousClock.now - killedAt < .seconds(30), "recovered in bounded time")
        try await Chaos.stop(second, setup, "w2")
        // Two lanes of 16 rows each were in flight at most.
        try await Chaos.verify(store, sendID: receipt.sendID, count: count, setup: setup, maxResent: 32)
    }
}

@Suite(PostgresTestServer.enabled, .serialized) struct PostgresChaosTests {
    static func withSetup(leaseDuration: String = "2s", latency: Duration = .milliseconds(150), listen: Bool = true,
                          claimBatchSize: Int = 16, recordLimit: Int = 10_000, providerTimeout: String = "10s",
                          _ body: (Chaos.Setup, PostgresDeliveryStore, DurableDelivery) async throws -> Void) async throws {
        try await PostgresTestServer.withDatabase { configuration in
            var url = "postgres://\(configuration.username)@\(configuration.host):\(configuration.port)/\(configuration.database ?? "")?sslmode=disable"
            if configuration.password != nil { url = configuration.description }
            if !listen { url += "&listen=false" }
            let setup = try await Chaos.Setup.make(store: "postgres: \(url)", latency: latency,
                                                   claimBatchSize: claimBatchSize, leaseDuration: leaseDuration,
                                                   recordLimit: recordLimit, providerTimeout: providerTimeout)
            let store = PostgresDeliveryStore(configuration: configuration,
                                              settings: DeliveryStoreSettings(callTimeout: .seconds(5),
                                                                              claimBatchSize: claimBatchSize))
            do {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await store.run() }
                    defer { group.cancelAll() }
                    try await store.migrate()
                    try await body(setup, store, DurableDelivery(router: setup.rig.router, store: store))
                }
            } catch {
                await setup.cleanup()
                throw error
            }
            await setup.cleanup()
        }
    }

    @Test func twoWorkersOneKilledMidBurst() async throws {
        try await Self.withSetup { setup, store, durable in
            let count = 600
            let receipt = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(count))
            let a = try setup.startWorker("a")
            let b = try setup.startWorker("b")
            try await Chaos.waitUntil("100 requests") { setup.rig.emulator.requests.count >= 100 }
            kill(a.processIdentifier, SIGKILL)
            a.waitUntilExit()
            try await Chaos.waitUntil("every target to finish") { (try await store.counts())[.delivered] == count }
            try await Chaos.stop(b, setup, "b")
            try await Chaos.verify(store, sendID: receipt.sendID, count: count, setup: setup, maxResent: 32)
        }
    }

    /// Three worker processes against a service slower than the lease (issue 29: with attempts capped at half the
    /// lease, every push was sent up to three times and reported failed), one of them killed mid-burst: nothing
    /// failed, nothing lost, re-sent only the killed worker's in-flight rows, each flagged.
    @Test func threeWorkersASlowServiceAndOneKilled() async throws {
        try await Self.withSetup(leaseDuration: "2s", latency: .milliseconds(2_500)) { setup, store, durable in
            let count = 600
            let receipt = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(count))
            let a = try setup.startWorker("a")
            let b = try setup.startWorker("b")
            let c = try setup.startWorker("c")
            try await Chaos.waitUntil("100 requests") { setup.rig.emulator.requests.count >= 100 }
            kill(a.processIdentifier, SIGKILL)
            a.waitUntilExit()
            try await Chaos.waitUntil("every target to finish", timeout: .seconds(120)) {
                let counts = try await store.counts()
                return counts[.pending] == nil && counts[.leased] == nil
            }
            try await Chaos.stop(b, setup, "b")
            try await Chaos.stop(c, setup, "c")
            // The killed worker held two lanes of 16 rows.
            try await Chaos.verify(store, sendID: receipt.sendID, count: count, setup: setup, maxResent: 32)
        }
    }

    /// Issue 29's scenario at full scale: three worker processes on one PostgreSQL, 20,000 targets (segments of
    /// 500), a provider answering in 6 s, one worker `kill -9`'d mid-send, and PostgreSQL stopped for 10 s mid-send.
    /// Every target ends delivered once in the store, nothing is lost, nothing the service accepted is reported
    /// failed, and only the killed worker's in-flight targets (two lanes of 500) are sent again, each flagged.
    /// (The outage was opt-in until stop 32: with stop 30's worker, a task per target, the segment in flight during
    /// it ended `failed` with `provider/deadline-exceeded` in some runs; stop 31's worker passed 3 of 3 runs at load
    /// 5-6 and 2 of 2 at load 9 in stop 32. `NORQ_CHAOS_NO_OUTAGE=1` leaves it out.) The outage alone is
    /// `databaseRestartedAndUnreachableForTenSecondsMidBurst`.
    @Test func twentyThousandTargetsASlowServiceAndAKilledWorker() async throws {
        // The provider's timeout is 20 s, not the default 10 s: with 10 s, in 2 of 4 runs one segment's requests
        // (266-499 of them) ended `provider/deadline-exceeded` though the emulator had received them and answers
        // after 6 s: three debug-build workers and the emulator share two cores here (not proven to be the cause;
        // issue 29's closing note).
        try await Self.withSetup(leaseDuration: "30s", latency: .seconds(6), claimBatchSize: 500,
                                 recordLimit: 100_000, providerTimeout: "20s") { setup, store, durable in
            let count = 20_000
            let receipt = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(count))
            let a = try setup.startWorker("a")
            let b = try setup.startWorker("b")
            let c = try setup.startWorker("c")
            try await Chaos.waitUntil("the first wave in flight", timeout: .seconds(60)) {
                setup.rig.emulator.requests.count >= 1_500
            }
            kill(a.processIdentifier, SIGKILL)
            a.waitUntilExit()
            try await Chaos.waitUntil("6,000 requests", timeout: .seconds(120)) {
                setup.rig.emulator.requests.count >= 6_000
            }
            // The outage: see above.
            if ProcessInfo.processInfo.environment["NORQ_CHAOS_NO_OUTAGE"] == nil {
                print("chaos: stopping PostgreSQL for 10 s")
                try PostgresTestServer.controlServer("stop")
                try await Task.sleep(for: .seconds(10))
                try PostgresTestServer.controlServer("start")
            }
            #expect(b.isRunning && c.isRunning, "a lost database crashes no worker")
            try await Chaos.waitUntil("every target to finish", timeout: .seconds(300)) {
                guard let counts = try? await store.counts() else { return false }
                return counts[.pending] == nil && counts[.leased] == nil
            }
            try await Chaos.stop(b, setup, "b")
            try await Chaos.stop(c, setup, "c")
            if ProcessInfo.processInfo.environment["NORQ_CHAOS_LOGS"] != nil {
                print("chaos: b: \(setup.log("b").suffix(6000))\nchaos: c: \(setup.log("c").suffix(6000))")
            }
            try await Chaos.verify(store, sendID: receipt.sendID, count: count, setup: setup, maxResent: 1_000)
        }
    }

    @Test func databaseRestartedAndUnreachableForTenSecondsMidBurst() async throws {
        try await Self.withSetup(leaseDuration: "30s", latency: .milliseconds(300)) { setup, store, durable in
            let count = 2_000
            let receipt = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(count))
            let a = try setup.startWorker("a")
            let b = try setup.startWorker("b")
            try await Chaos.waitUntil("100 requests") { setup.rig.emulator.requests.count >= 100 }
            // Restart mid-burst.
            print("chaos: restarting PostgreSQL")
            try PostgresTestServer.controlServer("stop")
            try PostgresTestServer.controlServer("start")
            print("chaos: restarted")
            try await Chaos.waitUntil("300 requests") { setup.rig.emulator.requests.count >= 300 }
            // Unreachable for 10 s.
            print("chaos: stopping PostgreSQL for 10 s")
            try PostgresTestServer.controlServer("stop")
            try await Task.sleep(for: .seconds(10))
            try PostgresTestServer.controlServer("start")
            print("chaos: started again")
            #expect(a.isRunning && b.isRunning, "a lost database crashes no worker")
            var polls = 0
            try await Chaos.waitUntil("every target to finish", timeout: .seconds(90)) {
                let counts: [DeliveryState: Int]?
                do { counts = try await store.counts() } catch {
                    counts = nil
                    if polls % 20 == 0 { print("chaos: counts unavailable: \(error)") }
                }
                if polls % 20 == 0, let counts { print("chaos: \(counts.map { "\($0.key)=\($0.value)" }.sorted())") }
                polls += 1
                return counts?[.delivered] == count
            }
            try await Chaos.stop(a, setup, "a")
            try await Chaos.stop(b, setup, "b")
            // The leases (30 s) outlived the outage: nothing needed re-sending.
            try await Chaos.verify(store, sendID: receipt.sendID, count: count, setup: setup, maxResent: 0)
        }
    }

    /// The workers poll only (`listen=false`, as behind a connection pooler).
    @Test func workerPausedPastItsLeaseCannotFinishRowsTakenOver() async throws {
        try await Self.withSetup(listen: false) { setup, store, durable in
            let count = 300
            let receipt = try await durable.enqueue(content: DurableRig.content, to: DurableRig.recipients(count))
            let a = try setup.startWorker("a")
            try await Chaos.waitUntil("a's first requests") { setup.rig.emulator.requests.count >= 20 }
            kill(a.processIdentifier, SIGSTOP)
            let b = try setup.startWorker("b")
            try await Chaos.waitUntil("every target to finish") { (try await store.counts())[.delivered] == count }
            kill(a.processIdentifier, SIGCONT)
            // a wakes up: its completions for rows b took are lost (compare-and-set), nothing is finished twice.
            try await Task.sleep(for: .seconds(2))
            #expect(a.isRunning)
            try await Chaos.stop(a, setup, "a")
            try await Chaos.stop(b, setup, "b")
            try await Chaos.verify(store, sendID: receipt.sendID, count: count, setup: setup, maxResent: 32)
        }
    }
}
