import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import Norq
import NorqBuiltIns
import NorqConfig
import NorqCore
import NorqPreview
import NorqTemplates
import ServiceLifecycle
import Synchronization

/// A small project in a temporary folder: a norq.yaml with APNs, FCM and Web Push (the demo keys of
/// examples/keys), and three templates: `welcome` (two samples), `raw` (a `{{{raw}}}` warning) and `strict`
/// (a missing variable: does not render).
struct PreviewFixture {
    static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    let root: URL
    var templates: URL { root.appendingPathComponent("templates") }
    var config: String { root.appendingPathComponent("norq.yaml").path }

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("norq-preview-\(UUID().uuidString)")
        let keys = Self.packageRoot.appendingPathComponent("examples/keys").path
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try """
            templates: ./templates
            providers:
              apns:
                config:
                  keyId: DEMO000000
                  teamId: TEAM123ABC
                  keyPath: \(keys)/AuthKey_DEMO000000.p8
                  bundleId: com.example.Preview
                  production: false
              fcm:
                config:
                  projectId: norq-demo
                  serviceAccount: \(keys)/fcm-service-account-DEMO.json
              webpush:
                config:
                  vapidPublicKey: BHXaCvRuSqOM-0R0CiHhjsBqNOemIUNyHKWXEaEFUglsWC7ykNPTJV0D-G0NvygNCbpPl7-MvV9q9JE44pwVNZs
                  vapidPrivateKey: \(keys)/vapid-demo.pem
                  subject: mailto:ops@example.com
            routing:
              push: apns
              push.android: fcm
              push.web: webpush

            """.write(toFile: config, atomically: true, encoding: .utf8)
        try write("welcome/push.md", Self.welcome(title: "Welcome, {{user.name}}"))
        try write("welcome/data.samples.yaml", """
            Ada:
              user: { name: Ada }
              app: Norq
            Grace:
              user: { name: Grace }
              app: Norq

            """)
        try write("raw/push.md", """
            ---
            title: "Raw"
            ---
            Markup: {{{html}}}

            """)
        try write("raw/data.samples.yaml", "Default:\n  html: \"<b>bold</b>\"\n")
        try write("strict/push.md", """
            ---
            title: "Strict"
            ---
            Hello {{missing.name}}

            """)
    }

    static func welcome(title: String) -> String {
        """
        ---
        title: "\(title)"
        ios:
          subtitle: "Your account is ready"
          thread-id: "onboarding"
          interruption-level: passive
        android:
          channel_id: onboarding
          priority: high
        ---
        Hi {{user.name}}, thanks for joining {{app}}!

        """
    }

    func write(_ relative: String, _ text: String) throws {
        let url = templates.appendingPathComponent(relative)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try text.write(to: url, atomically: false, encoding: .utf8)
    }

    func remove() {
        try? FileManager.default.removeItem(at: root)
    }

    /// The loader `norq preview` would use (configuration, templates, built-in provider types).
    var loader: PreviewProject.Loader {
        let config = self.config
        let templates = self.templates.path
        return { previous throws(NorqError) in
            let registry = ProviderTypeRegistry.builtIn(consoleOutput: { _ in })
            if let previous {
                return previous.replacingLibrary(try TemplateLibrary(directory: templates, rules: previous.library.rules))
            }
            let configuration = try ConfigurationLoader(registry: registry).load(path: config)
            var rules = TemplateRules(providerTypes: registry.registeredTypes)
            rules.payloadSizers = configuration.payloadSizers(registry: registry)
            let library = try TemplateLibrary(directory: templates, rules: rules)
            var logger = Logger(label: "test.preview")
            logger.logLevel = .warning
            return PreviewProject.make(library: library, configuration: configuration, registry: registry, logger: logger)
        }
    }
}

/// A linter standing in for `norq validate`'s checks: one warning on every template, on line 2 of its file.
struct LineTwoLinter: PreviewLinter {
    func findings(library: TemplateLibrary, configuration: NorqConfiguration?,
                  router: NotificationRouter?) -> [String: [PreviewFinding]] {
        var result: [String: [PreviewFinding]] = [:]
        for name in library.templateNames {
            result[name] = [PreviewFinding(severity: .warning, code: "test/line-two", message: "seen by the linter",
                                           file: "\(library.directory)/\(name)/push.md", line: 2, column: 1)]
        }
        return result
    }
}

/// Runs a preview service on 127.0.0.1 (any free port) for the length of `body`.
func withPreview<T: Sendable>(_ fixture: PreviewFixture, linter: any PreviewLinter = LineTwoLinter(),
                              configure: (inout PreviewService.Settings) -> Void = { _ in },
                              _ body: @Sendable (PreviewService, URL) async throws -> T) async throws -> T {
    var settings = PreviewService.Settings(port: 0)
    configure(&settings)
    let (ports, continuation) = AsyncStream<Int>.makeStream()
    var logger = Logger(label: "test.preview")
    logger.logLevel = .warning
    let service = PreviewService(settings: settings, loader: fixture.loader, linter: linter, logger: logger,
                                 onListening: { _, port in continuation.yield(port) })
    // Stopped by graceful shutdown, as Ctrl-C stops `norq preview`: event streams end, requests in flight finish.
    let serviceGroup = ServiceGroup(configuration: .init(services: [.init(service: service)], logger: logger))
    return try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask {
            try await serviceGroup.run()
            return nil
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw PreviewTestError("the preview did not start") }
        do {
            let result = try await body(service, URL(string: "http://127.0.0.1:\(port)")!)
            await serviceGroup.triggerGracefulShutdown()
            while let next = try await group.next() { if next != nil { break } }
            return result
        } catch {
            group.cancelAll()
            throw error
        }
    }
}

struct PreviewTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// HTTP against the preview (AsyncHTTPClient, bounded by a timeout).
enum PreviewHTTP {
    struct Answer {
        var status: Int
        var json: JSONValue
        var text: String
    }

    static func get(_ url: URL, _ path: String) async throws -> Answer {
        try await send(HTTPClientRequest(url: url.absoluteString + path))
    }

    static func post(_ url: URL, _ path: String, _ body: String) async throws -> Answer {
        var request = HTTPClientRequest(url: url.absoluteString + path)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: body))
        return try await send(request)
    }

    static func send(_ request: HTTPClientRequest) async throws -> Answer {
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 8 * 1024 * 1024)
        let text = String(buffer: bytes)
        let json = (try? JSONValue(parsing: text)) ?? .null
        return Answer(status: Int(response.status.code), json: json, text: text)
    }
}

/// The text of a server-sent event stream, read in the background as it arrives.
final class EventLog: Sendable {
    let text = Mutex("")

    /// Waits (up to `timeout`) until the stream holds `needle`; the time it took.
    func wait(for needle: String, timeout: Duration = .seconds(5)) async throws -> Duration {
        let clock = ContinuousClock()
        let start = clock.now
        while clock.now - start < timeout {
            if text.withLock({ $0.contains(needle) }) { return clock.now - start }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw PreviewTestError("no \(needle) in the event stream within \(timeout): \(text.withLock { $0 })")
    }
}
