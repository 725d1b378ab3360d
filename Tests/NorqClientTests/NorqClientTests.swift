import AsyncHTTPClient
import Crypto
import Foundation
import Norq
import NorqAPI
import NorqClient
import NorqConfig
import NorqConsole
import NorqServer
import NorqStore
import NIOCore
import NIOHTTP1
import NorqTemplates
import OpenAPIRuntime
import Synchronization
import Testing

/// `NorqClient` against a live in-process `NorqServer` on 127.0.0.1 (the in-memory store, the console provider,
/// the repository's templates; no worker, so sends stay pending).
@Suite(.serialized) struct NorqClientTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let key = "client-key-0123456789abcdef"
    static func token(_ i: Int) -> String { String(repeating: "ab", count: 28) + String(format: "%08x", i) }

    /// Runs `body` with a client of a server that listens on a free port, and stops the server after.
    static func withServer(_ body: (NorqClient, URL) async throws -> Void) async throws {
        let library = try TemplateLibrary(directory: packageRoot.appendingPathComponent("templates").path)
        let templates = ReloadableTemplates(library)
        let router = try NotificationRouter(providers: [ConsoleProvider(name: "console", output: { _ in })],
                                            defaultProvider: "console", templates: templates)
        let delivery = DurableDelivery(router: router, store: InMemoryDeliveryStore())
        let port = Mutex<Int?>(nil)
        var limits = ServerConfiguration.Limits()
        limits.recipients = 5
        let server = NorqServer(
            settings: ServerConfiguration(host: "127.0.0.1", port: 0, apiKeys: [
                .init(name: "app", secret: key, scopes: ["admin"]),
            ], limits: limits),
            dependencies: .init(delivery: delivery, templates: templates, configuration: NorqConfiguration(),
                                metrics: nil),
            onListening: { _, bound in port.withLock { $0 = bound } })
        let task = Task { try await server.run() }
        defer { task.cancel() }
        var bound: Int?
        for _ in 0..<250 where bound == nil {
            try await Task.sleep(for: .milliseconds(20))
            bound = port.withLock { $0 }
        }
        let listening = try #require(bound, "the server did not start listening")
        let url = try #require(URL(string: "http://127.0.0.1:\(listening)"))
        try await body(NorqClient(serverURL: url, apiKey: key, timeout: .seconds(10)), url)
    }

    @Test func sendsReadsRendersValidatesAndRegistersThroughTheGeneratedClient() async throws {
        try await Self.withServer { norq, _ in
            #expect(try await norq.api.getHealth().ok.body.json.status == "ok")

            // A send: 202 with its id and status URL, then its status, page and rows.
            let to = Components.Schemas.SendRequest.ToPayload.case2(try OpenAPIArrayContainer(unvalidatedValue: [Self.token(1), Self.token(2)]))
            let sent = try await norq.api.createSend(
                headers: .init(idempotencyKey: "client-test-1"),
                body: .json(.init(template: "order-shipped", sample: "Default", to: to)))
            let accepted = try sent.accepted.body.json
            #expect(accepted.targets == 2 && accepted.statusUrl == "/v1/sends/\(accepted.id)")
            let status = try await norq.api.getSend(path: .init(id: accepted.id), query: .init(limit: 1)).ok.body.json
            #expect(status.id == accepted.id && status.targets == 2)
            #expect(status.rows.count == 1 && status.page.next == 1)
            #expect(status.rows.first?.token.contains(Self.token(1)) == false, "tokens are shortened")

            // A dry run of the content, and a validation of one template.
            let rendered = try await norq.api.render(body: .json(.init(template: "order-shipped", sample: "Default")))
                .ok.body.json
            #expect(rendered.content?.title.contains("ORD-123") == true, "\(String(describing: rendered.content))")
            let validation = try await norq.api.validate(body: .json(.init(template: "order-shipped"))).ok.body.json
            #expect(validation.valid && validation.templates.count == 1)

            // Re-registration, then a query of the registry.
            let registered = try await norq.api.tokens(body: .json(.init(register: [Self.token(1), Self.token(2)])))
                .ok.body.json
            #expect(registered.registered == 2)
            let queried = try await norq.api.tokens(body: .json(.init(tokens: [Self.token(1)]))).ok.body.json
            #expect(queried.tokens?.map(\.invalid) == [false])
        }
    }

    /// Every operation of the spec, through the generated client: each answer is one the spec documents and decodes
    /// into its generated type (a server answer that drifted from docs/openapi.yaml fails here).
    @Test func everyOperationAnswersInTheSpecsShape() async throws {
        try await Self.withServer { norq, _ in
            switch try await norq.api.getReadiness() {
            case .ok(let ready): #expect(try ready.body.json.status == "ready")
            case .serviceUnavailable(let notReady): Issue.record("not ready: \(try notReady.body.json.error.message)")
            case .undocumented(let status, _): Issue.record("undocumented \(status)")
            }
            guard case .ok = try await norq.api.getMetrics() else { Issue.record("metrics"); return }
            let to = Components.Schemas.RenderRequest(template: "order-shipped", sample: "Default",
                                                      to: try OpenAPIValueContainer(unvalidatedValue: [Self.token(3)]))
            let deliveries = try await norq.api.render(body: .json(to)).ok.body.json.deliveries ?? []
            #expect(deliveries.count == 1 && deliveries.first?.provider == "console" && deliveries.first?.request != nil)
            let all = try await norq.api.validate(body: .json(.init())).ok.body.json
            #expect(all.valid && all.templates.count >= 5 && all.providers?.isEmpty == true, "no configured provider")
            #expect(try await norq.api.tokens(body: .json(.init(limit: 10))).ok.body.json.tokens?.isEmpty == true)
            // No APNs provider here: the channel routes answer their documented 400.
            guard case .badRequest = try await norq.api.listChannels(),
                  case .badRequest = try await norq.api.getChannel(path: .init(id: "abc")),
                  case .badRequest = try await norq.api.deleteChannel(path: .init(id: "abc")),
                  case .badRequest = try await norq.api.createChannel(body: .json(.init())) else {
                Issue.record("a channel route did not answer 400")
                return
            }
            // A provider that does not exist: 422 routing/unknown-provider (semantic, not a malformed request).
            guard case .unprocessableContent(let unknown) = try await norq.api.listChannels(query: .init(provider: "nope"))
            else {
                Issue.record("an unknown provider did not answer 422")
                return
            }
            #expect(try unknown.body.json.error.code == "routing/unknown-provider")
        }
    }

    /// A path of the API with a method it does not take: 405 with Allow (not 404); another path: 404.
    @Test func anUndeclaredMethodIs405WithAllow() async throws {
        try await Self.withServer { _, url in
            for (method, path, status, allow) in [(HTTPMethod.PUT, "/v1/validate", 405, "POST"),
                                                  (.PATCH, "/v1/channels", 405, "GET, POST"),
                                                  (.POST, "/v1/sends/0123abcd", 405, "GET"),
                                                  (.GET, "/v1/nothing", 404, nil)] {
                var request = HTTPClientRequest(url: url.absoluteString + path)
                request.method = method
                request.headers.add(name: "Authorization", value: "Bearer \(Self.key)")
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
                #expect(Int(response.status.code) == status, "\(method) \(path)")
                #expect(response.headers.first(name: "Allow") == allow, "\(method) \(path)")
                let body = try await response.body.collect(upTo: 65_536)
                #expect(String(buffer: body).contains(status == 405 ? "server/invalid-request" : "server/not-found"))
            }
        }
    }

    @Test func documentedErrorsArriveAsTheirCases() async throws {
        try await Self.withServer { norq, _ in
            // Past server.limits.recipients (5): 413 with the error document.
            let many = Components.Schemas.SendRequest.ToPayload.case2(try OpenAPIArrayContainer(unvalidatedValue: (0..<6).map(Self.token)))
            let tooMany = try await norq.api.createSend(body: .json(.init(template: "order-shipped", to: many)))
            guard case .contentTooLarge(let answer) = tooMany else {
                Issue.record("expected 413, got \(tooMany)")
                return
            }
            #expect(try answer.body.json.error.code == "server/too-many-recipients")
            // An unknown send: 404; an unknown template: 422.
            guard case .notFound(let missing) = try await norq.api.getSend(path: .init(id: "0123abcd")) else {
                Issue.record("expected 404")
                return
            }
            #expect(try missing.body.json.error.code == "store/send-not-found")
            let to = Components.Schemas.SendRequest.ToPayload.case2(try OpenAPIArrayContainer(unvalidatedValue: [Self.token(1)]))
            guard case .unprocessableContent(let unknown) = try await norq.api.createSend(
                body: .json(.init(template: "nope", to: to))) else {
                Issue.record("expected 422")
                return
            }
            #expect(try unknown.body.json.error.code == "template/not-found")
        }
    }

    @Test func aWrongKeyIs401() async throws {
        try await Self.withServer { _, url in
            let other = NorqClient(serverURL: url, apiKey: "wrong-key-0123456789abcdef")
            let to = Components.Schemas.SendRequest.ToPayload.case2(try OpenAPIArrayContainer(unvalidatedValue: [Self.token(1)]))
            guard case .unauthorized(let refused) = try await other.api.createSend(
                body: .json(.init(template: "order-shipped", to: to))) else {
                Issue.record("expected 401")
                return
            }
            #expect(try refused.body.json.error.code == "server/unauthorized")
        }
    }
}

/// The committed generated code matches docs/openapi.yaml: the spec's SHA-256 is the one
/// `scripts/generate-openapi.sh` recorded when it generated Sources/NorqAPI and Sources/NorqClient.
@Suite struct OpenAPIGeneratedCodeTests {
    @Test func theGeneratedCodeIsOfTheCurrentSpec() throws {
        let root = NorqClientTests.packageRoot
        let spec = try Data(contentsOf: root.appendingPathComponent("docs/openapi.yaml"))
        let recorded = try String(contentsOf: root.appendingPathComponent("Sources/NorqAPI/Generated/openapi.yaml.sha256"),
                                  encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let digest = SHA256.hash(data: spec).map { String(format: "%02x", $0) }.joined()
        #expect(digest == recorded, "docs/openapi.yaml changed since the code was generated: run scripts/generate-openapi.sh")
    }
}
