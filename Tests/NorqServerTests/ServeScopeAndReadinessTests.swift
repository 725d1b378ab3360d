import Foundation
import Logging
import Norq
import NorqConfig
import NorqConsole
import NorqCore
@testable import NorqServer
import NorqStore
import Synchronization
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Issue 33, findings 1-3: readiness that means "can deliver", a prompt `/readyz` and `/metrics` with the database
/// down, and scopes that hold on every route.
@Suite(.serialized) struct ServeScopeAndReadinessTests {
    static func token(_ n: Int) -> String { String(format: "%064x", n) }
    static let readAllKey = "read-all-key-0123456789abcdef01"
    static let plainKey = "plain-key-0123456789abcdef0123"

    static func start() async throws -> ServedNorq {
        try await ServedNorq.start(extraKeys: """
                - { name: reader, key: \(readAllKey), scopes: [read-all] }
                - { name: plain, key: \(plainKey) }
            """)
    }

    static let registry = NorqServer.bootstrapMetrics()

    // MARK: finding 3: scopes

    /// A send's status is readable by the key that made it and by `read-all`/`admin` keys; another key gets the
    /// same 404 as for an unknown id.
    @Test func aSendsStatusIsReadableByItsKeyOnly() async throws {
        let served = try await Self.start()
        defer { served.cleanupNow() }
        let body: JSONValue = ["template": "background-refresh", "to": [.string(Self.token(7))]]
        let created = try await served.request("POST", "/v1/sends", key: ServedNorq.limitedKey, json: body)
        #expect(created.status == 202, "\(created.text)")
        let id = try #require(created.json?["id"]?.stringValue)
        #expect(try await served.request("GET", "/v1/sends/\(id)", key: ServedNorq.limitedKey).status == 200, "its own key")
        #expect(try await served.request("GET", "/v1/sends/\(id)", key: Self.readAllKey).status == 200, "read-all")
        #expect(try await served.request("GET", "/v1/sends/\(id)", key: ServedNorq.fullKey).status == 200, "admin")
        let other = try await served.request("GET", "/v1/sends/\(id)", key: Self.plainKey)
        #expect(other.status == 404 && other.errorCode == "store/send-not-found", "\(other.text)")
        // A send made by the plain key is not readable by the limited one.
        let mine = try await served.request("POST", "/v1/sends", key: Self.plainKey,
                                            json: ["template": "order-shipped", "sample": "Default", "to": [.string(Self.token(8))]])
        let mineID = try #require(mine.json?["id"]?.stringValue)
        #expect(try await served.request("GET", "/v1/sends/\(mineID)", key: Self.plainKey).status == 200)
        #expect(try await served.request("GET", "/v1/sends/\(mineID)", key: ServedNorq.limitedKey).status == 404)
    }

    /// Re-registering a token and reading `/metrics` need their own scopes.
    @Test func tokenRegistrationAndMetricsNeedTheirScopes() async throws {
        let served = try await Self.start()
        defer { served.cleanupNow() }
        let register: JSONValue = ["register": [.string(Self.token(9))]]
        let refused = try await served.request("POST", "/v1/tokens/invalid", key: Self.plainKey, json: register)
        #expect(refused.status == 403 && refused.errorCode == "server/forbidden", "\(refused.text)")
        #expect(refused.text.contains("register-tokens"))
        #expect(try await served.request("POST", "/v1/tokens/invalid", key: ServedNorq.fullKey, json: register).status == 200)
        // Querying the registry needs no scope.
        #expect(try await served.request("POST", "/v1/tokens/invalid", key: Self.plainKey,
                                         json: ["tokens": [.string(Self.token(9))]]).status == 200)
        let metrics = try await served.request("GET", "/metrics", key: Self.plainKey)
        #expect(metrics.status == 403 && metrics.errorCode == "server/forbidden")
        #expect(try await served.request("GET", "/metrics", key: Self.readAllKey).status == 403)
        let allowed = try await served.request("GET", "/metrics", key: ServedNorq.fullKey)
        #expect(allowed.status == 200 && allowed.text.contains("norq_outbox_rows"))
    }

    /// A provider-scoped key cannot dry-run another provider through `/v1/render`; validate lists its providers only.
    @Test func providerScopesHoldOnRenderAndValidate() async throws {
        let served = try await Self.start()
        defer { served.cleanupNow() }
        let dryRun: JSONValue = ["template": "order-shipped", "sample": "Default", "to": [.string(Self.token(3))]]
        let refused = try await served.request("POST", "/v1/render", key: ServedNorq.consoleOnlyKey, json: dryRun)
        #expect(refused.status == 403 && refused.errorCode == "server/forbidden", "\(refused.text)")
        #expect(!refused.text.contains(Self.token(3)))
        #expect(try await served.request("POST", "/v1/render", key: ServedNorq.fullKey, json: dryRun).status == 200)
        let validated = try await served.request("POST", "/v1/validate", key: ServedNorq.consoleOnlyKey, json: [:])
        #expect(validated.status == 200)
        let names = validated.json?["providers"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? ["?"]
        #expect(!names.contains("apns"), "\(names)")
    }

    /// "template not found" names neither the templates directory nor any other template, on every route.
    @Test func templateNotFoundNamesNothingOutsideTheScope() async throws {
        let served = try await Self.start()
        defer { served.cleanupNow() }
        let directory = ServedNorq.packageRoot.appendingPathComponent("templates").path
        let answers = [
            try await served.request("POST", "/v1/sends", key: Self.plainKey,
                                     json: ["template": "order-shiped", "to": [.string(Self.token(1))]]),
            try await served.request("POST", "/v1/render", key: Self.plainKey, json: ["template": "nope"]),
            try await served.request("POST", "/v1/validate", key: Self.plainKey, json: ["template": "nope"]),
        ]
        for answer in answers {
            #expect(answer.errorCode == "template/not-found", "\(answer.text)")
            #expect(!answer.text.contains(directory) && !answer.text.contains("/templates"), "\(answer.text)")
            #expect(!answer.text.contains("background-refresh"), "no other template's name: \(answer.text)")
        }
        // The limited key asking for another template is refused without learning whether it exists.
        let limited = try await served.request("POST", "/v1/render", key: ServedNorq.limitedKey, json: ["template": "nope"])
        #expect(limited.status == 403 && limited.errorCode == "server/forbidden")
        #expect(!limited.text.contains("order-shipped") && !limited.text.contains(directory))
    }

    /// `--no-auth` on a name that only looks loopback does not start.
    @Test func noAuthRefusesANameThatLooksLoopback() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("norq-noauth-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try "store: { sqlite: ./norq.db }\n".write(to: directory.appendingPathComponent("norq.yaml"), atomically: true, encoding: .utf8)
        let (status, output) = try ServedNorq.runToExit(["-c", "norq.yaml", "--no-auth", "--host", "127.example.invalid",
                                                         "--port", "0"], in: directory)
        #expect(status != 0)
        #expect(output.contains("server/insecure"), "\(output)")
    }

    // MARK: finding 1: readiness from device delivery

    /// A failed channel-management call (its host unreachable) leaves `/readyz` at 200 while device pushes work.
    @Test func aFailedManagementCallDoesNotMakeTheServerNotReady() async throws {
        let served = try await ServedNorq.start(managementEndpoint: "https://127.0.0.1:1")
        defer { served.cleanupNow() }
        let created = try await served.request("POST", "/v1/channels", json: ["environment": "sandbox"])
        #expect(created.status >= 500, "the management host is unreachable: \(created.text)")
        let sent = try await served.request("POST", "/v1/sends?wait=true&timeout=15",
                                            json: ["template": "order-shipped", "sample": "Default", "to": [.string(Self.token(5))]])
        #expect(sent.json?["summary"]?["delivered"]?.intValue == 1, "\(sent.text)")
        let ready = try await served.request("GET", "/readyz", key: nil)
        #expect(ready.status == 200, "\(ready.text)")
    }

    // MARK: finding 2: a prompt answer with the database down

    /// With a store that never answers, `/readyz` says 503 with the reason and `/metrics` answers with the last
    /// known queue depth and its age, both within 100 ms.
    @Test func readyzAndMetricsAnswerPromptlyWhileTheStoreHangs() async throws {
        let store = HangingStore()
        let router = try NotificationRouter(providers: [ConsoleProvider(name: "console", output: { _ in })])
        let delivery = DurableDelivery(router: router, store: store)
        let registry = Self.registry
        let port = Mutex<Int?>(nil)
        let server = NorqServer(
            settings: ServerConfiguration(host: "127.0.0.1", port: 0,
                                          apiKeys: [.init(name: "ops", secret: "ops-key-0123456789abcdef", scopes: ["metrics"])]),
            dependencies: .init(delivery: delivery, templates: nil, configuration: NorqConfiguration(), metrics: registry),
            onListening: { _, bound in port.withLock { $0 = bound } })
        let task = Task { try await server.run() }
        defer { task.cancel() }
        var bound: Int?
        for _ in 0..<200 where bound == nil {
            try await Task.sleep(for: .milliseconds(20))
            bound = port.withLock { $0 }
        }
        let base = "http://127.0.0.1:\(try #require(bound))"
        #expect(try await Self.get(base + "/readyz").status == 200, "the store answers")

        store.hang(true)
        // The background check notices within its interval plus the stall bound (1 s + 2 s).
        var ready = try await Self.get(base + "/readyz")
        let end = ContinuousClock.now.advanced(by: .seconds(10))
        while ready.status == 200, ContinuousClock.now < end {
            try await Task.sleep(for: .milliseconds(100))
            ready = try await Self.get(base + "/readyz")
        }
        #expect(ready.status == 503, "\(ready.body)")
        #expect(ready.body.contains("server/not-ready") && ready.body.contains("store"), "\(ready.body)")
        for path in ["/readyz", "/metrics"] {
            let started = ContinuousClock.now
            let answer = try await Self.get(base + path, key: "ops-key-0123456789abcdef")
            let elapsed = ContinuousClock.now - started
            #expect(elapsed < .milliseconds(100), "\(path) took \(elapsed)")
            if path == "/metrics" {
                #expect(answer.status == 200)
                #expect(answer.body.contains("norq_outbox_rows{state=\"due\"} 3"), "the last known depth")
                #expect(answer.body.contains("norq_outbox_depth_age_seconds"), "its age")
            }
        }
        store.hang(false)
        var back = try await Self.get(base + "/readyz")
        let until = ContinuousClock.now.advanced(by: .seconds(10))
        while back.status != 200, ContinuousClock.now < until {
            try await Task.sleep(for: .milliseconds(100))
            back = try await Self.get(base + "/readyz")
        }
        #expect(back.status == 200, "ready again once the store answers: \(back.body)")
    }

    static func get(_ url: String, key: String? = nil) async throws -> (status: Int, body: String) {
        var request = URLRequest(url: URL(string: url)!)
        request.timeoutInterval = 5
        if let key { request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as! HTTPURLResponse).statusCode, String(decoding: data, as: UTF8.self))
    }
}

/// An in-memory store whose reads can be made to hang (a database that accepts connections but never answers),
/// and whose queue depth is fixed (3 due rows).
final class HangingStore: DeliveryStore {
    let base = InMemoryDeliveryStore()
    private let hanging = Atomic<Bool>(false)

    func hang(_ value: Bool) { hanging.store(value, ordering: .relaxed) }

    private func stall() async {
        while hanging.load(ordering: .relaxed) { try? await Task.sleep(for: .milliseconds(20)) }
    }

    func migrate() async throws(NorqError) { try await base.migrate() }
    func enqueue(_ send: NewSend, now: Int64, idempotencyWindow: Duration) async throws(NorqError) -> EnqueueResult {
        await stall()
        return try await base.enqueue(send, now: now, idempotencyWindow: idempotencyWindow)
    }
    func claim(owner: String, limit: Int, now: Int64, leaseUntil: Int64) async throws(NorqError) -> [OutboxRow] {
        await stall()
        return try await base.claim(owner: owner, limit: limit, now: now, leaseUntil: leaseUntil)
    }
    func renew(_ leases: [Lease], until: Int64) async throws(NorqError) -> Set<Int64> {
        try await base.renew(leases, until: until)
    }
    func complete(_ completions: [RowCompletion], now: Int64) async throws(NorqError) -> CompletionReport {
        try await base.complete(completions, now: now)
    }
    func send(id: String) async throws(NorqError) -> StoredSend? {
        await stall()
        return try await base.send(id: id)
    }
    func sends(ids: [String]) async throws(NorqError) -> [String: StoredSend] { try await base.sends(ids: ids) }
    func deliveries(ofSend id: String) async throws(NorqError) -> [OutboxRow] { try await base.deliveries(ofSend: id) }
    func deliveries(ofSend id: String, positions: Range<Int>) async throws(NorqError) -> [OutboxRow] {
        try await base.deliveries(ofSend: id, positions: positions)
    }
    func stateCounts(ofSend id: String) async throws(NorqError) -> [DeliveryState: Int] {
        try await base.stateCounts(ofSend: id)
    }
    func invalidTokens(limit: Int) async throws(NorqError) -> [InvalidTokenRecord] { try await base.invalidTokens(limit: limit) }
    func registerToken(_ token: String, provider: String?, environment: String?, at: Int64) async throws(NorqError) {
        try await base.registerToken(token, provider: provider, environment: environment, at: at)
    }
    func prune(finishedBefore before: Int64, limit: Int) async throws(NorqError) -> Int {
        try await base.prune(finishedBefore: before, limit: limit)
    }
    func counts() async throws(NorqError) -> [DeliveryState: Int] { try await base.counts() }
    func queueDepth(now: Int64) async throws(NorqError) -> QueueDepth {
        await stall()
        var depth = try await base.queueDepth(now: now)
        depth.due = 3
        return depth
    }
    func close() async { await base.close() }
}
