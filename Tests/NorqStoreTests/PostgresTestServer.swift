import Foundation
import Logging
import NorqCore
import NorqStore
@testable import NorqStorePostgres
import PostgresNIO
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The PostgreSQL server of the tests: `scripts/test.sh` starts one and exports its URL. Without the URL the
/// PostgreSQL tests FAIL, unless `NORQ_SKIP_POSTGRES=1` asks to skip them (then they are reported as skipped).
enum PostgresTestServer {
    static var url: String? { ProcessInfo.processInfo.environment["NORQ_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 } }
    static var skipRequested: Bool { ProcessInfo.processInfo.environment["NORQ_SKIP_POSTGRES"] == "1" }
    /// `pgctl stop|start` of the server `scripts/test.sh` started (chaos tests).
    static var control: String? { ProcessInfo.processInfo.environment["NORQ_TEST_POSTGRES_CTL"] }

    /// The trait of every PostgreSQL test.
    static let enabled = Testing.ConditionTrait.enabled(if: !skipRequested, "NORQ_SKIP_POSTGRES=1")

    static func baseConfiguration() throws -> PostgresStoreConfiguration {
        guard let url else {
            Issue.record("NORQ_TEST_POSTGRES_URL is not set: run the tests with scripts/test.sh (it starts a PostgreSQL server), or set NORQ_SKIP_POSTGRES=1 to skip the PostgreSQL tests explicitly")
            throw NorqError(.storeUnreachable, "no test PostgreSQL server")
        }
        return try PostgresStoreConfiguration(url: url)
    }

    /// Runs `body` with a fresh database on the test server, dropped afterwards.
    static func withDatabase(_ body: (PostgresStoreConfiguration) async throws -> Void) async throws {
        let base = try baseConfiguration()
        let name = "norq_t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        try await admin(base, "CREATE DATABASE \(name)")
        var configuration = base
        configuration.database = String(name)
        do {
            try await body(configuration)
        } catch {
            try? await admin(base, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            throw error
        }
        try await admin(base, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }

    /// Runs `body` with a migrated store on a fresh database (the store's `run()` runs meanwhile).
    static func withStore(settings: DeliveryStoreSettings = DeliveryStoreSettings(callTimeout: .seconds(20)),
                          _ body: @escaping @Sendable (PostgresDeliveryStore, PostgresStoreConfiguration) async throws -> Void) async throws {
        try await withDatabase { configuration in
            let store = PostgresDeliveryStore(configuration: configuration, settings: settings)
            try await store.withMigrated { try await body($0, configuration) }
        }
    }

    /// One statement outside a transaction on the server's default database.
    static func admin(_ configuration: PostgresStoreConfiguration, _ sql: String) async throws {
        let client = PostgresClient(configuration: .init(host: configuration.host, port: configuration.port,
                                                         username: configuration.username,
                                                         password: configuration.password,
                                                         database: configuration.database, tls: .disable),
                                    backgroundLogger: Logger(label: "norq.test.pg"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            try await client.query(PostgresQuery(unsafeSQL: sql))
        }
    }

    /// `pgctl stop|start` (the chaos tests). Spawned and reaped with posix_spawn/waitpid: Foundation's `Process`
    /// missed the exit of `pg_ctl start` (its server child keeps running) and waited forever.
    static func controlServer(_ action: String) throws {
        guard let control else {
            Issue.record("NORQ_TEST_POSTGRES_CTL is not set: run the tests with scripts/test.sh")
            return
        }
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup(control), strdup(action), nil]
        defer { for arg in argv { free(arg) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let spawned = posix_spawn(&pid, control, &actions, nil, argv, environ)
        #expect(spawned == 0, "pgctl \(action) could not start")
        guard spawned == 0 else { return }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1, errno == EINTR {}
        #expect(status == 0, "pgctl \(action) failed (status \(status))")
    }
}

@Suite(PostgresTestServer.enabled) struct PostgresStoreTests {
    @Test(arguments: StoreConformance.all.map(\.0))
    func conformance(_ name: String) async throws {
        let check = try #require(StoreConformance.all.first { $0.0 == name }?.1)
        try await PostgresTestServer.withStore { store, _ in try await check(store) }
    }

    @Test func concurrentEnqueuesOfOneKeyMakeOneSend() async throws {
        try await PostgresTestServer.withStore { store, _ in try await StoreConformance.concurrentSameKey(store) }
    }

    @Test func twoInstancesMigrateAtOnceAndClaimWithoutOverlap() async throws {
        try await PostgresTestServer.withDatabase { configuration in
            let first = PostgresDeliveryStore(configuration: configuration)
            let second = PostgresDeliveryStore(configuration: configuration)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await first.run() }
                group.addTask { try await second.run() }
                defer { group.cancelAll() }
                async let a: Void = first.migrate()
                async let b: Void = second.migrate()
                _ = try await (a, b)
                #expect(try await first.schemaVersion() == PostgresSchema.migrations.count)
                _ = try await first.enqueue(StoreConformance.send(tokens: (0..<300).map { "t\($0)" }), now: 0,
                                            idempotencyWindow: .seconds(60))
                async let claimA = first.claim(owner: "a", limit: 200, now: 0, leaseUntil: 100)
                async let claimB = second.claim(owner: "b", limit: 200, now: 0, leaseUntil: 100)
                let (rowsA, rowsB) = try await (claimA, claimB)
                #expect(rowsA.count + rowsB.count == 300)
                #expect(Set(rowsA.map(\.id)).isDisjoint(with: rowsB.map(\.id)))
            }
        }
    }

    @Test func schemaNewerThanTheCodeRefusesToRun() async throws {
        try await PostgresTestServer.withStore { store, configuration in
            try await PostgresTestServer.admin(configuration, "UPDATE norq_schema SET version = 99")
            do {
                try await store.migrate()
                Issue.record("a newer schema must refuse to run")
            } catch let error as NorqError {
                #expect(error.code == .storeSchemaTooNew)
            }
        }
    }

    @Test func unreachableServerIsAClearErrorNamingTheHost() async throws {
        // A port nothing listens on (the test server's port + 1 is very likely free; a refused connection or
        // the deadline both end in store/unreachable).
        let base = try PostgresTestServer.baseConfiguration()
        var configuration = base
        configuration.port = base.port == 65535 ? 1 : base.port + 1
        var quiet = Logger(label: "norq.test.unreachable")
        quiet.logLevel = .critical
        let store = PostgresDeliveryStore(configuration: configuration,
                                          settings: DeliveryStoreSettings(callTimeout: .seconds(2)), logger: quiet)
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await store.run() }
            defer { group.cancelAll() }
            do {
                try await store.migrate()
                Issue.record("migrate against a closed port must fail")
            } catch let error as NorqError {
                #expect(error.code == .storeUnreachable)
                #expect(error.message.contains("127.0.0.1:\(configuration.port)"))
            }
        }
        #expect(ContinuousClock.now - started < .seconds(15), "no hang")
    }
}

@Suite struct PostgresStoreConfigurationTests {
    @Test func urlParsingNeverPrintsThePassword() throws {
        let configuration = try PostgresStoreConfiguration(url: "postgresql://app:s%40cret@db.internal:6432/norq?sslmode=require&listen=false")
        #expect(configuration.host == "db.internal" && configuration.port == 6432)
        #expect(configuration.username == "app" && configuration.password == "s@cret")
        #expect(configuration.database == "norq" && configuration.tls == .require && !configuration.listen)
        #expect(!configuration.description.contains("s@cret") && !configuration.description.contains("cret"))
        #expect(throws: NorqError.self) { try PostgresStoreConfiguration(url: "mysql://x") }
        #expect(throws: NorqError.self) { try PostgresStoreConfiguration(url: "postgres://h:99999/db") }
        #expect(throws: NorqError.self) { try PostgresStoreConfiguration(url: "postgres://h/db?sslmode=maybe") }
    }
}
