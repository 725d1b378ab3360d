import NorqCore
@testable import NorqStorePostgres
import PostgresNIO
import Testing

/// The PostgreSQL store's prepared hot-path statements: they keep their compare-and-set over many executions on one
/// connection (from the sixth, PostgreSQL may run its generic plan, planned without the arrays' lengths), and the
/// bulk enqueue path (more than 5,000 targets) files rows exactly like the one-statement path, and a database of
/// schema version 1 keeps its sends' rows through migration 2 (a send's rows found by their id range, which other
/// sends enqueued at the same time share).
@Suite(PostgresTestServer.enabled) struct PostgresStatementTests {
    static let window = Duration.seconds(3600)

    /// Two connections (the LISTEN loop holds one), so every statement runs often enough on the other for the
    /// generic plan.
    static let oneConnection = DeliveryStoreSettings(callTimeout: .seconds(20), poolSize: 2)

    @Test func compareAndSetHoldsUnderTheGenericPlan() async throws {
        try await PostgresTestServer.withStore(settings: Self.oneConnection) { store, _ in
            // Twelve rounds of claim / renew / complete on one connection: the later ones may run the generic plans.
            for round in 0..<12 {
                let now = Int64(round * 1_000)
                let send = StoreConformance.send(tokens: ["a\(round)", "b\(round)", "c\(round)", "d\(round)"])
                _ = try await store.enqueue(send, now: now, idempotencyWindow: Self.window)
                let first = try await store.claim(owner: "w1", limit: 10, now: now, leaseUntil: now + 100)
                #expect(first.count == 4)
                // Two leases expire and another worker takes them over.
                let second = try await store.claim(owner: "w2", limit: 2, now: now + 100, leaseUntil: now + 500)
                #expect(second.count == 2)
                #expect(second.allSatisfy { $0.mayHaveBeenDelivered })
                let taken = Set(second.map(\.id))
                // The first worker can renew, finish, retry or release only the rows it still holds.
                let renewed = try await store.renew(first.compactMap(\.lease), until: now + 400)
                #expect(renewed == Set(first.map(\.id)).subtracting(taken))
                let delivered = StoredOutcome(state: .delivered, status: 200)
                let retry = StoredOutcome(state: .rejected, status: 503, classification: "retryable")
                let report = try await store.complete([
                    .finish(first[0].lease!, delivered), .finish(first[1].lease!, delivered),
                    .retry(first[2].lease!, at: now + 900, last: retry), .release(first[3].lease!),
                ], now: now + 150)
                #expect(report.applied == Set(first.map(\.id)).subtracting(taken))
                #expect(report.lost == taken)
                // Finishes alone and updates alone are one statement each: the same compare-and-set.
                let stale = try await store.complete(first.filter { taken.contains($0.id) }
                    .map { .finish($0.lease!, StoredOutcome(state: .failed)) }, now: now + 160)
                #expect(stale.applied.isEmpty && stale.lost == taken)
                let staleRelease = try await store.complete(first.filter { taken.contains($0.id) }
                    .map { .release($0.lease!) }, now: now + 160)
                #expect(staleRelease.applied.isEmpty)
                let won = try await store.complete(second.map { .finish($0.lease!, delivered) }, now: now + 200)
                #expect(won.applied == taken)
                // What is left of the send (one retry, one released row) is taken and finished once.
                let rest = try await store.claim(owner: "w3", limit: 10, now: now + 900, leaseUntil: now + 1_000)
                #expect(rest.count == 2)
                let done = try await store.complete(rest.map { .finish($0.lease!, delivered) }, now: now + 950)
                #expect(done.applied.count == 2)
                let rows = try await store.deliveries(ofSend: send.id)
                #expect(rows.count == 4 && rows.allSatisfy { $0.state == .delivered && $0.finishedAt != nil })
            }
            let counts = try await store.counts()
            #expect(counts == [.delivered: 48])
        }
    }

    @Test func versionOneDatabaseKeepsItsSendsRowsThroughMigrationTwo() async throws {
        try await PostgresTestServer.withDatabase { configuration in
            // Schema version 1 as an older norq left it: send s1's rows have ids 1 (history) and 3 (outbox), and
            // send s2's row took id 2 in between.
            let v1 = PostgresSchema.migrations[0] + [
                "CREATE TABLE norq_schema (id int PRIMARY KEY CHECK (id = 1), version int NOT NULL)",
                "INSERT INTO norq_schema (id, version) VALUES (1, 1)",
                """
                INSERT INTO norq_sends (id, scope, fingerprint, content, created_at, target_count)
                VALUES ('s1', '', 'f', '{}', 0, 2), ('s2', '', 'f', '{}', 0, 1), ('s3', '', 'f', '{}', 0, 0)
                """,
                """
                INSERT INTO norq_history (id, send_id, position, target, identity, state, attempts, next_attempt_at,
                    may_have_been_delivered, last_state, finished_at)
                VALUES (nextval('norq_rows_id'), 's1', 0, 't', 'a', 'delivered', 1, 0, false, 'delivered', 5)
                """,
                "INSERT INTO norq_outbox (send_id, position, target, identity, state, next_attempt_at) VALUES ('s2', 0, 't', 'c', 'pending', 0)",
                "INSERT INTO norq_outbox (send_id, position, target, identity, state, next_attempt_at) VALUES ('s1', 1, 't', 'b', 'pending', 0)",
            ]
            for statement in v1 { try await PostgresTestServer.admin(configuration, statement) }
            let store = PostgresDeliveryStore(configuration: configuration, settings: Self.oneConnection)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await store.run() }
                defer { group.cancelAll() }
                try await store.migrate()
                #expect(try await store.schemaVersion() == PostgresSchema.migrations.count)
                #expect(try await store.deliveries(ofSend: "s1").map(\.identity) == ["a", "b"])
                #expect(try await store.deliveries(ofSend: "s2").map(\.identity) == ["c"])
                #expect(try await store.deliveries(ofSend: "s3").isEmpty)
                let claimed = try await store.claim(owner: "w", limit: 10, now: 0, leaseUntil: 100)
                #expect(claimed.map(\.identity) == ["c", "b"])
                let report = try await store.complete(claimed.map { .finish($0.lease!, StoredOutcome(state: .delivered)) },
                                                      now: 10)
                #expect(report.applied.count == 2)
                let s1 = try await store.deliveries(ofSend: "s1")
                #expect(s1.map(\.identity) == ["a", "b"] && s1.allSatisfy { $0.state == .delivered })
                // A new send after the migration is found by its own range, next to the old ones.
                let send = StoreConformance.send(tokens: ["d", "e"])
                _ = try await store.enqueue(send, now: 20, idempotencyWindow: Self.window)
                #expect(try await store.deliveries(ofSend: send.id).map(\.identity) == ["d", "e"])
                // Pruning everything finished before 15 leaves s1 and s2 without rows: they go, s3 (no rows) too.
                #expect(try await store.prune(finishedBefore: 15, limit: 100) == 3)
                #expect(try await store.send(id: "s1") == nil)
                #expect(try await store.send(id: "s3") == nil)
                #expect(try await store.send(id: send.id) != nil)
            }
        }
    }

    /// Schema version 3: a claim writes no indexed column, so every row it leases is a HOT update (no index entry),
    /// counted by PostgreSQL's own statistics of the claim's transaction.
    @Test func aClaimIsAHeapOnlyUpdate() async throws {
        try await PostgresTestServer.withStore(settings: Self.oneConnection) { store, _ in
            // Tokens as long as an APNs token: the new versions of a page's rows must fit on that page.
            let tokens = (0..<300).map { String(repeating: "ab", count: 30) + String(1_000 + $0) }
            _ = try await store.enqueue(StoreConformance.send(tokens: tokens), now: 0, idempotencyWindow: Self.window)
            let logger = store.logger
            let (claimed, updates, hot) = try await store.client.withConnection { connection in
                try await connection.query("BEGIN", logger: logger)
                var claimed = 0
                let statement = ClaimStatement(now: 0, limit: 300, owner: "worker-with-a-long-name-0001",
                                               tokenBase: RequestID.random(), leaseUntil: 100)
                for try await rows in try await connection.execute(statement, logger: logger) { claimed += rows.count }
                var counts = (Int64(0), Int64(0))
                for try await row in try await connection.query("""
                    SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = 'norq_outbox'
                    """, logger: logger).decode((Int64, Int64).self) { counts = row }
                try await connection.query("COMMIT", logger: logger)
                return (claimed, counts.0, counts.1)
            }
            #expect(claimed == 300)
            #expect(updates == 300 && hot == 300, "every lease a HOT update: \(hot) of \(updates)")
            // The leased rows are still found by the claim's scan once their lease expires, and flagged.
            #expect(try await store.claim(owner: "w2", limit: 300, now: 50, leaseUntil: 200).isEmpty)
            let again = try await store.claim(owner: "w2", limit: 300, now: 100, leaseUntil: 200)
            #expect(again.count == 300 && again.allSatisfy { $0.mayHaveBeenDelivered && $0.attempts == 2 })
        }
    }

    @Test func versionTwoDatabaseKeepsItsRowsThroughMigrationThree() async throws {
        try await PostgresTestServer.withDatabase { configuration in
            // Schema version 2 with a due row, a scheduled one, an expired lease and a lease still held.
            let v2 = PostgresSchema.migrations[0] + PostgresSchema.migrations[1] + [
                "CREATE TABLE norq_schema (id int PRIMARY KEY CHECK (id = 1), version int NOT NULL)",
                "INSERT INTO norq_schema (id, version) VALUES (1, 2)",
                """
                INSERT INTO norq_sends (id, scope, fingerprint, content, created_at, target_count, first_row_id,
                    last_row_id) VALUES ('s1', '', 'f', '{}', 0, 4, 1, 4)
                """,
                """
                INSERT INTO norq_outbox (id, send_id, position, target, identity, state, attempts, next_attempt_at,
                    lease_owner, lease_token, lease_expires_at) VALUES
                    (1, 's1', 0, 't', 'due', 'pending', 0, 10, NULL, NULL, NULL),
                    (2, 's1', 1, 't', 'later', 'pending', 0, 500, NULL, NULL, NULL),
                    (3, 's1', 2, 't', 'expired', 'leased', 1, 0, 'old', 'old-3', 50),
                    (4, 's1', 3, 't', 'held', 'leased', 1, 0, 'old', 'old-4', 1000)
                """,
                "SELECT setval('norq_rows_id', 4)",
            ]
            for statement in v2 { try await PostgresTestServer.admin(configuration, statement) }
            let store = PostgresDeliveryStore(configuration: configuration, settings: Self.oneConnection)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await store.run() }
                defer { group.cancelAll() }
                try await store.migrate()
                #expect(try await store.schemaVersion() == 3)
                // One index besides the primary key, with no predicate; room on each page for a claim's versions.
                var indexes: [String: Bool] = [:]
                for try await (name, partial) in try await store.client.query("""
                    SELECT c.relname::text, i.indpred IS NOT NULL FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                    WHERE i.indrelid = 'norq_outbox'::regclass
                    """).decode((String, Bool).self) { indexes[name] = partial }
                #expect(indexes == ["norq_outbox_pkey": false, "norq_outbox_due": false])
                var options: [String] = []
                for try await option in try await store.client.query(
                    "SELECT unnest(reloptions)::text FROM pg_class WHERE relname = 'norq_outbox'").decode(String.self) {
                    options.append(option)
                }
                #expect(options == ["fillfactor=40"])
                let depth = try await store.queueDepth(now: 100)
                #expect(depth.due == 1 && depth.scheduled == 1 && depth.leased == 1 && depth.leaseExpired == 1)
                // The due row and the expired lease (flagged: it may have been sent); not the held lease, not the
                // row due later.
                let claimed = try await store.claim(owner: "w", limit: 10, now: 100, leaseUntil: 2_000)
                #expect(claimed.map(\.identity) == ["due", "expired"])
                #expect(claimed.map(\.mayHaveBeenDelivered) == [false, true])
                #expect(claimed.map(\.attempts) == [1, 2])
                // The old lease lost its row; the held one keeps it.
                let stale = try await store.complete([.finish(Lease(rowID: 3, token: "old-3"), StoredOutcome(state: .failed))],
                                                     now: 110)
                #expect(stale.applied.isEmpty)
                let held = try await store.complete([.finish(Lease(rowID: 4, token: "old-4"),
                                                             StoredOutcome(state: .delivered, status: 200))], now: 110)
                #expect(held.applied == [4])
                let later = try await store.claim(owner: "w", limit: 10, now: 500, leaseUntil: 2_000)
                #expect(later.map(\.identity) == ["later"])
            }
        }
    }

    /// Concurrent small sends share a transaction (group commit); one that fails there (here: a send id used
    /// twice) fails alone, and every other send of its batch is committed.
    @Test func groupCommittedSmallSendsFailAlone() async throws {
        try await PostgresTestServer.withStore { store, _ in
            let sends = (0..<40).map { n in StoreConformance.send(tokens: ["g\(n)-a", "g\(n)-b"]) }
            var twin = StoreConformance.send(tokens: ["twin"])
            twin.id = sends[7].id
            let outcomes = try await withThrowingTaskGroup(of: (String, Bool).self) { group in
                for send in sends + [twin] {
                    group.addTask {
                        do {
                            _ = try await store.enqueue(send, now: 0, idempotencyWindow: Self.window)
                            return (send.targets[0].identity, true)
                        } catch {
                            return (send.targets[0].identity, false)
                        }
                    }
                }
                var outcomes: [String: Bool] = [:]
                for try await (identity, created) in group { outcomes[identity] = created }
                return outcomes
            }
            // Of the two sends with one id, exactly one is committed; every other send is.
            #expect(outcomes.filter { !$0.value }.count == 1, "\(outcomes.filter { !$0.value })")
            #expect([outcomes["g7-a"], outcomes["twin"]].compactMap { $0 }.filter { $0 }.count == 1)
            for send in sends where send.id != sends[7].id {
                #expect(try await store.deliveries(ofSend: send.id).map(\.identity) == send.targets.map(\.identity))
            }
        }
    }

    @Test func concurrentSendsWithInterleavedRowIDsReadBackTheirOwnRows() async throws {
        try await PostgresTestServer.withStore(settings: DeliveryStoreSettings(callTimeout: .seconds(20), poolSize: 6)) { store, _ in
            // Two bulk sends (two chunks each) and small sends at once: their rows' ids interleave, so each send's
            // id range holds other sends' rows too.
            // (Tokens with a non-ASCII letter: text arrays carry UTF-8 byte lengths.)
            let bulk = (0..<2).map { n in StoreConformance.send(tokens: (0..<6_000).map { "b\(n)-é\($0)" }) }
            let small = (0..<8).map { n in StoreConformance.send(tokens: (0..<3).map { "s\(n)-\($0)" }) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for send in bulk + small {
                    group.addTask { _ = try await store.enqueue(send, now: 0, idempotencyWindow: Self.window) }
                }
                try await group.waitForAll()
            }
            for send in bulk + small {
                let rows = try await store.deliveries(ofSend: send.id)
                #expect(rows.map(\.identity) == send.targets.map(\.identity))
                #expect(rows.map(\.target) == send.targets.map(\.target))
                #expect(rows.map(\.recipientID) == send.targets.map(\.recipientID))
                #expect(rows.map(\.messageID) == send.targets.map(\.messageID))
                #expect(rows.map(\.provider) == send.targets.map(\.provider))
                #expect(rows.allSatisfy { $0.sendID == send.id && $0.state == .pending })
            }
        }
    }

    @Test func bulkSendFilesRowsLikeASmallSend() async throws {
        try await PostgresTestServer.withStore { store, _ in
            // A token reported invalid, then a send of 12,001 targets (three chunks) with it and a routing outcome.
            _ = try await store.enqueue(StoreConformance.send(tokens: ["dead"]), now: 0, idempotencyWindow: Self.window)
            let claimed = try await store.claim(owner: "w", limit: 1, now: 0, leaseUntil: 100)
            _ = try await store.complete([
                .finish(claimed[0].lease!, StoredOutcome(state: .rejected, status: 410, reason: "Unregistered",
                                                         classification: "token-invalid", invalidSince: 5)),
            ], now: 10)
            var bulk = StoreConformance.send(tokens: (0..<12_000).map { "t\($0)" } + ["dead"])
            bulk.targets[7].provider = nil
            bulk.targets[7].outcome = StoredOutcome(state: .failed, reason: "no provider", code: "routing/no-provider")
            let small = StoreConformance.send(tokens: ["dead", "t7", "x"])
            var smallSend = small
            smallSend.targets[1].provider = nil
            smallSend.targets[1].outcome = bulk.targets[7].outcome
            for send in [bulk, smallSend] {
                #expect(try await store.enqueue(send, now: 20, idempotencyWindow: Self.window) == .created(sendID: send.id))
                let rows = try await store.deliveries(ofSend: send.id)
                #expect(rows.count == send.targets.count)
                #expect(rows.map(\.position) == Array(0..<send.targets.count))
                let dead = try #require(rows.first { $0.identity == "dead" })
                #expect(dead.state == .skipped && dead.last?.code == "token/invalid" && dead.finishedAt == 20)
                #expect(dead.last?.invalidSince == 5 && dead.messageID == "m-dead")
                let routed = try #require(rows.first { $0.identity == "t7" })
                #expect(routed.state == .failed && routed.last?.code == "routing/no-provider" && routed.finishedAt == 20)
                #expect(rows.filter { $0.state == .pending }.count == send.targets.count - 2)
                #expect(rows.allSatisfy { $0.state != .pending || ($0.nextAttemptAt == 20 && $0.finishedAt == nil) })
            }
            let sends = try await store.sends(ids: [bulk.id, smallSend.id, bulk.id, "missing"])
            #expect(Set(sends.keys) == [bulk.id, smallSend.id])
            #expect(sends[bulk.id]?.targetCount == 12_001)
        }
    }
}
