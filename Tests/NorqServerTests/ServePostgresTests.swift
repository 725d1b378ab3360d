import Foundation
import Logging
import NorqCore
import NorqStore
import PostgresNIO
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Two `norq serve` processes on one PostgreSQL database (the server `scripts/test.sh` starts: NORQ_TEST_POSTGRES_URL
/// and NORQ_TEST_POSTGRES_CTL). Without the URL these tests fail, unless NORQ_SKIP_POSTGRES=1 skips them.
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["NORQ_SKIP_POSTGRES"] != "1", "NORQ_SKIP_POSTGRES=1"))
struct ServePostgresTests {
    static var env: [String: String] { ProcessInfo.processInfo.environment }

    /// A fresh database on the test server, as the `store:` YAML flow mapping; dropped by `drop`.
    static func database() async throws -> (yaml: String, drop: @Sendable () async -> Void) {
        guard let url = env["NORQ_TEST_POSTGRES_URL"], !url.isEmpty else {
            Issue.record("NORQ_TEST_POSTGRES_URL is not set: run the tests with scripts/test.sh, or NORQ_SKIP_POSTGRES=1")
            throw NorqError(.storeUnreachable, "no test PostgreSQL server")
        }
        let base = try PostgresStoreConfiguration(url: url)
        let name = "norq_serve_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)
        try await admin(base, "CREATE DATABASE \(name)")
        let password = base.password.map { ", password: \"\($0)\"" } ?? ""
        let yaml = "postgres: { host: \(base.host), port: \(base.port), user: \(base.username)\(password), database: \(name), sslmode: disable }"
        return (yaml, { try? await admin(base, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)") })
    }

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

    /// `pgctl stop|start`, spawned and reaped with posix_spawn/waitpid (the server child of `pg_ctl start` keeps
    /// running, which Foundation's `Process` waits for).
    static func controlServer(_ action: String) {
        guard let control = env["NORQ_TEST_POSTGRES_CTL"] else {
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

    @Test func twoInstancesShareSendsIdempotencyAndReadiness() async throws {
        let database = try await Self.database()
        let first = try await ServedNorq.start(store: database.yaml)
        defer { first.cleanupNow() }
        let second = try await first.restart()
        defer { second.cleanupNow() }
        #expect(first.port != second.port)

        // An idempotency key holds across instances: a retry that lands on the other one gets the same send.
        let body = ServeEndToEndTests.sendBody((0..<20).map(ServeEndToEndTests.token))
        let accepted = try await first.request("POST", "/v1/sends", json: body, headers: ["Idempotency-Key": "pg-1"])
        #expect(accepted.status == 202, "\(accepted.text.prefix(300))")
        let replayed = try await second.request("POST", "/v1/sends?wait=true", json: body, headers: ["Idempotency-Key": "pg-1"])
        #expect(replayed.status == 200, "\(replayed.text.prefix(300))")
        #expect(replayed.header("Idempotent-Replayed") == "true")
        #expect(replayed.json?["id"] == accepted.json?["id"])
        #expect(replayed.json?["summary"]?["delivered"]?.intValue == 20)
        let id = try #require(accepted.json?["id"]?.stringValue)
        let status = try await second.request("GET", "/v1/sends/\(id)")
        #expect(status.json?["finished"] == .bool(true))
        // Both workers deliver from one outbox; each token reaches APNs once.
        let ids = first.emulator.requests.compactMap { $0.header("apns-id") }
        #expect(ids.count == 20 && Set(ids).count == 20)

        // Readiness follows the database: 503 server/not-ready while it is down, ready again after.
        #expect(try await first.request("GET", "/readyz", key: nil).status == 200)
        Self.controlServer("stop")
        // Readiness comes from a background check (every second): it turns within a few seconds, and every answer
        // comes at once meanwhile.
        var down = try await first.request("GET", "/readyz", key: nil)
        let turnBy = ContinuousClock.now.advanced(by: .seconds(10))
        while down.status == 200, ContinuousClock.now < turnBy {
            try await Task.sleep(for: .milliseconds(100))
            let asked = ContinuousClock.now
            down = try await first.request("GET", "/readyz", key: nil)
            #expect(asked.duration(to: .now) < .seconds(1), "/readyz answers promptly with the database down")
        }
        #expect(down.status == 503)
        #expect(down.errorCode == "server/not-ready")
        #expect(try await first.request("GET", "/healthz", key: nil).status == 200, "alive while not ready")
        Self.controlServer("start")
        var ready = false
        let end = ContinuousClock.now.advanced(by: .seconds(30))
        while !ready, ContinuousClock.now < end {
            ready = try await first.request("GET", "/readyz", key: nil).status == 200
            if !ready { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(ready, "ready again once the database is back")
        #expect(try await second.stop() == 0)
        #expect(try await first.stop() == 0)
        await database.drop()
    }
}
