import Foundation
import Norq
import NorqConfig
import NorqCore
import NorqStoreSQLite
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The durable commands of the `norq` executable, on a SQLite store, against the in-process emulator (`--emulator`).
@Suite(.serialized) struct DurableCLITests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let quickstart = root.appendingPathComponent("examples/quickstart")

    /// Runs `norq` with a 60 s bound; returns (status, stdout, stderr).
    static func norq(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let process = Process()
        process.executableURL = Chaos.executable
        process.arguments = arguments
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let outURL = directory.appendingPathComponent("out"), errURL = directory.appendingPathComponent("err")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: outURL)
        process.standardError = try FileHandle(forWritingTo: errURL)
        var environment = ProcessInfo.processInfo.environment
        environment["NO_COLOR"] = "1"
        process.environment = environment
        try process.run()
        let end = Date().addingTimeInterval(60)
        while process.isRunning, Date() < end { usleep(20_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            Issue.record("norq \(arguments.joined(separator: " ")) did not finish within 60 s")
        }
        process.waitUntilExit()
        return (process.terminationStatus, try String(contentsOf: outURL, encoding: .utf8),
                try String(contentsOf: errURL, encoding: .utf8))
    }

    @Test func sendWithAStoreEnqueuesWaitsAndPrintsTodaysLinesThenStatusTokensAndMigrate() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let db = directory.appendingPathComponent("norq.db").path
        // The quick start's two APNs tokens. (Its web token is left out: with --emulator its endpoint is rewritten to
        // the in-process push service's port, which differs per run, so a repeat would not be the same send.)
        let iosOnly = #"[{"id": "user-1", "push": {"tokens": [{"token": "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90", "platform": "ios"}]}}, {"id": "user-2", "push": {"tokens": [{"token": "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0", "platform": "ios"}]}}]"#
        let send = ["send", "order-shipped", "--config", Self.quickstart.appendingPathComponent("norq.yaml").path,
                    "--sample", "default", "--to", iosOnly,
                    "--emulator", "--store", db, "--idempotency-key", "cli-order-1"]
        let first = try Self.norq(send)
        #expect(first.status == 0, "\(first)")
        #expect(first.out.contains("enqueued as send"))
        #expect(first.out.components(separatedBy: "delivered  ios token").count == 3, "\(first.out)")
        #expect(first.out.contains("ok: 2 tokens: 2 delivered"))
        let sendID = try #require(first.out.split(separator: "\n").first { $0.contains("enqueued as send") }?
            .split(separator: " ").first { $0.count == 36 }.map(String.init))
        // The same key again: the original send and its outcomes, nothing sent twice.
        let again = try Self.norq(send)
        #expect(again.status == 0, "\(again)")
        #expect(again.out.contains("idempotency key repeated: original send \(sendID)"))
        #expect(again.out.contains("ok: 2 tokens: 2 delivered"))
        // Other recipients with the same key: refused.
        var other = send
        other[other.firstIndex(of: "--to")! + 1] = #"[{"token": "\#(String(repeating: "ab", count: 32))", "platform": "ios"}]"#
        let reused = try Self.norq(other)
        #expect(reused.status != 0)
        #expect(reused.err.contains("idempotency/key-reused"), "\(reused)")

        // The provider's name for the id comes from its type (the configuration names the instance's type).
        let config = Self.quickstart.appendingPathComponent("norq.yaml").path
        let status = try Self.norq(["status", sendID, "--store", db, "--config", config])
        #expect(status.status == 0, "\(status)")
        #expect(status.out.contains("send \(sendID): 2 targets: 2 delivered"))
        #expect(status.out.contains("  0  ") && status.out.contains("  1  ") && status.out.contains("apns-id"), "\(status.out)")
        // One page: the first row, and where the rest starts.
        let paged = try Self.norq(["status", sendID, "--store", db, "--config", config, "--limit", "1"])
        #expect(paged.out.contains("  0  ") && !paged.out.contains("  1  a"), "\(paged.out)")
        #expect(paged.out.contains("rows 1-1 not shown (--offset 1"), "\(paged.out)")
        let json = try Self.norq(["status", sendID, "--store", db, "--json", "--offset", "1"])
        #expect(json.out.contains("\"mayHaveBeenDelivered\" : false") || json.out.contains("\"mayHaveBeenDelivered\": false"))
        let object = try JSONValue(parsing: json.out)
        #expect(object["targets"] == .int(2) && object["states"]?["delivered"] == .int(2), "\(json.out)")
        #expect(object["rows"]?.arrayCount == 1 && object["page"]?["next"] == .null, "\(json.out)")
        let missing = try Self.norq(["status", "00000000-0000-0000-0000-000000000000", "--store", db])
        #expect(missing.status != 0 && missing.err.contains("store/send-not-found"), "\(missing)")

        let tokens = try Self.norq(["tokens", "invalid", "--store", db])
        #expect(tokens.status == 0 && tokens.out.contains("0 tokens"), "\(tokens)")
        let migrate = try Self.norq(["migrate", "--store", db])
        #expect(migrate.status == 0 && migrate.out.contains("schema up to date"), "\(migrate)")
        let corrupt = directory.appendingPathComponent("corrupt.db")
        try Data(repeating: 0x41, count: 4096).write(to: corrupt)
        let broken = try Self.norq(["migrate", "--store", corrupt.path])
        #expect(broken.status != 0 && broken.err.contains("store/corrupt"), "\(broken)")
    }

    @Test func workerWithoutAStoreIsATypedError() throws {
        let result = try Self.norq(["worker", "--config", Self.quickstart.appendingPathComponent("norq.yaml").path])
        #expect(result.status != 0)
        #expect(result.err.contains("config/invalid-store"), "\(result)")
    }
}

/// `store:` in norq.yaml.
@Suite struct StoreConfigurationTests {
    static func load(_ yaml: String, environment: [String: String] = [:]) throws(NorqError) -> NorqConfiguration {
        try ConfigurationLoader(registry: ProviderTypeRegistry([]), environment: environment)
            .load(yaml: yaml, file: "norq.yaml", baseDirectory: "/srv/app")
    }

    @Test func sqliteAndSettings() throws {
        let configuration = try Self.load("""
            store:
              sqlite: ./data/norq.db
              leaseDuration: 45s
              retention: 48h
              idempotencyWindow: 12h
              poolSize: 8
            """)
        let store = try #require(configuration.store)
        #expect(store.backend == .sqlite(path: "/srv/app/data/norq.db"))
        #expect(store.settings.leaseDuration == .seconds(45))
        #expect(store.settings.retention == .seconds(48 * 3600))
        #expect(store.settings.idempotencyWindow == .seconds(12 * 3600))
        #expect(store.settings.poolSize == 8)
        #expect(try Self.load("templates: ./t").store == nil, "without store: nothing changes")
    }

    @Test func postgresURLAndKeysWithVariablesNeverPrintThePassword() throws {
        let url = try Self.load("store: { postgres: \"postgres://app:${PGPASSWORD}@db:5433/norq\" }",
                                environment: ["PGPASSWORD": "hunter2"])
        guard case .postgres(let fromURL)? = url.store?.backend else { Issue.record("postgres expected"); return }
        #expect(fromURL.host == "db" && fromURL.port == 5433 && fromURL.password == "hunter2")
        #expect(!"\(url.store!)".contains("hunter2"))
        let keys = try Self.load("""
            store:
              postgres:
                host: db.internal
                user: norq
                password: ${PGPASSWORD}
                database: norq
                sslmode: require
                listen: false
            """, environment: ["PGPASSWORD": "hunter2"])
        guard case .postgres(let fromKeys)? = keys.store?.backend else { Issue.record("postgres expected"); return }
        #expect(fromKeys.host == "db.internal" && fromKeys.port == 5432 && fromKeys.username == "norq")
        #expect(fromKeys.tls == .require && !fromKeys.listen && fromKeys.password == "hunter2")
        #expect(!"\(keys.store!)".contains("hunter2"))
    }

    @Test(arguments: [
        "store: { sqlite: a.db, postgres: \"postgres://h/db\" }",
        "store: { poolSize: 2 }",
        "store: { postgres: \"mysql://h/db\" }",
        "store: { postgres: { host: h, port: 70000 } }",
        "store: { postgres: { host: h, sslmode: maybe } }",
        "store: { sqlite: a.db, leaseDuration: 0s }",
        "store: { sqlite: a.db, poolSize: 0 }",
    ])
    func invalidStoreBlocksAreTypedErrors(_ yaml: String) {
        do {
            _ = try Self.load(yaml)
            Issue.record("\(yaml) must be refused")
        } catch {
            #expect(error.code == .configInvalidStore, "\(yaml): \(error)")
            #expect(error.location?.line ?? 0 >= 1)
        }
    }

    @Test func unknownStoreKeyIsRefused() {
        #expect(throws: NorqError.self) { try Self.load("store: { sqlite: a.db, leaseTime: 3s }") }
    }
}

extension JSONValue {
    fileprivate var arrayCount: Int? {
        if case .array(let items) = self { return items.count }
        return nil
    }
}
