import Crypto
import Foundation
import Norq
import NorqAPNs
import NorqConfig
import NorqCore
import NorqServer
import NorqStore
import NorqStoreSQLite
import NorqTemplates
import NorqTesting
import NorqTracingTesting
import Synchronization
import Testing
import Tracing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Tracing (issue 33): the spans of an API send, from the request through the durable store to each attempt at the
/// APNs emulator (over real TLS), with a tracer that speaks W3C `traceparent` and keeps its spans in memory.
@Suite(.serialized) struct ServeTracingTests {
    static let key = "tracing-key-0123456789abcdef01"
    static let incomingTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let incomingSpan = "00f067aa0ba902b7"

    /// An APNs provider pointed at a fresh emulator.
    static func emulatedAPNs() async throws -> (APNsEmulator, APNsProvider) {
        let key = P256.Signing.PrivateKey()
        let emulator = try APNsEmulator(configuration: .init(environmentName: "sandbox", teamID: "TEAM123ABC",
                                                              signingKeys: ["KEY123ABCD": key.publicKey.pemRepresentation]))
        try await emulator.start()
        var apns = APNsConfiguration(authentication: .token(keyID: "KEY123ABCD", teamID: "TEAM123ABC",
                                                            privateKeyPEM: key.pemRepresentation, keySource: "test"),
                                     bundleID: "com.example.app", production: false)
        apns.sandboxEndpoint = APNsEndpoint(host: "localhost", port: emulator.port)
        apns.additionalTrustRootsPEM = emulator.caCertificatePEM
        let provider = try APNsProvider(name: "apns", configuration: apns,
                                        policy: DeliveryPolicy(retry: RetryPolicy(retries: 1, backoff: .milliseconds(20)),
                                                               maxInFlight: 100),
                                        tokenCache: APNsTokenCache())
        return (emulator, provider)
    }

    static func token(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return "a" + String(repeating: "0", count: 63 - hex.count) + hex
    }

    /// `NorqServer` serving `delivery` on 127.0.0.1 with one `admin` key (``key``): its base URL (once it listens,
    /// waiting at most 10 s) and the task that runs it (cancel it to stop).
    static func serve(_ delivery: DurableDelivery,
                      templates: ReloadableTemplates?) async throws -> (base: String, serving: Task<Void, any Error>) {
        let port = Mutex<Int?>(nil)
        let server = NorqServer(
            settings: ServerConfiguration(host: "127.0.0.1", port: 0,
                                          apiKeys: [.init(name: "full", secret: key, scopes: ["admin"])]),
            dependencies: .init(delivery: delivery, templates: templates, configuration: NorqConfiguration(), metrics: nil),
            onListening: { _, bound in port.withLock { $0 = bound } })
        let serving = Task { try await server.run() }
        var bound: Int?
        for _ in 0..<500 where bound == nil {
            try await Task.sleep(for: .milliseconds(20))
            bound = port.withLock { $0 }
        }
        guard let bound else {
            serving.cancel()
            throw NorqError(.serverBindFailed, "the test server did not listen within 10 s")
        }
        return ("http://127.0.0.1:\(bound)", serving)
    }

    /// Waits (at most 20 s) until `ready` holds for the tracer's finished spans, and returns them.
    static func spans(of tracer: RecordingTracer,
                      until ready: ([RecordingTracer.FinishedSpan]) -> Bool) async throws -> [RecordingTracer.FinishedSpan] {
        let end = ContinuousClock.now.advanced(by: .seconds(20))
        var spans = tracer.finishedSpans
        while !ready(spans), ContinuousClock.now < end {
            try await Task.sleep(for: .milliseconds(20))
            spans = tracer.finishedSpans
        }
        return spans
    }

    /// `POST /v1/sends` with a caller's `traceparent`, served by `NorqServer` on 127.0.0.1 with a SQLite store, and
    /// delivered by a worker of another `DurableDelivery` on the same database (which reads the send from the store,
    /// as another instance would): request -> enqueue, and request -> claim -> attempt through the store.
    @Test func aSendIsTracedFromTheRequestThroughTheStoreToEachAttempt() async throws {
        let (emulator, provider) = try await Self.emulatedAPNs()
        let tracer = RecordingTracer()
        let root = ServedNorq.packageRoot.appendingPathComponent("templates").path
        let templates = ReloadableTemplates(try TemplateLibrary(directory: root))
        let router = try NotificationRouter(providers: [provider], defaultProvider: "apns", templates: templates,
                                            shutdownGracePeriod: .seconds(2), tracer: tracer)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("norq-tracing-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let settings = DeliveryStoreSettings(leaseDuration: .seconds(5), pollInterval: .milliseconds(50))
        let tokens = [Self.token(1), Self.token(2)]
        try await SQLiteDeliveryStore.withMigrated(path: directory.appendingPathComponent("norq.db").path,
                                                   settings: settings) { store in
            let accepting = DurableDelivery(router: router, store: store, settings: settings)
            let delivering = DurableDelivery(router: router, store: store, settings: settings)
            let worker = DurableWorker(delivery: delivering, lanes: 1)
            let (base, serving) = try await Self.serve(accepting, templates: templates)
            let working = Task { try await worker.run() }
            defer {
                serving.cancel()
                worker.stop()
            }
            var request = URLRequest(url: URL(string: base + "/v1/sends")!)
            request.httpMethod = "POST"
            request.timeoutInterval = 20
            request.setValue("Bearer \(Self.key)", forHTTPHeaderField: "Authorization")
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.setValue("00-\(Self.incomingTrace)-\(Self.incomingSpan)-01", forHTTPHeaderField: "traceparent")
            let body: JSONValue = ["template": "order-shipped", "sample": "Default",
                                   "to": .array(tokens.map(JSONValue.string))]
            request.httpBody = Data(body.serialized())
            let (data, response) = try await URLSession.shared.data(for: request)
            #expect((response as? HTTPURLResponse)?.statusCode == 202, "\(String(decoding: data, as: UTF8.self))")
            let sendID = try #require(try JSONValue(parsing: Array(data))["id"]?.stringValue)

            let spans = try await Self.spans(of: tracer) { spans in
                spans.filter { $0.operationName == "norq.attempt" }.count >= tokens.count
                    && spans.contains { $0.operationName == "/v1/sends" }
            }
            // The request: a child of the caller's span, in the caller's trace.
            let requestSpan = try #require(spans.first { $0.operationName == "/v1/sends" }, "\(spans.map(\.operationName))")
            #expect(requestSpan.context.traceID == Self.incomingTrace)
            #expect(requestSpan.parentSpanID == Self.incomingSpan)
            #expect(requestSpan.kind == .server)
            #expect(requestSpan.attributes.get("http.response.status_code") == .int64(202))
            // request -> enqueue
            let enqueue = try #require(spans.first { $0.operationName == "norq.enqueue" })
            #expect(enqueue.context.traceID == Self.incomingTrace)
            #expect(enqueue.parentSpanID == requestSpan.context.spanID)
            #expect(enqueue.attributes.get("norq.send.id") == .string(sendID))
            #expect(enqueue.attributes.get("norq.targets") == .int64(2))
            // The request's context is stored with the send (W3C traceparent in the stored plan).
            let stored = try #require(try await store.send(id: sendID))
            #expect(stored.content.contains("00-\(Self.incomingTrace)-\(requestSpan.context.spanID)-01"), "\(stored.content)")
            // request -> (the store) -> claim -> attempt
            let claims = spans.filter { $0.operationName == "norq.claim" }
            #expect(!claims.isEmpty)
            for claim in claims {
                #expect(claim.context.traceID == Self.incomingTrace)
                #expect(claim.parentSpanID == requestSpan.context.spanID)
                #expect(claim.attributes.get("norq.send.id") == .string(sendID))
                #expect(claim.attributes.get("norq.worker") == .string(worker.name))
            }
            let attempts = spans.filter { $0.operationName == "norq.attempt" }
            #expect(attempts.count == tokens.count)
            var positions: Set<Int64> = []
            for attempt in attempts {
                #expect(attempt.context.traceID == Self.incomingTrace)
                #expect(claims.contains { $0.context.spanID == attempt.parentSpanID }, "an attempt is a claim's child")
                #expect(attempt.kind == .client)
                #expect(attempt.attributes.get("norq.provider") == .string("apns"))
                #expect(attempt.attributes.get("http.response.status_code") == .int64(200))
                #expect(attempt.attributes.get("norq.outcome") == .string("delivered"))
                #expect(attempt.attributes.get("norq.send.id") == .string(sendID))
                if case .int64(let position)? = attempt.attributes.get("norq.target.position") { positions.insert(position) }
            }
            #expect(positions == [0, 1])
            // No span holds a device token.
            for span in spans {
                span.attributes.forEach { name, value in
                    #expect(!tokens.contains { "\(value)".contains($0) }, "\(span.operationName) \(name)")
                }
            }
            #expect(emulator.requests.count == tokens.count)
            worker.stop()
            try await working.value
        }
        await router.shutdown(gracePeriod: .seconds(1))
        try? await emulator.shutdown()
    }

    /// A send through the router without a store: each attempt's span is a child of the caller's span, and a
    /// rejected token's attempt records the rejection.
    @Test func aSendInMemoryTracesEachAttemptAsAChildOfTheCaller() async throws {
        let (emulator, provider) = try await Self.emulatedAPNs()
        let tracer = RecordingTracer()
        let router = try NotificationRouter(providers: [provider], defaultProvider: "apns",
                                            shutdownGracePeriod: .seconds(2), tracer: tracer)
        let delivered = Self.token(7)
        let report = try await tracer.withSpan("caller") { _ in
            try await router.send(content: PushContent(title: "Hi", body: "there"),
                                  to: [Recipient(id: "u", tokens: [PushToken(token: delivered, platform: .ios),
                                                                   PushToken(token: "not-a-token", platform: .ios)])])
        }
        #expect(report.outcomes.count == 2)
        let spans = try await Self.spans(of: tracer) { spans in
            spans.filter { $0.operationName == "norq.attempt" }.count >= 1 && spans.contains { $0.operationName == "caller" }
        }
        let caller = try #require(spans.first { $0.operationName == "caller" })
        let attempts = spans.filter { $0.operationName == "norq.attempt" }
        #expect(!attempts.isEmpty)
        for attempt in attempts {
            #expect(attempt.context.traceID == caller.context.traceID)
            #expect(attempt.parentSpanID == caller.context.spanID)
            #expect(attempt.attributes.get("norq.provider") == .string("apns"))
        }
        #expect(attempts.contains { $0.attributes.get("norq.outcome") == .string("delivered") })
        await router.shutdown(gracePeriod: .seconds(1))
        try? await emulator.shutdown()
    }

    /// A router without a tracer makes no spans, and a durable send without one stores no trace context.
    @Test func withoutATracerNothingIsTracedOrStored() async throws {
        let (emulator, provider) = try await Self.emulatedAPNs()
        let router = try NotificationRouter(providers: [provider], defaultProvider: "apns")
        let store = InMemoryDeliveryStore()
        let delivery = DurableDelivery(router: router, store: store)
        let tracer = RecordingTracer()
        let receipt = try await tracer.withSpan("caller") { _ in
            try await delivery.enqueue(content: PushContent(title: "Hi"),
                                       to: [Recipient(id: "u", tokens: [PushToken(token: Self.token(3), platform: .ios)])])
        }
        let stored = try #require(try await store.send(id: receipt.sendID))
        #expect(!stored.content.contains("traceparent"))
        #expect(tracer.finishedSpans.map(\.operationName) == ["caller"])
        await router.shutdown(gracePeriod: .seconds(1))
        try? await emulator.shutdown()
    }

    /// Error answers are made inside the request's span (the span and the error mapping are one middleware): the
    /// span carries the status the client got, is named by the route when one matched (`HTTP GET` when none did), and
    /// a 4xx is not a failed span. The handler's error never escapes the span unanswered.
    @Test func errorAnswersAreInsideTheRequestSpan() async throws {
        let tracer = RecordingTracer()
        let router = try NotificationRouter(providers: [], templates: nil, tracer: tracer)
        let delivery = DurableDelivery(router: router, store: InMemoryDeliveryStore())
        let (base, serving) = try await Self.serve(delivery, templates: nil)
        defer { serving.cancel() }
        func call(_ method: String, _ path: String, key: String?) async throws -> Int {
            var request = URLRequest(url: URL(string: base + path)!)
            request.httpMethod = method
            request.timeoutInterval = 20
            if let key { request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization") }
            let (_, response) = try await URLSession.shared.data(for: request)
            return try #require((response as? HTTPURLResponse)?.statusCode)
        }
        #expect(try await call("GET", "/v1/sends/0000", key: nil) == 401)
        #expect(try await call("GET", "/v1/nothing-here", key: Self.key) == 404)
        #expect(try await call("DELETE", "/v1/sends", key: Self.key) == 405)
        let spans = try await Self.spans(of: tracer) { $0.count >= 3 }
        #expect(spans.count == 3, "\(spans.map(\.operationName))")
        let statuses = spans.compactMap { span -> Int64? in
            if case .int64(let code) = span.attributes.get("http.response.status_code") { code } else { nil }
        }
        #expect(statuses == [401, 404, 405])
        #expect(spans.allSatisfy { $0.kind == .server && $0.status?.code != .error })
        #expect(spans[0].operationName == "/v1/sends/{id}" && spans[0].attributes.get("http.route") == .string("/v1/sends/{id}"))
        #expect(spans[1].operationName == "HTTP GET" && spans[1].attributes.get("http.route") == nil, "\(spans[1].operationName) \(spans[1].attributes)")
        #expect(spans[1].attributes.get("url.path") == .string("/v1/nothing-here"))
        #expect(spans[2].attributes.get("http.request.method") == .string("DELETE"))
        #expect(spans.allSatisfy { $0.attributes.get("http.request.method") != nil && $0.attributes.get("url.path") != nil })
        await router.shutdown(gracePeriod: .seconds(1))
    }

    // MARK: telemetry: in norq.yaml

    static func load(_ yaml: String) throws(NorqError) -> NorqConfiguration {
        try ConfigurationLoader(registry: ProviderTypeRegistry(), environment: [:])
            .load(yaml: yaml, file: "norq.yaml", baseDirectory: ".")
    }

    @Test func telemetryIsOffByDefaultAndParsed() throws {
        #expect(try Self.load("routing: {}").telemetry == TelemetryConfiguration())
        #expect(!(try Self.load("routing: {}").telemetry.isTracing))
        let telemetry = try Self.load("""
            telemetry:
              traces: otlp
              endpoint: http://127.0.0.1:4318
              serviceName: push
              sampleRatio: 0.25
            """).telemetry
        #expect(telemetry.traces == .otlp && telemetry.isTracing)
        #expect(telemetry.endpoint == "http://127.0.0.1:4318")
        #expect(telemetry.serviceName == "push")
        #expect(telemetry.sampleRatio == 0.25)
        #expect(try Self.load("telemetry: { traces: off }").telemetry.traces == .off)
    }

    @Test(arguments: [
        ("telemetry: { traces: jaeger }", "config/invalid-telemetry"),
        ("telemetry: { traces: otlp, endpoint: 127.0.0.1:4318 }", "config/invalid-telemetry"),
        ("telemetry: { traces: otlp, endpoint: \"http://\" }", "config/invalid-telemetry"),
        ("telemetry: { traces: otlp, endpoint: \"http://a b\" }", "config/invalid-telemetry"),
        ("telemetry: { sampleRatio: 1.5 }", "config/invalid-telemetry"),
        ("telemetry: { sampleRatio: nope }", "config/invalid-telemetry"),
        ("telemetry: { serviceName: \"\" }", "config/invalid-value"),
        ("telemetry: { serviceName: \"\(String(repeating: "n", count: 256))\" }", "config/invalid-telemetry"),
        ("telemetry: { trace: otlp }", "config/unknown-key"),
        ("telemetry: [otlp]", "config/invalid-type"),
    ])
    func refusesInvalidTelemetry(yaml: String, code: String) {
        #expect {
            _ = try Self.load(yaml)
        } throws: { error in
            (error as? NorqError)?.code.rawValue == code
        }
    }

    /// `norq serve` built without the `OTLP` trait (the default build, which the tests run) refuses a configuration
    /// that asks for swift-otel's export, at load, with its own code (and starts nothing). `traces: otlp`, Norq's
    /// own exporter, is in every build (scripts/otlp-export.sh checks what it exports).
    @Test func serveRefusesOTLPExportInABuildWithoutIt() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("norq-otlp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try """
            store: { sqlite: ./norq.db }
            telemetry: { traces: swift-otel, endpoint: "http://127.0.0.1:4318" }
            """.write(to: directory.appendingPathComponent("norq.yaml"), atomically: true, encoding: .utf8)
        let (status, output) = try ServedNorq.runToExit(["-c", "norq.yaml", "--no-auth", "--port", "0"], in: directory)
        #expect(status != 0)
        #expect(output.contains("config/otlp-not-built"), "\(output)")
        #expect(output.contains("--traits OTLP"), "the hint says how to build it: \(output)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("norq.db").path),
                "refused before the store was opened")
    }
}
