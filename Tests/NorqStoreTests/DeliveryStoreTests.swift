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
                                                             SQLiteDeliveryStore.claimSegments(limit: 256),
                                                             parameters: 4)
            #expect(plan.contains { $0.contains("INDEX norq_segments_due (") }, "\(plan)")
            #expect(plan.contains { $0.contains("INDEX norq_segments_leases (") }, "\(plan)")
            #expect(!plan.contains { $0.hasPrefix("SCAN norq_segments") }, "\(plan)")
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

    /// A database of schema version 4 (a row per push) migrates to segments: a pending row stays due with its
    /// attempts, a leased row becomes due when its lease ends and says it may have been delivered, a finished row
    /// keeps its outcome and finish time; the old tables and triggers are gone.
    @Test func version4RowsBecomeSegments() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("norq.db").path
        try await SQLiteTestSupport.execute(
            path: path, "CREATE TABLE norq_schema (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)")
        for statement in SQLiteSchema.migrations[0..<4].flatMap({ $0 }) {
            try await SQLiteTestSupport.execute(path: path, statement)
        }
        try await SQLiteTestSupport.execute(path: path, "INSERT INTO norq_schema (id, version) VALUES (1, 4)")
        try await SQLiteTestSupport.execute(path: path, """
            INSERT INTO norq_sends (id, scope, idempotency_key, fingerprint, content, created_at, target_count)
            VALUES ('s1', '', NULL, 'f', '{}', 0, 3)
            """)
        try await SQLiteTestSupport.execute(path: path, """
            INSERT INTO norq_outbox (id, send_id, position, target, identity, provider, recipient_id, state, attempts,
                next_attempt_at, lease_owner, lease_token, lease_expires_at, message_id, may_have_been_delivered)
            VALUES (1, 's1', 0, '{"token":"a"}', 'a', 'apns', NULL, 'pending', 1, 0, NULL, NULL, NULL, 'm-a', 0),
                   (2, 's1', 1, '{"token":"b"}', 'b', 'apns', NULL, 'leased', 1, 0, 'w', 'x', 500, 'm-b', 0)
            """)
        try await SQLiteTestSupport.execute(path: path, """
            INSERT INTO norq_history (id, send_id, position, target, identity, provider, recipient_id, state, attempts,
                next_attempt_at, message_id, may_have_been_delivered, last_state, last_status, last_message_id,
                finished_at)
            VALUES (3, 's1', 2, '{"token":"c"}', 'c', 'apns', NULL, 'delivered', 1, 0, 'm-c', 0, 'delivered', 200,
                'm-c', 50)
            """)
        let store = try await SQLiteDeliveryStore.open(path: path)
        try await store.migrate()
        #expect(try await store.schemaVersion() == SQLiteSchema.migrations.count)
        let tables = try await SQLiteTestSupport.query(
            path: path, "SELECT name FROM sqlite_master WHERE name IN ('norq_outbox', 'norq_history') OR type = 'trigger'")
        #expect(tables.isEmpty, "\(tables)")
        let rows = try await store.deliveries(ofSend: "s1")
        #expect(rows.map(\.state) == [.pending, .pending, .delivered])
        #expect(rows.map(\.identity) == ["a", "b", "c"])
        #expect(!rows[0].mayHaveBeenDelivered && rows[1].mayHaveBeenDelivered)
        #expect(rows[2].finishedAt == 50 && rows[2].last?.messageID == "m-c")
        #expect(try await store.stateCounts(ofSend: "s1") == [.pending: 2, .delivered: 1])
        // Due: the pending row now, the leased one when its old lease ends (500).
        #expect(try await store.claim(owner: "w", limit: 10, now: 100, leaseUntil: 1_000).map(\.identity) == ["a"])
        let later = try await store.claim(owner: "w", limit: 10, now: 600, leaseUntil: 1_000)
        #expect(later.map(\.identity) == ["b"])
        #expect(later.first?.attempts == 2 && later.first?.messageID == "m-b")
        await store.close()
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
        // The crashed instance holds the send's segment (both targets) until its lease ends.
        #expect(try await second.claim(owner: "new", limit: 10, now: 10, leaseUntil: 2_000).isEmpty)
        let recovered = try await second.claim(owner: "new", limit: 10, now: 1_000, leaseUntil: 2_000)
        #expect(recovered.count == 2 && recovered.allSatisfy(\.mayHaveBeenDelivered))
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
