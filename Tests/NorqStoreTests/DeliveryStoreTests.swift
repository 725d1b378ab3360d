import Foundation
import NorqCore
import NorqStore
@testable import NorqStoreSQLite
import Testing

/// A fresh temporary directory, removed by the caller.
func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("norq-store-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

@Suite struct InMemoryStoreTests {
    @Test(arguments: StoreConformance.all.map(\.0))
    func conformance(_ name: String) async throws {
        let check = try #require(StoreConformance.all.first { $0.0 == name }?.1)
        let store = InMemoryDeliveryStore()
        try await store.migrate()
        try await check(store)
    }

    @Test func concurrentEnqueuesOfOneKeyMakeOneSend() async throws {
        try await StoreConformance.concurrentSameKey(InMemoryDeliveryStore())
    }
}

@Suite struct SQLiteStoreTests {
    static func withStore(_ body: (SQLiteDeliveryStore, URL) async throws -> Void) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try await SQLiteDeliveryStore.withMigrated(path: directory.appendingPathComponent("norq.db").path) {
            try await body($0, directory)
        }
    }

    @Test(arguments: StoreConformance.all.map(\.0))
    func conformance(_ name: String) async throws {
        let check = try #require(StoreConformance.all.first { $0.0 == name }?.1)
        try await Self.withStore { store, _ in try await check(store) }
    }

    @Test func concurrentEnqueuesOfOneKeyMakeOneSend() async throws {
        try await Self.withStore { store, _ in try await StoreConformance.concurrentSameKey(store) }
    }

    /// The idempotency lookup of a group-committed enqueue searches the key index (a scan of every send would
    /// grow with the table).
    @Test func enqueueLookupsSearchTheirIndexes() async throws {
        try await Self.withStore { store, directory in
            let plan = try await SQLiteTestSupport.queryPlan(path: directory.appendingPathComponent("norq.db").path,
                                                             SQLiteDeliveryStore.holderLookup(count: 3), parameters: 6)
            #expect(plan.contains { $0.contains("SEARCH s USING INDEX norq_sends_key") }, "\(plan)")
            #expect(!plan.contains { $0.hasPrefix("SCAN s") || $0.hasPrefix("SCAN norq_sends") }, "\(plan)")
            // The outbox insert looks each token up in the registry by its key.
            let insert = try await SQLiteTestSupport.queryPlan(
                path: directory.appendingPathComponent("norq.db").path,
                SQLiteDeliveryStore.outboxInsert(values: "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?),(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"),
                parameters: 30)
            // The newest matching entry by the registry's key (token first), then that entry by its rowid.
            #expect(insert.contains { $0.hasPrefix("SEARCH b USING INDEX") }, "\(insert)")
            #expect(insert.contains { $0.hasPrefix("SEARCH t USING INTEGER PRIMARY KEY") }, "\(insert)")
            #expect(!insert.contains { $0.hasPrefix("SCAN t") || $0.hasPrefix("SCAN b") }, "\(insert)")
        }
    }

    /// The completing UPDATE finds each row by its primary key, not by scanning the leased rows.
    @Test func completionSearchesRowsByID() async throws {
        try await Self.withStore { store, directory in
            let lease = Lease(rowID: 1, token: "t")
            let completions: [RowCompletion] = [
                .finish(lease, StoredOutcome(state: .delivered, status: 200, messageID: "a")),
                .finish(Lease(rowID: 2, token: "u"), StoredOutcome(state: .delivered, status: 200, messageID: "b")),
                .retry(Lease(rowID: 3, token: "v"), at: 5, last: StoredOutcome(state: .failed, status: 503)),
            ]
            let statements = SQLiteDeliveryStore.completions(completions, now: 10)
            #expect(statements.count == 2, "the two deliveries share a statement, the retry has its own")
            // The deliveries' history insert (a move) and the retry's UPDATE.
            for statement in statements {
                let plan = try await SQLiteTestSupport.queryPlan(path: directory.appendingPathComponent("norq.db").path,
                                                                 statement.sql, parameters: statement.binds.count)
                #expect(plan.contains { $0.hasPrefix("SEARCH norq_outbox USING INTEGER PRIMARY KEY") }, "\(plan)")
                #expect(!plan.contains { $0.hasPrefix("SCAN norq_outbox") }, "\(plan)")
            }
        }
    }

    /// A file the store creates has its page size; a file created before keeps its own.
    @Test func newFilesGetTheStorePageSize() async throws {
        try await Self.withStore { _, directory in
            let size = try await SQLiteTestSupport.query(path: directory.appendingPathComponent("norq.db").path,
                                                         "PRAGMA page_size")
            #expect(size == [String(SQLiteDeliveryStore.pageSize)])
        }
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("old.db").path
        try await SQLiteTestSupport.execute(path: path, "CREATE TABLE t (x)")
        let store = try await SQLiteDeliveryStore.open(path: path)
        try await store.migrate()
        await store.close()
        #expect(try await SQLiteTestSupport.query(path: path, "PRAGMA page_size") == ["4096"])
    }

    /// A claim finds its rows through the partial indexes of due and of expired leased rows, not by a scan.
    @Test func claimSearchesItsIndexes() async throws {
        try await Self.withStore { store, directory in
            let plan = try await SQLiteTestSupport.queryPlan(path: directory.appendingPathComponent("norq.db").path,
                                                             SQLiteDeliveryStore.claimStatement(limit: 256),
                                                             parameters: 4)
            #expect(plan.contains { $0.contains("INDEX norq_outbox_due (") }, "\(plan)")
            #expect(plan.contains { $0.contains("INDEX norq_outbox_leases (") }, "\(plan)")
            #expect(!plan.contains { $0.hasPrefix("SCAN norq_outbox") }, "\(plan)")
        }
    }

    @Test func twoConnectionsOnOneFileMigrateAndClaimWithoutOverlap() async throws {
        try await Self.withStore { store, directory in
            let path = directory.appendingPathComponent("norq.db").path
            // Two more "instances" start at once on the same file.
            async let a = SQLiteDeliveryStore.open(path: path)
            async let b = SQLiteDeliveryStore.open(path: path)
            let (first, second) = try await (a, b)
            async let migrateA: Void = first.migrate()
            async let migrateB: Void = second.migrate()
            _ = try await (migrateA, migrateB)
            _ = try await store.enqueue(StoreConformance.send(tokens: (0..<200).map { "t\($0)" }), now: 0,
                                        idempotencyWindow: .seconds(60))
            async let claimA = first.claim(owner: "a", limit: 150, now: 0, leaseUntil: 100)
            async let claimB = second.claim(owner: "b", limit: 150, now: 0, leaseUntil: 100)
            let (rowsA, rowsB) = try await (claimA, claimB)
            #expect(rowsA.count + rowsB.count == 200)
            #expect(Set(rowsA.map(\.id)).isDisjoint(with: rowsB.map(\.id)))
            await first.close()
            await second.close()
        }
    }

    /// A claim returns a retried row's last answer (one JSON column) whole, as a read of the row does: every field,
    /// text that JSON escapes, and missing values.
    @Test func claimReadsBackTheLastAnswerWhole() async throws {
        try await Self.withStore { store, _ in
            let sendID = try await store.enqueue(StoreConformance.send(tokens: ["a", "b"]), now: 0,
                                                 idempotencyWindow: StoreConformance.window).sendID
            let first = try await store.claim(owner: "w", limit: 2, now: 0, leaseUntil: 100)
            #expect(first.allSatisfy { $0.last == nil })
            let full = StoredOutcome(state: .failed, status: 503, reason: "Service \"Unavailable\" \\ é\n",
                                     code: "provider/unavailable", classification: "retryable", invalidSince: 42,
                                     messageID: "m-1", mayHaveBeenDelivered: true)
            let sparse = StoredOutcome(state: .failed)
            _ = try await store.complete([.retry(first[0].lease!, at: 5, last: full),
                                          .retry(first[1].lease!, at: 5, last: sparse)], now: 1)
            let again = try await store.claim(owner: "w", limit: 2, now: 10, leaseUntil: 200)
            #expect(again.map(\.last) == [full, sparse])
            let read = try await store.deliveries(ofSend: sendID)
            #expect(read.map(\.last) == again.map(\.last))
        }
    }

    /// A finish carries its rows as JSON text: a message id with quotes, backslashes, control characters and
    /// non-ASCII text is stored as given, and a token that is not the row's (even one JSON must escape) applies
    /// nothing.
    @Test func finishStoresAnyMessageIDAndMatchesTokensExactly() async throws {
        try await Self.withStore { store, _ in
            let sendID = try await store.enqueue(StoreConformance.send(tokens: ["a", "b", "c", "d"]), now: 0,
                                                 idempotencyWindow: StoreConformance.window).sendID
            let claimed = try await store.claim(owner: "w", limit: 4, now: 0, leaseUntil: 100)
            let odd = "m \"quoted\" \\ back\tslash\n\u{1}é✓"
            let report = try await store.complete([
                .finish(claimed[0].lease!, StoredOutcome(state: .delivered, status: 200, messageID: odd)),
                .finish(claimed[1].lease!, StoredOutcome(state: .delivered, status: 200)),
                .finish(Lease(rowID: claimed[2].id, token: claimed[2].leaseToken! + "\""),
                        StoredOutcome(state: .delivered, status: 200, messageID: "x")),
                // A token shaped like the move's `<id>:<token>` key is still compared whole.
                .finish(Lease(rowID: claimed[3].id, token: "\(claimed[3].id):" + claimed[3].leaseToken!),
                        StoredOutcome(state: .delivered, status: 200, messageID: "y")),
            ], now: 10)
            #expect(report.applied == [claimed[0].id, claimed[1].id])
            #expect(report.lost == [claimed[2].id, claimed[3].id])
            let rows = try await store.deliveries(ofSend: sendID)
            #expect(rows.map(\.state) == [.delivered, .delivered, .leased, .leased])
            #expect(rows[0].last?.messageID == odd)
            #expect(rows[1].last?.messageID == nil)
        }
    }

    /// A call waiting for this process's lock behind a stuck one (a driver call that ignores cancellation) ends at
    /// its deadline (the event loop's timer), and so does the stuck one; a caller's cancellation ends a call.
    @Test func callsEndAtTheirDeadlineBehindAStuckCall() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try await SQLiteDeliveryStore.open(path: directory.appendingPathComponent("norq.db").path,
                                                       settings: DeliveryStoreSettings(callTimeout: .milliseconds(200)))
        try await store.migrate()
        let start = ContinuousClock.now
        // A driver call that ignores cancellation holds the lock for 2 s.
        async let stuck: Void = store.call("a stuck call") { _ in
            await withCheckedContinuation { continuation in
                DispatchQueue.global().asyncAfter(deadline: .now() + 2) { continuation.resume() }
            }
        }
        try await Task.sleep(for: .milliseconds(20))
        do {
            _ = try await store.claim(owner: "w", limit: 1, now: 0, leaseUntil: 1)
            Issue.record("the claim waited past its deadline")
        } catch {
            #expect(error.code == .storeDeadlineExceeded)
            #expect(error.message.contains("claiming rows"), "\(error.message)")
        }
        do {
            try await stuck
            Issue.record("the stuck call returned")
        } catch let error as NorqError {
            #expect(error.code == .storeDeadlineExceeded)
            #expect(error.message.contains("did not finish within"), "\(error.message)")
        }
        #expect(start.duration(to: .now) < .seconds(1.5), "both ended at their deadline, not after the stuck call")
        let cancelled = Task { try await store.call("a cancelled call") { _ in try await Task.sleep(for: .seconds(30)) } }
        cancelled.cancel()
        do {
            try await cancelled.value
            Issue.record("the cancelled call returned")
        } catch let error as NorqError {
            #expect(error.code == .storeDeadlineExceeded)
        }
        await store.close()
    }

    @Test func schemaNewerThanTheCodeRefusesToRun() async throws {
        try await Self.withStore { store, directory in
            let path = directory.appendingPathComponent("norq.db").path
            #expect(try await store.schemaVersion() == SQLiteSchema.migrations.count)
            // Another (newer) norq moved the schema on.
            try await SQLiteTestSupport.execute(path: path, "UPDATE norq_schema SET version = 99")
            let newer = try await SQLiteDeliveryStore.open(path: path)
            defer { Task { await newer.close() } }
            await #expect(throws: NorqError.self) { try await newer.migrate() }
            do { try await newer.migrate() } catch let error as NorqError { #expect(error.code == .storeSchemaTooNew) }
        }
    }

    /// A database of schema version 1 (before completions moved rows by trigger) or 2 (the trigger on
    /// `UPDATE OF state`) migrates to the current version, and a row completed after the migration still leaves the
    /// outbox for history, with its finish time.
    @Test(arguments: [1, 2])
    func olderDatabaseMigratesAndStillMovesFinishedRows(from version: Int) async throws {
        try await Self.withStore { store, directory in
            let path = directory.appendingPathComponent("norq.db").path
            await store.close()
            try await SQLiteTestSupport.execute(path: path, "DROP TRIGGER norq_outbox_finished")
            try await SQLiteTestSupport.execute(path: path, "DROP TRIGGER norq_history_moved")
            // Undo version 4 (the registry per environment): the outbox's environment column, the registry of
            // version 1.
            try await SQLiteTestSupport.execute(path: path, "ALTER TABLE norq_outbox DROP COLUMN environment")
            try await SQLiteTestSupport.execute(path: path, "DROP TABLE norq_invalid_tokens")
            try await SQLiteTestSupport.execute(path: path, SQLiteSchema.migrations[0].last!)
            if version == 2 { try await SQLiteTestSupport.execute(path: path, SQLiteSchema.migrations[1][0]) }
            try await SQLiteTestSupport.execute(path: path, "UPDATE norq_schema SET version = \(version)")
            let reopened = try await SQLiteDeliveryStore.open(path: path)
            #expect(try await reopened.schemaVersion() == version)
            try await reopened.migrate()
            #expect(try await reopened.schemaVersion() == SQLiteSchema.migrations.count)
            let triggers = try await SQLiteTestSupport.query(
                path: path, "SELECT sql FROM sqlite_master WHERE type = 'trigger' ORDER BY name")
            #expect(triggers.count == 2, "\(triggers)")
            #expect(triggers.first?.contains("AFTER INSERT ON norq_history") == true, "\(triggers)")
            #expect(triggers.last?.contains("AFTER UPDATE OF last_state ON norq_outbox") == true, "\(triggers)")
            let sendID = try await reopened.enqueue(StoreConformance.send(tokens: ["a", "b"]), now: 10,
                                                    idempotencyWindow: StoreConformance.window).sendID
            let claimed = try await reopened.claim(owner: "w", limit: 10, now: 10, leaseUntil: 1_000)
            let report = try await reopened.complete(claimed.map {
                .finish($0.lease!, StoredOutcome(state: .delivered, status: 200, messageID: "m"))
            }, now: 20)
            #expect(report.applied.count == 2)
            let rows = try await reopened.deliveries(ofSend: sendID)
            #expect(rows.map(\.state) == [.delivered, .delivered])
            #expect(rows.allSatisfy { $0.finishedAt == 20 && $0.leaseExpiresAt == nil && $0.leaseToken == nil })
            #expect(try await reopened.claim(owner: "w", limit: 10, now: 5_000, leaseUntil: 6_000).isEmpty)
            await reopened.close()
        }
    }

    @Test func corruptFileIsAClearError() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("norq.db").path
        try Data(repeating: 0x5a, count: 8192).write(to: URL(fileURLWithPath: path))
        do {
            let store = try await SQLiteDeliveryStore.open(path: path)
            try await store.migrate()
            Issue.record("a corrupt file must not open")
        } catch {
            #expect(error.code == .storeCorrupt)
            #expect(error.message.contains(path))
        }
    }

    @Test func unopenablePathIsUnreachable() async throws {
        do {
            _ = try await SQLiteDeliveryStore.open(path: "/nonexistent-norq-dir/sub/norq.db")
            Issue.record("a path in a missing directory must not open")
        } catch {
            #expect(error.code == .storeUnreachable)
            #expect(error.message.contains("/nonexistent-norq-dir/sub/norq.db"))
        }
    }

    @Test func rowsSurviveReopening() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("norq.db").path
        let first = try await SQLiteDeliveryStore.open(path: path)
        try await first.migrate()
        let id = try await first.enqueue(StoreConformance.send(key: "k", tokens: ["a", "b"]), now: 0,
                                         idempotencyWindow: .seconds(60)).sendID
        _ = try await first.claim(owner: "crashed", limit: 1, now: 0, leaseUntil: 1_000)
        await first.close()
        let second = try await SQLiteDeliveryStore.open(path: path)
        try await second.migrate()
        #expect(try await second.enqueue(StoreConformance.send(key: "k", tokens: ["a", "b"]), now: 10,
                                         idempotencyWindow: .seconds(60)) == .existing(sendID: id))
        #expect(try await second.claim(owner: "new", limit: 10, now: 10, leaseUntil: 2_000).count == 1)
        let recovered = try await second.claim(owner: "new", limit: 10, now: 1_000, leaseUntil: 2_000)
        #expect(recovered.count == 1 && recovered[0].mayHaveBeenDelivered)
        await second.close()
    }
}

@Suite struct DeliveryStoreRulesTests {
    @Test func leaseExpiryAndClaimability() {
        #expect(DeliveryStoreRules.leaseExpiry(now: 1_000, leaseDuration: .seconds(30)) == 31_000)
        #expect(DeliveryStoreRules.isClaimable(state: .pending, nextAttemptAt: 10, leaseExpiresAt: nil, now: 10))
        #expect(!DeliveryStoreRules.isClaimable(state: .pending, nextAttemptAt: 11, leaseExpiresAt: nil, now: 10))
        #expect(!DeliveryStoreRules.isClaimable(state: .leased, nextAttemptAt: 0, leaseExpiresAt: 11, now: 10))
        #expect(DeliveryStoreRules.isClaimable(state: .leased, nextAttemptAt: 0, leaseExpiresAt: 10, now: 10))
        #expect(!DeliveryStoreRules.isClaimable(state: .delivered, nextAttemptAt: 0, leaseExpiresAt: nil, now: 10))
        #expect(DeliveryStoreRules.mayHaveBeenDelivered(afterClaimingFrom: .leased, previously: false))
        #expect(!DeliveryStoreRules.mayHaveBeenDelivered(afterClaimingFrom: .pending, previously: false))
        #expect(DeliveryStoreRules.mayHaveBeenDelivered(afterClaimingFrom: .pending, previously: true))
    }

    @Test func renewal() {
        #expect(!DeliveryStoreRules.needsRenewal(expiresAt: 30_000, now: 0, leaseDuration: .seconds(30)))
        #expect(!DeliveryStoreRules.needsRenewal(expiresAt: 30_000, now: 9_000, leaseDuration: .seconds(30)))
        #expect(DeliveryStoreRules.needsRenewal(expiresAt: 30_000, now: 10_000, leaseDuration: .seconds(30)))
    }

    @Test func idempotencyDecisions() {
        let window = Duration.seconds(10)
        #expect(DeliveryStoreRules.idempotency(existingSendID: nil, existingFingerprint: nil, existingCreatedAt: nil,
                                               fingerprint: "f", now: 0, window: window) == .create)
        #expect(DeliveryStoreRules.idempotency(existingSendID: "s", existingFingerprint: "f", existingCreatedAt: 0,
                                               fingerprint: "f", now: 9_999, window: window) == .existing(sendID: "s"))
        #expect(DeliveryStoreRules.idempotency(existingSendID: "s", existingFingerprint: "g", existingCreatedAt: 0,
                                               fingerprint: "f", now: 9_999, window: window) == .reused(sendID: "s"))
        #expect(DeliveryStoreRules.idempotency(existingSendID: "s", existingFingerprint: "g", existingCreatedAt: 0,
                                               fingerprint: "f", now: 10_000, window: window) == .expired(sendID: "s"))
        #expect(DeliveryStoreRules.keyReusedError(key: "k", sendID: "s").code == .idempotencyKeyReused)
    }

    @Test func tokenRegistryRule() {
        #expect(DeliveryStoreRules.isInvalid(invalidSince: 100, registeredAt: nil))
        #expect(DeliveryStoreRules.isInvalid(invalidSince: 100, registeredAt: 100))
        #expect(!DeliveryStoreRules.isInvalid(invalidSince: 100, registeredAt: 101))
        let record = InvalidTokenRecord(token: "t", provider: "apns", reason: "Unregistered", invalidSince: 5,
                                        recordedAt: 6)
        let outcome = DeliveryStoreRules.invalidTokenOutcome(record)
        #expect(outcome.state == .skipped && outcome.code == NorqError.Code.tokenInvalid.rawValue)
    }

    @Test func retryAndPruneTimes() {
        #expect(DeliveryStoreRules.retryAt(now: 1_000, delay: .milliseconds(250)) == 1_250)
        #expect(DeliveryStoreRules.retryAt(now: 1_000, delay: .milliseconds(-5)) == 1_000)
        #expect(DeliveryStoreRules.pruneBefore(now: 100_000, retention: .seconds(60)) == 40_000)
        #expect(Duration.milliseconds(1_500).wholeMilliseconds == 1_500)
    }
}
