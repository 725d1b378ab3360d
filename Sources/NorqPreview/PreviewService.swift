import Foundation
import Hummingbird
package import Logging
package import Norq
import NorqCore
import NIOCore
import ServiceLifecycle
import Synchronization

/// `norq preview`: the template author's page on 127.0.0.1 (never another address), a `Service`.
///
/// `run()` loads the project, listens, and owns the watcher: a task of its group that polls the watched files
/// (see ``PreviewWatcher``) and, after a change, loads the project again and tells every open page
/// (server-sent events on `/events`), which then renders again. Graceful shutdown ends the event streams and the
/// listener (requests in flight finish), then the watcher.
///
/// Routes: `GET /` the page; `GET /api/templates`; `POST /api/render` `{"template", "sample"?, "data"?}`;
/// `GET /events`.
package final class PreviewService: Service {
    /// Where and how much.
    package struct Settings: Sendable {
        /// The port on 127.0.0.1 (0: any free port).
        package var port: Int
        /// How often the watched files are looked at.
        package var pollInterval: Duration = .milliseconds(100)
        /// Pages subscribed to live updates at once (more get `preview/too-many-clients`).
        package var maximumClients = 16
        /// The largest render request (pasted data), in bytes (`preview/body-too-large`).
        package var maximumBodyBytes = 256 * 1024
        /// A comment on every event stream this often, so that proxies and browsers keep it open.
        package var keepAliveInterval: Duration = .seconds(15)

        package init(port: Int) {
            self.port = port
        }
    }

    /// The address the preview listens on, whatever the settings: the page shows templates and requests.
    package static let host = "127.0.0.1"

    let settings: Settings
    let loader: PreviewProject.Loader
    let linter: any PreviewLinter
    let logger: Logger
    let onListening: @Sendable (String, Int) -> Void
    let current = Mutex(PreviewSnapshot(generation: 0, project: nil, loadError: nil, findings: [:], watched: []))
    let events: PreviewEvents

    /// - Parameters:
    ///   - loader: reads the configuration and the templates (called at start and after each change on disk; when
    ///     the config file did not change, with the project loaded last, whose configuration and router it may keep).
    ///   - linter: the findings shown beside each template (see ``PreviewLinter``).
    ///   - onListening: called with the bound host and port once the page can be loaded.
    package init(settings: Settings, loader: @escaping PreviewProject.Loader,
                 linter: any PreviewLinter, logger: Logger = Logger(label: "norq.preview"),
                 onListening: @escaping @Sendable (String, Int) -> Void = { _, _ in }) {
        self.settings = settings
        self.loader = loader
        self.linter = linter
        self.logger = logger
        self.onListening = onListening
        self.events = PreviewEvents(maximumClients: settings.maximumClients)
    }

    /// What is served now.
    package var snapshot: PreviewSnapshot { current.withLock { $0 } }

    /// Loads the project again and makes it current (the next generation); a project that cannot be loaded
    /// leaves its error on the page and the watched paths as they were. Returns the router it replaced (nil when
    /// none, or when the new project keeps it).
    /// - Parameter keepConfiguration: the config file did not change: the loader may keep the configuration and
    ///   the router of the project loaded last (reading provider keys again is most of a reload's time).
    @discardableResult
    package func reload(keepConfiguration: Bool = false) -> NotificationRouter? {
        let previous = keepConfiguration ? snapshot.project : nil
        let loaded: Result<PreviewProject, NorqError>
        do throws(NorqError) {
            loaded = .success(try loader(previous))
        } catch {
            loaded = .failure(error)
            // Also on the page, until a save fixes it.
            logger.warning("the project could not be loaded: \(error)")
        }
        var findings: [String: [PreviewFinding]] = [:]
        if case .success(let project) = loaded {
            findings = linter.findings(library: project.library, configuration: project.configuration,
                                       router: project.router)
        }
        let kept = (try? loaded.get())?.router
        return current.withLock { snapshot in
            let old = snapshot.project?.router.flatMap { $0 === kept ? nil : $0 }
            snapshot.generation += 1
            switch loaded {
            case .success(let project):
                snapshot.project = project
                snapshot.loadError = nil
                snapshot.watched = project.watched
            case .failure(let error):
                snapshot.project = nil
                snapshot.loadError = error
            }
            snapshot.findings = findings
            return old
        }
    }

    /// Serves until graceful shutdown or cancellation.
    package func run() async throws {
        reload(keepConfiguration: false)
        let router = Router()
        addRoutes(to: router)
        let onListening = self.onListening
        let port = settings.port
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(Self.host, port: port), serverName: "norq-preview"),
            onServerRunning: { channel in onListening(Self.host, channel.localAddress?.port ?? port) },
            logger: logger)
        // The watcher's first look is taken before the server listens: taken in its task, it could come after a
        // save made as soon as the page was up (a test's, or a quick editor's), which then went unnoticed.
        let firstLook = PreviewWatcher(paths: snapshot.watched).look()
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await self.watch(from: firstLook) }
                try await withGracefulShutdownHandler {
                    try await app.run()
                } onGracefulShutdown: {
                    self.events.close()
                }
                group.cancelAll()
            }
        } catch let error as IOError {
            await snapshot.project?.router?.shutdown(gracePeriod: .zero)
            throw NorqError(.previewBindFailed, "could not listen on \(Self.host):\(port): \(error)",
                            hint: "choose another --port (0: any free port)")
        }
        events.close()
        await snapshot.project?.router?.shutdown(gracePeriod: .zero)
    }

    /// The watcher: polls until cancelled; after a change, reloads and tells the pages. The pause between looks
    /// is `pollInterval`, or 20 times the last look when that is longer: the watcher never takes more than about
    /// 5 % of a core, however many files the project has. `firstLook`: the watched files as the project was loaded.
    func watch(from firstLook: [String: PreviewWatcher.Stamp]) async {
        let clock = ContinuousClock()
        var paths = snapshot.watched
        var last = firstLook
        var lookTime = Duration.zero
        var lastKeepAlive = clock.now
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: max(settings.pollInterval, lookTime * 20))
            } catch {
                return
            }
            let lookStarted = clock.now
            let now = PreviewWatcher(paths: paths).look()
            lookTime = clock.now - lookStarted
            if now != last {
                let started = clock.now
                // Only files under the templates directory changed: the configuration (and router) can be kept.
                let changed = Set(now.keys).union(last.keys).filter { now[$0] != last[$0] }
                let configFile = snapshot.project?.configuration?.file
                let keep = snapshot.project != nil && !changed.contains { $0 == configFile }
                let old = reload(keepConfiguration: keep)
                let loadTime = clock.now - started
                let snapshot = self.snapshot
                // A reload may watch other paths (a config naming another templates directory).
                if snapshot.watched != paths {
                    paths = snapshot.watched
                    last = PreviewWatcher(paths: paths).look()
                } else {
                    last = now
                }
                events.broadcast(.init(event: "change", data: #"{"generation":\#(snapshot.generation)}"#))
                logger.debug("project changed: reloaded", metadata: [
                    "generation": "\(snapshot.generation)", "load": "\(loadTime)", "look": "\(lookTime)",
                ])
                if let old { await old.shutdown(gracePeriod: .zero) }
                lastKeepAlive = clock.now
            } else if clock.now - lastKeepAlive >= settings.keepAliveInterval {
                events.broadcast(.init(event: nil, data: "keep-alive"))
                lastKeepAlive = clock.now
            }
        }
    }

    // MARK: routes

    func addRoutes(to router: Router<BasicRequestContext>) {
        router.add(middleware: LoopbackHostMiddleware())
        router.get("/") { _, _ in
            Response(status: .ok,
                     headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
                     body: ResponseBody(byteBuffer: ByteBuffer(string: PreviewPage.html)))
        }
        router.get("/api/templates") { _, _ in
            Self.json(200, PreviewRenderer.templatesJSON(self.snapshot))
        }
        router.post("/api/render") { request, _ in
            do {
                let parsed = try await self.readRenderRequest(request)
                let (status, body) = PreviewRenderer.render(parsed, snapshot: self.snapshot)
                return Self.json(status, body)
            } catch let error as NorqError {
                return Self.json(error.previewStatus, ["error": PreviewRenderer.errorJSON(error)])
            }
        }
        router.get("/events") { _, _ in
            let generation = self.snapshot.generation
            guard let stream = self.events.subscribe(
                first: .init(event: "hello", data: #"{"generation":\#(generation)}"#)) else {
                let error = NorqError(.previewTooManyClients,
                                      "\(self.settings.maximumClients) pages are already subscribed to live updates",
                                      hint: "close a preview tab")
                return Self.json(error.previewStatus, ["error": PreviewRenderer.errorJSON(error)])
            }
            return Response(
                status: .ok,
                headers: [.contentType: "text/event-stream", .cacheControl: "no-store"],
                body: ResponseBody { writer in
                    for await message in stream {
                        try await writer.write(ByteBuffer(string: message.text))
                    }
                    try await writer.finish(nil)
                })
        }
    }

    func readRenderRequest(_ request: Request) async throws(NorqError) -> PreviewRenderRequest {
        let limit = settings.maximumBodyBytes
        let tooLarge = NorqError(.previewBodyTooLarge, "the render request is larger than \(limit) bytes",
                                 hint: "paste less data")
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit { throw tooLarge }
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: limit)
        } catch is NIOTooManyBytesError {
            throw tooLarge
        } catch {
            throw NorqError(.previewInvalidRequest, "the body could not be read")
        }
        let json: JSONValue
        do {
            json = try JSONValue(parsing: Array(buffer.readableBytesView), maxDepth: 64)
        } catch {
            throw NorqError(.previewInvalidRequest, "the body is not valid JSON: \(error.message)")
        }
        return try PreviewRenderRequest(json: json)
    }

    static func json(_ status: Int, _ body: JSONValue) -> Response {
        Response(status: HTTPResponse.Status(code: status),
                 headers: [.contentType: "application/json", .cacheControl: "no-store"],
                 body: ResponseBody(byteBuffer: ByteBuffer(bytes: body.serialized())))
    }
}

/// Answers only requests addressed to a loopback name: the preview listens on 127.0.0.1, but a page of another site
/// could still reach it under its own name through DNS rebinding (its name resolving to 127.0.0.1) and read the
/// templates and requests; its `Host` gives it away (`preview/forbidden-host`, 403).
struct LoopbackHostMiddleware: RouterMiddleware {
    typealias Context = BasicRequestContext

    func handle(_ request: Request, context: Context,
                next: (Request, Context) async throws -> Response) async throws -> Response {
        let authority = request.head.authority ?? ""
        guard Self.isLoopback(authority: authority) else {
            let error = NorqError(.previewForbiddenHost,
                                  "the preview answers requests to 127.0.0.1 or localhost only, not to \"\(authority.prefix(100))\"",
                                  hint: "open http://127.0.0.1:<port>/")
            return PreviewService.json(error.previewStatus, ["error": PreviewRenderer.errorJSON(error)])
        }
        return try await next(request, context)
    }

    /// `127.0.0.1`, `localhost` or `[::1]`, with or without a port.
    static func isLoopback(authority: String) -> Bool {
        let host: Substring
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return false }
            host = authority[...close]
        } else {
            host = authority.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        }
        return ["127.0.0.1", "localhost", "[::1]"].contains(host.lowercased())
    }
}
