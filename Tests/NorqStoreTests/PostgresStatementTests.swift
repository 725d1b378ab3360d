import NorqCore
import NorqStore
@testable import NorqStorePostgres
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
                // The segment's lease expires and another worker takes it over (every open target, flagged).
                let second = try await store.claim(owner: "w2", limit: 2, now: now + 100, leaseUntil: now + 500)
                #expect(second.count == 4)
                #expect(second.allSatisfy { $0.mayHaveBeenDelivered && $0.attempts == 2 })
                // The first worker can neither renew nor complete anything.
                #expect(try await store.renew(first.compactMap(\.lease), until: now + 400).isEmpty)
                let delivered = StoredOutcome(state: .delivered, status: 200)
                let retry = StoredOutcome(state: .rejected, status: 503, classification: "retryable")
                let stale = try await store.complete(first.map { .finish($0.lease!, delivered) }, now: now + 150)
                #expect(stale.applied.isEmpty && stale.lost == Set(first.map(\.id)))
                #expect(try await store.renew(second.compactMap(\.lease), until: now + 600) == Set(second.map(\.id)))
                let report = try await store.complete([
                    .finish(second[0].lease!, delivered), .finish(second[1].lease!, delivered),
                    .retry(second[2].lease!, at: now + 900, last: retry), .release(second[3].lease!),
                ], now: now + 200)
                #expect(report.applied == Set(second.map(\.id)) && report.lost.isEmpty)
                // What is left of the send (one retry, one released target) is taken and finished once.
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

    /// A claim returns its rows as column arrays (one per column, NULL sent as '' or -1): every field of a claimed
    /// row equals the same row read back by the other decoder (`deliveries(ofSend:)`), with and without a last
    /// outcome, NULL and non-ASCII values included; a claim of nothing is empty.
    @Test func claimedRowsEqualTheRowsReadBack() async throws {
        try await PostgresTestServer.withStore(settings: Self.oneConnection) { store, _ in
            #expect(try await store.claim(owner: "w", limit: 10, now: 0, leaseUntil: 100).isEmpty)
            var send = StoreConformance.send(tokens: ["é-0", "b", "c"])
            send.targets[1].recipientID = nil
            send.targets[1].messageID = nil
            _ = try await store.enqueue(send, now: 5, idempotencyWindow: Self.window)
            let first = try await store.claim(owner: "worker-1", limit: 10, now: 10, leaseUntil: 100)
            #expect(first == (try await store.deliveries(ofSend: send.id)))
            #expect(first.map(\.identity) == ["é-0", "b", "c"] && first.allSatisfy { $0.last == nil && $0.attempts == 1 })
            #expect(first[1].recipientID == nil && first[1].messageID == nil && first[0].recipientID == "u0")
            // A retry with every field of its outcome set, a release, and a lease left to expire.
            let last = StoredOutcome(state: .rejected, status: 503, reason: "ServiceUnavailable", code: "provider/busy",
                                     classification: "retryable", invalidSince: 7, messageID: "apns-é",
                                     mayHaveBeenDelivered: true)
            _ = try await store.complete([.retry(first[0].lease!, at: 50, last: last), .release(first[1].lease!)],
                                         now: 20)
            // The retried and the released target moved to segments of their own; the third is taken over.
            let second = try await store.claim(owner: "worker-2", limit: 10, now: 100, leaseUntil: 200)
                .sorted { $0.position < $1.position }
            #expect(second == (try await store.deliveries(ofSend: send.id)))
            #expect(second.count == 3)
            #expect(second[0].last == last && second[0].attempts == 2 && second[0].mayHaveBeenDelivered)
            #expect(second[1].last == nil && second[1].attempts == 1 && !second[1].mayHaveBeenDelivered)
            #expect(second[2].mayHaveBeenDelivered && second[2].attempts == 2, "an expired lease taken over")
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
