import Crypto
import Foundation
import NorqCore
import NorqTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `norq serve` as a process: every route's success and error paths, checked against docs/openapi.yaml.
@Suite(.serialized) struct ServeEndToEndTests {
    static func token(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return "a" + String(repeating: "0", count: 63 - hex.count) + hex
    }

    static func sendBody(_ tokens: [String], template: String = "order-shipped") -> JSONValue {
        // order-shipped with its "Default" sample; another template with its first sample.
        template == "order-shipped"
            ? ["template": .string(template), "sample": "Default", "to": .array(tokens.map(JSONValue.string))]
            : ["template": .string(template), "to": .array(tokens.map(JSONValue.string))]
    }

    @Test func everyRouteAnswersAsDocumented() async throws {
        let contract = try OpenAPIContract.load()
        let unregistered = Self.token(9999)
        let served = try await ServedNorq.start(faults: .init(unregisteredTokens: [unregistered: 1_700_000_000_000]))
        defer { served.cleanupNow() }
        func check(_ method: String, _ path: String, _ answer: ServedNorq.Answer, _ status: Int, code: String? = nil,
                   sourceLocation: Testing.SourceLocation = #_sourceLocation) {
            #expect(answer.status == status, "\(method) \(path): \(answer.status) \(answer.text.prefix(300))",
                    sourceLocation: sourceLocation)
            if let code { #expect(answer.errorCode == code, "\(answer.text.prefix(300))", sourceLocation: sourceLocation) }
            contract.check(method, path, answer, sourceLocation: sourceLocation)
            #expect(!answer.text.contains(ServedNorq.fullKey) && !answer.text.contains(ServedNorq.limitedKey),
                    "no answer holds key material", sourceLocation: sourceLocation)
        }

        // Health without a key; everything else needs one.
        check("GET", "/healthz", try await served.request("GET", "/healthz", key: nil), 200)
        check("GET", "/readyz", try await served.request("GET", "/readyz", key: nil), 200)
        check("POST", "/v1/sends", try await served.request("POST", "/v1/sends", key: nil, json: Self.sendBody([Self.token(1)])),
              401, code: "server/unauthorized")
        check("POST", "/v1/sends", try await served.request("POST", "/v1/sends", key: "wrong-key-0123456789abcdef",
                                                            json: Self.sendBody([Self.token(1)])), 401, code: "server/unauthorized")
        check("GET", "/metrics", try await served.request("GET", "/metrics", key: nil), 401, code: "server/unauthorized")

        // A send: 202 with the id and status URL, then its status.
        let accepted = try await served.request("POST", "/v1/sends", json: Self.sendBody([Self.token(1), Self.token(2)]))
        check("POST", "/v1/sends", accepted, 202)
        let id = try #require(accepted.json?["id"]?.stringValue)
        #expect(accepted.json?["statusUrl"]?.stringValue == "/v1/sends/\(id)")
        #expect(accepted.json?["targets"]?.intValue == 2)
        #expect(accepted.header("Idempotent-Replayed") == nil)
        var finished = false
        let end = ContinuousClock.now.advanced(by: .seconds(30))
        while !finished, ContinuousClock.now < end {
            let status = try await served.request("GET", "/v1/sends/\(id)")
            check("GET", "/v1/sends/{id}", status, 200)
            finished = status.json?["finished"] == .bool(true)
            if finished {
                #expect(status.json?["summary"]?["delivered"]?.intValue == 2)
                #expect(!status.text.contains(Self.token(1)), "rows show shortened tokens only")
            } else {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        #expect(finished)
        let page = try await served.request("GET", "/v1/sends/\(id)?offset=1&limit=1")
        check("GET", "/v1/sends/{id}", page, 200)
        #expect(page.json?["rows"]?.arrayValue?.count == 1)
        #expect(page.json?["page"]?["next"] == .null)
        check("GET", "/v1/sends/{id}", try await served.request("GET", "/v1/sends/00000000-0000-0000-0000-000000000000"),
              404, code: "store/send-not-found")
        check("GET", "/v1/sends/{id}", try await served.request("GET", "/v1/sends/not%20an%20id"), 404, code: "store/send-not-found")

        // ?wait=true answers with the outcomes.
        let waited = try await served.request("POST", "/v1/sends?wait=true", json: Self.sendBody([Self.token(3)]))
        check("POST", "/v1/sends", waited, 200)
        #expect(waited.json?["status"]?.stringValue == "finished")
        #expect(waited.json?["outcomes"]?.arrayValue?.first?["result"]?["kind"]?.stringValue == "delivered")
        #expect(served.emulator.requests.count == 3)

        // The token registry: a 410 token is recorded, queried, and registered again.
        let gone = try await served.request("POST", "/v1/sends?wait=true", json: Self.sendBody([unregistered]))
        check("POST", "/v1/sends", gone, 200)
        #expect(gone.json?["outcomes"]?.arrayValue?.first?["result"]?["kind"]?.stringValue == "rejected")
        let query = try await served.request("POST", "/v1/tokens/invalid", json: ["tokens": [.string(unregistered), .string(Self.token(1))]])
        check("POST", "/v1/tokens/invalid", query, 200)
        #expect(query.json?["tokens"]?.arrayValue?.map { $0["invalid"] } == [.bool(true), .bool(false)])
        #expect(!query.text.contains(unregistered), "tokens are shortened in answers")
        let listed = try await served.request("POST", "/v1/tokens/invalid", json: [:])
        check("POST", "/v1/tokens/invalid", listed, 200)
        #expect(listed.json?["tokens"]?.arrayValue?.count == 1)
        let registered = try await served.request("POST", "/v1/tokens/invalid", json: ["register": [.string(unregistered)]])
        check("POST", "/v1/tokens/invalid", registered, 200)
        #expect(registered.json?["registered"]?.intValue == 1)
        check("POST", "/v1/tokens/invalid", try await served.request("POST", "/v1/tokens/invalid", json: ["tokens": "x"]),
              400, code: "server/invalid-request")

        // Render: content without recipients, the exact requests with them (no JWT).
        let content = try await served.request("POST", "/v1/render", json: ["template": "order-shipped", "sample": "Default"])
        check("POST", "/v1/render", content, 200)
        #expect(content.json?["content"]?["title"]?.stringValue == "Order #ORD-123 shipped")
        let requests = try await served.request("POST", "/v1/render", json: Self.sendBody([Self.token(5)]))
        check("POST", "/v1/render", requests, 200)
        #expect(requests.json?["deliveries"]?.arrayValue?.first?["request"]?["method"]?.stringValue == "POST")
        #expect(!requests.text.lowercased().contains("bearer ey"), "the JWT is redacted")
        check("POST", "/v1/render", try await served.request("POST", "/v1/render", json: ["template": "nope"]),
              422, code: "template/not-found")

        // Validate.
        let all = try await served.request("POST", "/v1/validate", json: [:])
        check("POST", "/v1/validate", all, 200)
        #expect((all.json?["templates"]?.arrayValue?.count ?? 0) >= 3)
        let one = try await served.request("POST", "/v1/validate", json: ["template": "order-shipped", "data": ["order": ["id": 1]]])
        check("POST", "/v1/validate", one, 200)
        check("POST", "/v1/validate", try await served.request("POST", "/v1/validate", json: ["template": "nope"]),
              422, code: "template/not-found")
        check("POST", "/v1/validate", try await served.request("POST", "/v1/validate", json: ["templat": "x"]),
              400, code: "server/invalid-request")

        // Bad input: each a JSON error with the right status.
        check("POST", "/v1/sends", try await served.request("POST", "/v1/sends", body: Array("{not json".utf8)),
              400, code: "server/invalid-request")
        check("POST", "/v1/sends", try await served.request("POST", "/v1/sends", body: Array("[1,2]".utf8)),
              400, code: "server/invalid-request")
        check("POST", "/v1/sends", try await served.request("POST", "/v1/sends", json: ["template": "order-shipped", "to": [.string(Self.token(1))], "extra": 1]),
              400, code: "server/invalid-request")
        check("POST", "/v1/sends", try await served.request("POST", "/v1/sends", json: ["template": "order-shipped", "sample": "Default"]),
              400, code: "server/invalid-request")
        check("POST", "/v1/sends", try await served.request("POST", "/v1/sends", json: Self.sendBody([Self.token(1)]), contentType: "text/plain"),
              415, code: "server/unsupported-media-type")
        check("POST", "/v1/sends", try await served.request("POST", "/v1/sends", body: Array(repeating: UInt8(ascii: " "), count: 70_000)),
              413, code: "server/body-too-large")
        check("POST", "/v1/sends", try await served.request("POST", "/v1/sends", json: Self.sendBody((0..<101).map(Self.token))),
              413, code: "server/too-many-recipients")
        check("POST", "/v1/sends", try await served.request("POST", "/v1/sends", json: Self.sendBody([Self.token(1)], template: "nope")),
              422, code: "template/not-found")
        check("POST", "/v1/sends", try await served.request("POST", "/v1/sends", json: ["template": "order-shipped", "sample": "nope", "to": [.string(Self.token(1))]]),
              422, code: "server/unknown-sample")
        check("POST", "/v1/sends", try await served.request("POST", "/v1/sends", json: ["template": "order-shipped", "sample": "Default", "to": [["token": "", "platform": "ios"]]]),
              422)
        check("POST", "/v1/sends", try await served.request("POST", "/v1/sends", json: ["template": "order-shipped", "sample": "Default", "to": [.string(Self.token(1))], "options": ["priority": 99]]),
              400, code: "server/invalid-request")
        check("POST", "/v1/sends", try await served.request("POST", "/v1/sends", json: ["template": "order-shipped", "sample": "Default", "to": [.string(Self.token(1))], "options": ["environment": "staging"]]),
              422, code: "push/invalid-environment")

        // Scopes: the limited key may use background-refresh only.
        check("POST", "/v1/sends", try await served.request("POST", "/v1/sends", key: ServedNorq.limitedKey, json: Self.sendBody([Self.token(1)])),
              403, code: "server/forbidden")
        check("POST", "/v1/render", try await served.request("POST", "/v1/render", key: ServedNorq.limitedKey, json: ["template": "order-shipped"]),
              403, code: "server/forbidden")

        let byProvider = try await served.request("POST", "/v1/sends", key: ServedNorq.consoleOnlyKey,
                                                  json: Self.sendBody([Self.token(1)]))
        check("POST", "/v1/sends", byProvider, 403, code: "server/forbidden")
        #expect(byProvider.text.contains("apns") && !byProvider.text.contains(Self.token(1)),
                "names the provider, shows the token shortened")

        // An unknown route is a JSON 404 too.
        let missing = try await served.request("GET", "/v1/nothing-here")
        #expect(missing.status == 404)
        #expect(missing.errorCode == "server/not-found")

        // Metrics: Prometheus text with request and delivery series, no key or token in any label.
        let metrics = try await served.request("GET", "/metrics")
        check("GET", "/metrics", metrics, 200)
        #expect(metrics.text.contains("norq_http_requests_total"))
        // Queue depth over the hot outbox: one gauge per state, summing to the rows waiting or in flight.
        for state in ["due", "scheduled", "leased", "lease-expired"] {
            #expect(metrics.text.contains("norq_outbox_rows{state=\"\(state)\"}"), "\(state)")
        }
        #expect(!metrics.text.contains(Self.token(1)) && !metrics.text.contains("full-access"))

        #expect(try await served.stop() == 0, "a clean exit on SIGTERM: \(served.log.suffix(2000))")
        #expect(!served.log.contains(ServedNorq.fullKey), "the log never holds a key")
    }

    @Test func liveActivityChannelsAreCreatedListedReadAndDeleted() async throws {
        let contract = try OpenAPIContract.load()
        let served = try await ServedNorq.start()
        defer { served.cleanupNow() }
        let created = try await served.request("POST", "/v1/channels", json: ["storagePolicy": 0])
        #expect(created.status == 201, "\(created.text.prefix(300))")
        contract.check("POST", "/v1/channels", created)
        let id = try #require(created.json?["channel"]?.stringValue)
        #expect(created.json?["messageStoragePolicy"]?.intValue == 0)
        let path = "/v1/channels/" + (id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? id)
        let list = try await served.request("GET", "/v1/channels")
        #expect(list.status == 200)
        contract.check("GET", "/v1/channels", list)
        #expect(list.json?["channels"]?.arrayValue?.contains(.string(id)) == true)
        let read = try await served.request("GET", path)
        #expect(read.status == 200, "\(read.text.prefix(300))")
        contract.check("GET", "/v1/channels/{id}", read)
        #expect(read.json?["channel"]?.stringValue == id)
        let deleted = try await served.request("DELETE", path)
        #expect(deleted.status == 200, "\(deleted.text.prefix(300))")
        contract.check("DELETE", "/v1/channels/{id}", deleted)
        let gone = try await served.request("GET", path)
        #expect(gone.status >= 400 && gone.status < 500 && gone.errorCode != nil, "\(gone.status) \(gone.text.prefix(300))")
        contract.check("GET", "/v1/channels/{id}", gone)
        let bad = try await served.request("POST", "/v1/channels", json: ["storagePolicy": 7])
        #expect(bad.status == 400)
        #expect(bad.errorCode == "server/invalid-request")
        let unauthorized = try await served.request("GET", "/v1/channels", key: nil)
        #expect(unauthorized.status == 401)
        let forbidden = try await served.request("GET", "/v1/channels", key: ServedNorq.consoleOnlyKey)
        #expect(forbidden.status == 403)
        contract.check("GET", "/v1/channels", forbidden)
    }

    @Test func idempotencyKeysReplayRefuseAndSerialize() async throws {
        let served = try await ServedNorq.start(faults: .init(latency: .milliseconds(20)))
        defer { served.cleanupNow() }
        let body = Self.sendBody([Self.token(1), Self.token(2)])
        let first = try await served.request("POST", "/v1/sends", json: body, headers: ["Idempotency-Key": "order-1"])
        #expect(first.status == 202)
        let repeated = try await served.request("POST", "/v1/sends", json: body, headers: ["Idempotency-Key": "order-1"])
        #expect(repeated.status == 202)
        #expect(repeated.header("Idempotent-Replayed") == "true")
        #expect(repeated.json?["id"] == first.json?["id"])
        let reused = try await served.request("POST", "/v1/sends", json: Self.sendBody([Self.token(3)]),
                                              headers: ["Idempotency-Key": "order-1"])
        #expect(reused.status == 422)
        #expect(reused.errorCode == "idempotency/key-reused")
        // Another API key's identical key is its own send (keys are scoped per API key).
        let other = try await served.request("POST", "/v1/sends", key: ServedNorq.limitedKey,
                                             json: Self.sendBody([Self.token(7)], template: "background-refresh"),
                                             headers: ["Idempotency-Key": "order-1"])
        #expect(other.status == 202, "\(other.text)")
        #expect(other.json?["id"] != first.json?["id"])

        // 40 concurrent identical requests: one send; each answer is the send (202) or in progress (409).
        let concurrentBody = Self.sendBody((10..<20).map(Self.token))
        let answers = try await withThrowingTaskGroup(of: ServedNorq.Answer.self) { group in
            for _ in 0..<40 {
                group.addTask {
                    try await served.request("POST", "/v1/sends", json: concurrentBody, headers: ["Idempotency-Key": "burst"])
                }
            }
            var all: [ServedNorq.Answer] = []
            for try await answer in group { all.append(answer) }
            return all
        }
        #expect(answers.allSatisfy { $0.status == 202 || $0.status == 409 }, "\(answers.map(\.status))")
        let ids = Set(answers.filter { $0.status == 202 }.compactMap { $0.json?["id"]?.stringValue })
        #expect(ids.count == 1, "one send for one key")
        #expect(answers.filter { $0.status == 202 && $0.header("Idempotent-Replayed") == nil }.count == 1,
                "exactly one answer created it")
        #expect(answers.filter { $0.status == 409 }.allSatisfy { $0.errorCode == "server/idempotency-in-progress" })
        let id = try #require(ids.first)
        let done = try await served.request("POST", "/v1/sends?wait=true", json: concurrentBody,
                                            headers: ["Idempotency-Key": "burst"])
        #expect(done.status == 200)
        #expect(done.json?["id"]?.stringValue == id)
        #expect(done.json?["summary"]?["delivered"]?.intValue == 10)
        // Each token of the burst reached APNs once.
        let burstTokens = Set((10..<20).map(Self.token))
        let sent = served.emulator.requests.filter { request in burstTokens.contains { request.path.hasSuffix($0) } }
        #expect(sent.count == 10)
    }

    @Test func aKeyPastItsRateGets429WithRetryAfter() async throws {
        let served = try await ServedNorq.start(limits: "{ ratePerSecond: 0.01, burst: 2 }")
        defer { served.cleanupNow() }
        #expect(try await served.request("POST", "/v1/validate", json: [:]).status == 200)
        #expect(try await served.request("POST", "/v1/validate", json: [:]).status == 200)
        let limited = try await served.request("POST", "/v1/validate", json: [:])
        #expect(limited.status == 429)
        #expect(limited.errorCode == "server/rate-limited")
        #expect(Int(limited.header("Retry-After") ?? "") ?? 0 >= 1)
        // Health checks are never limited, and another key has its own bucket.
        #expect(try await served.request("GET", "/healthz", key: nil).status == 200)
        #expect(try await served.request("POST", "/v1/validate", key: ServedNorq.limitedKey, json: [:]).status == 200)
    }

    @Test func sigtermDrainsSendsInFlightAndLosesNothing() async throws {
        let served = try await ServedNorq.start(faults: .init(latency: .milliseconds(300)))
        defer { served.cleanupNow() }
        let tokens = (100..<160).map(Self.token)
        let accepted = try await served.request("POST", "/v1/sends", json: Self.sendBody(tokens))
        #expect(accepted.status == 202)
        let id = try #require(accepted.json?["id"]?.stringValue)
        // Let the worker start some attempts (8 per batch, 2 batches at once, 300 ms each), then stop the server
        // mid-send: the attempts in flight finish, the rest stays in the store.
        let end = ContinuousClock.now.advanced(by: .seconds(20))
        while served.emulator.requests.isEmpty, ContinuousClock.now < end { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(100))
        let status = try await served.stop(timeout: .seconds(30))
        #expect(status == 0, "a clean exit within the grace period: \(served.log.suffix(2000))")
        let beforeRestart = served.emulator.requests.count
        #expect(beforeRestart > 0 && beforeRestart < tokens.count, "stopped mid-send: \(beforeRestart) of \(tokens.count) sent")
        // A new process on the same database finishes what was left: every token delivered, none twice.
        let again = try await served.restart()
        defer { again.cleanupNow() }
        let waited = try await again.request("GET", "/v1/sends/\(id)?limit=1000")
        #expect(waited.status == 200)
        var finished = waited.json?["finished"] == .bool(true)
        var last = waited
        let deadline = ContinuousClock.now.advanced(by: .seconds(60))
        while !finished, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            last = try await again.request("GET", "/v1/sends/\(id)?limit=1000")
            finished = last.json?["finished"] == .bool(true)
        }
        #expect(finished, "\(last.text.prefix(500))")
        #expect(last.json?["summary"]?["delivered"]?.intValue == Int64(tokens.count))
        let ids = again.emulator.requests.compactMap { $0.header("apns-id") }
        #expect(Set(ids).count == tokens.count, "every token reached APNs")
        #expect(ids.count == tokens.count, "none twice: a graceful stop finishes or releases, it never abandons")
    }

    @Test func refusesToStartInsecurely() async throws {
        let served = try await ServedNorq.start()
        defer { served.cleanupNow() }
        for (arguments, expected) in [(["--no-auth", "--host", "0.0.0.0"], "server/insecure"),
                                      (["--port", "\(served.port)"], "server/bind-failed")] {
            let (status, output) = try ServedNorq.runToExit(
                ["-c", served.config.path] + (arguments.contains("--port") ? [] : ["--port", "0"]) + arguments,
                in: served.directory)
            #expect(status == 1)
            #expect(output.contains(expected), "\(output)")
        }
        // A configuration without keys refuses to start without --no-auth.
        let bare = served.directory.appendingPathComponent("bare.yaml")
        let text = try String(contentsOf: served.config, encoding: .utf8)
        try String(text[..<text.range(of: "server:")!.lowerBound]).write(to: bare, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = ServedNorq.executable
        process.arguments = ["serve", "-c", bare.path, "--port", "0"]
        process.currentDirectoryURL = served.directory
        let pipe = Pipe()
        process.standardError = pipe
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 1)
        #expect(output.contains("server/insecure"), "\(output)")
    }

    @Test func sighupReloadsKeysAndKeepsTheOldConfigurationWhenTheNewOneIsBad() async throws {
        let served = try await ServedNorq.start()
        defer { served.cleanupNow() }
        let newKey = "added-by-reload-0123456789abcdef"
        #expect(try await served.request("POST", "/v1/validate", key: newKey, json: [:]).status == 401)
        let original = try String(contentsOf: served.config, encoding: .utf8)
        // Add a key, drop the limited one.
        let added = original.replacingOccurrences(
            of: "    - { name: limited, key: \"${NORQ_TEST_LIMITED_KEY}\", templates: [background-refresh] }\n",
            with: "    - { name: added, key: \(newKey) }\n")
        #expect(added != original)
        try added.write(to: served.config, atomically: true, encoding: .utf8)
        kill(served.process.processIdentifier, SIGHUP)
        try await Self.waitUntil("the reload") { served.log.contains("configuration reloaded") }
        // The log says which providers were built and what waits for the next start (nothing here).
        #expect(served.log.contains("norq.providers=apns"), "\(served.log.suffix(600))")
        #expect(served.log.contains("norq.next-start-only=none"), "\(served.log.suffix(600))")
        #expect(try await served.request("POST", "/v1/validate", key: newKey, json: [:]).status == 200)
        #expect(try await served.request("POST", "/v1/validate", key: ServedNorq.limitedKey, json: [:]).status == 401)
        // A broken file: the reload fails, the previous keys stay, the server keeps serving.
        try "server: { apiKeys: [{ name: x, key: short }] }\n".write(to: served.config, atomically: true, encoding: .utf8)
        kill(served.process.processIdentifier, SIGHUP)
        try await Self.waitUntil("the failed reload") { served.log.contains("reload failed") }
        #expect(served.log.contains("config/invalid-server"))
        #expect(try await served.request("POST", "/v1/validate", key: newKey, json: [:]).status == 200)
        let sent = try await served.request("POST", "/v1/sends?wait=true", json: Self.sendBody([Self.token(1)]))
        #expect(sent.status == 200, "\(sent.text.prefix(300))")
        #expect(try await served.stop() == 0)
    }

    /// A rotated APNs key and a new endpoint applied by SIGHUP: attempts in flight finish on the old provider
    /// (nothing lost, nothing sent twice), later sends use the new one, the old one is shut down after its
    /// attempts, and a provider that cannot be built refuses the reload and keeps the current providers.
    @Test func sighupReloadsProvidersWithoutDroppingAttemptsInFlight() async throws {
        let served = try await ServedNorq.start()
        defer { served.cleanupNow() }
        // The new provider: another emulator that knows only a new signing key.
        let rotated = P256.Signing.PrivateKey()
        let next = try APNsEmulator(configuration: .init(environmentName: "sandbox", teamID: "TEAM123ABC",
                                                         signingKeys: ["KEY456ABCD": rotated.publicKey.pemRepresentation]))
        try await next.start()
        defer { Task { try? await next.shutdown() } }
        try next.writeCACertificate(to: served.directory.appendingPathComponent("ca-next.pem").path)
        try rotated.pemRepresentation.write(to: served.directory.appendingPathComponent("key-next.p8"),
                                            atomically: true, encoding: .utf8)

        // A warm connection (its first request is sent alone), then in flight on the old provider: every answer
        // takes 1 s (an attempt's deadline is half the 3 s lease).
        let warm = try await served.request("POST", "/v1/sends?wait=true", json: Self.sendBody([Self.token(0x100)]))
        #expect(warm.status == 200, "\(warm.text.prefix(300))")
        served.emulator.setFaults(.init(latency: .seconds(1)))
        let inFlight = (1...5).map { Self.token(0x100 + $0) }
        let accepted = try await served.request("POST", "/v1/sends", json: Self.sendBody(inFlight))
        #expect(accepted.status == 202, "\(accepted.text.prefix(300))")
        let firstID = try #require(accepted.json?["id"]?.stringValue)
        var leased = false
        let claimEnd = ContinuousClock.now.advanced(by: .seconds(10))
        while !leased, ContinuousClock.now < claimEnd {
            let status = try await served.request("GET", "/v1/sends/\(firstID)")
            leased = (status.json?["states"]?["leased"]?.intValue ?? 0) == Int64(inFlight.count)
            if !leased { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(leased, "the rows were claimed")
        try await Task.sleep(for: .milliseconds(300))  // the attempts have started on the old provider

        let original = try String(contentsOf: served.config, encoding: .utf8)
        let switched = original
            .replacingOccurrences(of: "keyId: KEY123ABCD", with: "keyId: KEY456ABCD")
            .replacingOccurrences(of: "keyPath: ./key.p8", with: "keyPath: ./key-next.p8")
            .replacingOccurrences(of: "localhost:\(served.emulator.port)", with: "localhost:\(next.port)")
            .replacingOccurrences(of: "caPath: ./ca.pem", with: "caPath: ./ca-next.pem")
        #expect(switched != original)
        try switched.write(to: served.config, atomically: true, encoding: .utf8)
        kill(served.process.processIdentifier, SIGHUP)
        try await Self.waitUntil("the reload") { served.log.contains("configuration reloaded") }
        #expect(served.log.contains("norq.providers=apns"), "\(served.log.suffix(800))")
        #expect(served.log.contains("norq.next-start-only=none"), "\(served.log.suffix(800))")

        // A send after the reload goes to the new endpoint, signed with the new key.
        let later = (1...3).map { Self.token(0x200 + $0) }
        let sent = try await served.request("POST", "/v1/sends?wait=true", json: Self.sendBody(later))
        #expect(sent.status == 200, "\(sent.text.prefix(300))")
        #expect(sent.json?["summary"]?["delivered"]?.intValue == 3, "\(sent.text.prefix(400))")

        // The send in flight at the reload ends delivered, each token once, on the old provider.
        try await Self.waitUntil("the first send", timeout: .seconds(30)) {
            served.log.contains("previous providers shut down")
        }
        let first = try await served.request("GET", "/v1/sends/\(firstID)")
        #expect(first.json?["finished"] == .bool(true), "\(first.text.prefix(400))")
        #expect(first.json?["summary"]?["delivered"]?.intValue == 5, "\(first.text.prefix(400))")
        func delivered(_ emulator: APNsEmulator, _ token: String) -> Int {
            emulator.requests.filter { $0.path.hasSuffix(token) && $0.status == 200 }.count
        }
        for token in inFlight {
            #expect(delivered(served.emulator, token) == 1 && delivered(next, token) == 0,
                    "each token in flight at the reload once, on the old provider")
        }
        for token in later {
            #expect(delivered(next, token) == 1 && delivered(served.emulator, token) == 0)
        }

        // A key that does not exist: the reload is refused and the providers stay.
        try switched.replacingOccurrences(of: "keyPath: ./key-next.p8", with: "keyPath: ./missing.p8")
            .write(to: served.config, atomically: true, encoding: .utf8)
        kill(served.process.processIdentifier, SIGHUP)
        try await Self.waitUntil("the failed reload") { served.log.contains("reload failed") }
        let after = try await served.request("POST", "/v1/sends?wait=true", json: Self.sendBody([Self.token(0x301)]))
        #expect(after.json?["summary"]?["delivered"]?.intValue == 1, "\(after.text.prefix(400))")
        #expect(delivered(next, Self.token(0x301)) == 1)
        let metrics = try await served.request("GET", "/metrics").text
        #expect(metrics.contains("norq_server_reloads_total{result=\"applied\"} 1"), "\(metrics.prefix(2000))")
        #expect(metrics.contains("norq_server_reloads_total{result=\"failed\"} 1"))
        #expect(try await served.stop() == 0)
    }

    static func waitUntil(_ what: String, timeout: Duration = .seconds(20), _ condition: () -> Bool) async throws {
        let end = ContinuousClock.now.advanced(by: timeout)
        while !condition() {
            guard ContinuousClock.now < end else {
                Issue.record("timed out waiting for \(what)")
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Random request bodies (bounded: 10,000 of them, 16 at a time): never a 500, never a crash, always a JSON
    /// body, and an error body whenever the status is 4xx.
    @Test func fuzzedBodiesNeverCauseAServerError() async throws {
        let served = try await ServedNorq.start()
        defer { served.cleanupNow() }
        let routes = ["/v1/sends", "/v1/render", "/v1/validate", "/v1/tokens/invalid"]
        var generator = SplitMix(seed: 0x5EED)
        let bodies: [(String, [UInt8])] = (0..<10_000).map { index in
            (routes[index % routes.count], Fuzz.body(&generator))
        }
        var failures: [String] = []
        for chunk in stride(from: 0, to: bodies.count, by: 16) {
            let slice = bodies[chunk..<min(chunk + 16, bodies.count)]
            let answers = try await withThrowingTaskGroup(of: (String, [UInt8], ServedNorq.Answer).self) { group in
                for (route, body) in slice {
                    group.addTask { (route, body, try await served.request("POST", route, body: body)) }
                }
                var all: [(String, [UInt8], ServedNorq.Answer)] = []
                for try await answer in group { all.append(answer) }
                return all
            }
            for (route, body, answer) in answers {
                let bad = answer.status >= 500 || answer.json == nil || (answer.status >= 400 && answer.errorCode == nil)
                if bad, failures.count < 5 {
                    failures.append("\(route) \(answer.status) \(answer.text.prefix(200)) for \(String(decoding: body.prefix(200), as: UTF8.self))")
                }
            }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        #expect(try await served.request("GET", "/healthz", key: nil).status == 200, "still alive")
    }
}

/// A small deterministic random generator (SplitMix64) for the fuzz.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Request bodies: random JSON shaped like the API's (known and unknown fields, wrong types, huge numbers,
/// deep nesting), truncated JSON, and random bytes.
enum Fuzz {
    static let keys = ["template", "data", "sample", "to", "options", "tokens", "register", "limit", "priority",
                       "environment", "token", "platform", "recipients", "collapseId", "strict", "x"]
    static let strings = ["order-shipped", "background-refresh", "Default", "ios", "android", "sandbox", "",
                          "nope", "\u{0}", "../../etc/passwd", "{{x}}", String(repeating: "a", count: 300),
                          ServeEndToEndTests.token(1), "é漢字🙂"]

    static func value<G: RandomNumberGenerator>(_ g: inout G, depth: Int) -> JSONValue {
        switch Int.random(in: 0..<(depth > 4 ? 5 : 8), using: &g) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &g))
        case 2: return .int([0, -1, 1, 10, 99, Int64.max, Int64.min][Int.random(in: 0..<7, using: &g)])
        case 3: return .double([0.5, -1e300, 1e308][Int.random(in: 0..<3, using: &g)])
        case 4: return .string(strings[Int.random(in: 0..<strings.count, using: &g)])
        case 5, 6:
            var object: [(String, JSONValue)] = []
            for _ in 0..<Int.random(in: 0..<5, using: &g) {
                object.append((keys[Int.random(in: 0..<keys.count, using: &g)], value(&g, depth: depth + 1)))
            }
            return .object(.init(object, uniquingKeysWith: { a, _ in a }))
        default:
            return .array((0..<Int.random(in: 0..<4, using: &g)).map { _ in value(&g, depth: depth + 1) })
        }
    }

    static func body<G: RandomNumberGenerator>(_ g: inout G) -> [UInt8] {
        switch Int.random(in: 0..<10, using: &g) {
        case 0:
            return (0..<Int.random(in: 0..<200, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) }
        case 1:
            let text = value(&g, depth: 0).serialized()
            return Array(text.prefix(Int.random(in: 0...max(0, text.count), using: &g)))
        case 2:
            return Array(String(repeating: "[", count: Int.random(in: 50..<300, using: &g)).utf8)
        default:
            var object: [(String, JSONValue)] = [("template", .string(strings[Int.random(in: 0..<3, using: &g)]))]
            for _ in 0..<Int.random(in: 0..<4, using: &g) {
                object.append((keys[Int.random(in: 0..<keys.count, using: &g)], value(&g, depth: 1)))
            }
            return JSONValue.object(.init(object, uniquingKeysWith: { a, _ in a })).serialized()
        }
    }
}
