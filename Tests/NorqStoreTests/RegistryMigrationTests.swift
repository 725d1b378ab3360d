import Foundation
import NorqCore
import NorqStore
@testable import NorqStorePostgres
@testable import NorqStoreSQLite
import Testing

/// Databases of the schema before the token registry was per (token, provider, environment) (SQLite version 3,
/// PostgreSQL version 2) keep their sends, rows and registry entries through the migration; the old entries get
/// no environment and keep skipping the token in every environment (as before) until it is registered again.
enum RegistryMigration {
    /// Rows an older norq left: send s1 with a pending row (token "live"), and two registry entries: "dead"
    /// (apns, Unregistered at 50) and "orphan" (no provider).
    static let legacyRows = [
        "INSERT INTO norq_sends (id, scope, fingerprint, content, created_at, target_count) VALUES ('s1', '', 'f', '{}', 0, 1)",
        """
        INSERT INTO norq_outbox (send_id, position, target, identity, provider, state, next_attempt_at, message_id)
        VALUES ('s1', 0, '{"token":"live","platform":"ios"}', 'live', 'apns', 'pending', 0, 'm-live')
        """,
        """
        INSERT INTO norq_invalid_tokens (token, provider, reason, invalid_since, recorded_at)
        VALUES ('dead', 'apns', 'Unregistered', 50, 60), ('orphan', NULL, 'BadDeviceToken', 70, 70)
        """,
    ]

    /// What every store checks after migrating a database with `legacyRows`.
    static func check(_ store: any DeliveryStore) async throws {
        let registry = try await store.invalidTokens(limit: 10)
        #expect(registry.map(\.token) == ["orphan", "dead"])
        #expect(registry.allSatisfy { $0.environment == nil })
        #expect(registry.last?.provider == "apns" && registry.last?.reason == "Unregistered")
        #expect(registry.last?.invalidSince == 50 && registry.last?.recordedAt == 60)
        #expect(registry.first?.provider == nil)
        // The old entries skip the token in every environment and, without a provider, through every provider.
        let send = StoreConformance.send(to: [("dead", "apns", "production"), ("dead", "apns", "sandbox"),
                                              ("orphan", "apns-2", "sandbox"), ("fresh", "apns", "sandbox")])
        let id = try await store.enqueue(send, now: 100, idempotencyWindow: StoreConformance.window).sendID
        #expect(try await store.deliveries(ofSend: id).map(\.state) == [.skipped, .skipped, .skipped, .pending])
        // The old pending row is claimed and finishes with a sandbox BadDeviceToken: recorded for sandbox only.
        let claimed = try await store.claim(owner: "w", limit: 10, now: 110, leaseUntil: 200)
        let live = try #require(claimed.first { $0.identity == "live" })
        #expect(live.sendID == "s1" && live.messageID == "m-live")
        _ = try await store.complete([.finish(live.lease!, StoredOutcome(
            state: .rejected, status: 400, reason: "BadDeviceToken", code: "provider/rejected",
            classification: "token-invalid", environment: "sandbox"))], now: 120)
        #expect(try await store.deliveries(ofSend: "s1").map(\.state) == [.rejected])
        let after = StoreConformance.send(to: [("live", "apns", "sandbox"), ("live", "apns", "production")])
        let afterID = try await store.enqueue(after, now: 130, idempotencyWindow: StoreConformance.window).sendID
        #expect(try await store.deliveries(ofSend: afterID).map(\.state) == [.skipped, .pending])
        // Re-registering "dead" in production lifts the old entry (it applied there).
        try await store.registerToken("dead", provider: nil, environment: "production", at: 140)
        let again = StoreConformance.send(to: [("dead", "apns", "production")])
        let againID = try await store.enqueue(again, now: 150, idempotencyWindow: StoreConformance.window).sendID
        #expect(try await store.deliveries(ofSend: againID).map(\.state) == [.pending])
    }
}

@Suite struct SQLiteRegistryMigrationTests {
    @Test func versionThreeDatabaseKeepsItsRecordsThroughTheRegistryMigration() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("norq.db").path
        // Schema version 3 as the previous norq made it.
        var statements = SQLiteSchema.migrations[0..<3].flatMap { $0 }
        statements += [
            "CREATE TABLE norq_schema (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)",
            "INSERT INTO norq_schema (id, version) VALUES (1, 3)",
        ] + RegistryMigration.legacyRows
        for statement in statements { try await SQLiteTestSupport.execute(path: path, statement) }
        let store = try await SQLiteDeliveryStore.open(path: path)
        #expect(try await store.schemaVersion() == 3)
        try await store.migrate()
        #expect(try await store.schemaVersion() == SQLiteSchema.migrations.count)
        do {
            try await RegistryMigration.check(store)
        } catch {
            await store.close()
            throw error
        }
        await store.close()
    }
}

@Suite(PostgresTestServer.enabled) struct PostgresRegistryMigrationTests {
    @Test func versionTwoDatabaseKeepsItsRecordsThroughTheRegistryMigration() async throws {
        try await PostgresTestServer.withDatabase { configuration in
            var statements = PostgresSchema.migrations[0..<2].flatMap { $0 }
            statements += [
                "CREATE TABLE norq_schema (id int PRIMARY KEY CHECK (id = 1), version int NOT NULL)",
                "INSERT INTO norq_schema (id, version) VALUES (1, 2)",
            ] + RegistryMigration.legacyRows
            // A send of version 2 records its rows' id range.
            statements.append("UPDATE norq_sends SET first_row_id = (SELECT min(id) FROM norq_outbox), last_row_id = (SELECT max(id) FROM norq_outbox)")
            for statement in statements { try await PostgresTestServer.admin(configuration, statement) }
            let store = PostgresDeliveryStore(configuration: configuration,
                                              settings: DeliveryStoreSettings(callTimeout: .seconds(20), poolSize: 2))
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await store.run() }
                defer { group.cancelAll() }
                #expect(try await store.schemaVersion() == 2)
                try await store.migrate()
                #expect(try await store.schemaVersion() == PostgresSchema.migrations.count)
                try await RegistryMigration.check(store)
            }
        }
    }
}
