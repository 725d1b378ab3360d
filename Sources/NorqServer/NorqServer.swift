import Hummingbird
public import Logging
public import Norq
public import NorqConfig
public import NorqCore
import NorqTemplates
public import ServiceLifecycle
import Synchronization
import UnixSignals
import NIOCore
import NorqAPI
import NIOSSL
public import Prometheus
import Metrics

/// `norq serve`: the router as an authenticated HTTP API on Hummingbird 2. A `Service`: run it in a
/// `ServiceGroup` after the router and the durable worker, so that graceful shutdown stops the listener first
/// (requests in flight finish), then the worker (attempts in flight finish, claimed rows are released), then the
/// router (providers drain).
///
/// Every route but `/healthz` and `/readyz` needs `Authorization: Bearer <key>` (unless built with
/// `allowAnonymous`); errors are `{"error": {"code", "message"}}` with the code's HTTP status.
public final class NorqServer: Service {
    /// What the server needs from the rest of the process.
    public struct Dependencies: Sendable {
        public var delivery: DurableDelivery
        /// The templates (swapped on reload; give the same object to the router).
        public var templates: ReloadableTemplates?
        /// The configuration loaded at start (`/v1/validate` reports the one loaded last: a reload replaces it).
        public var configuration: NorqConfiguration
        /// The Prometheus registry `/metrics` renders (see ``NorqServer/bootstrapMetrics()``).
        public var metrics: PrometheusCollectorRegistry?

        public init(delivery: DurableDelivery, templates: ReloadableTemplates?, configuration: NorqConfiguration,
                    metrics: PrometheusCollectorRegistry?) {
            self.delivery = delivery
            self.templates = templates
            self.configuration = configuration
            self.metrics = metrics
        }
    }

    /// What a reload replaces: keys, limits, the rate limiter (kept when the rate settings are unchanged) and the
    /// configuration `/v1/validate` reports.
    struct Live: Sendable {
        var settings: ServerConfiguration
        var keys: APIKeyTable
        var rateLimiter: RateLimiter
        var configuration: NorqConfiguration
    }
    let live: Mutex<Live>
    /// The address (a reload cannot move the listener).
    let listenHost: String
    let listenPort: Int
    let dependencies: Dependencies
    let allowAnonymous: Bool
    /// Reads the configuration and templates again (SIGHUP); nil: no reload.
    let reloader: (@Sendable () async throws(NorqError) -> Reloaded)?
    /// Builds a router (providers and routing) from a reloaded configuration; nil: providers are not reloaded.
    let routerFactory: (@Sendable (NorqConfiguration) throws(NorqError) -> NotificationRouter)?
    var settings: ServerConfiguration { live.withLock { $0.settings } }
    /// The configuration loaded last (at start or by a reload).
    var configuration: NorqConfiguration { live.withLock { $0.configuration } }
    var keys: APIKeyTable { live.withLock { $0.keys } }
    var rateLimiter: RateLimiter { live.withLock { $0.rateLimiter } }
    let gate = IdempotencyGate()
    /// The store's health and queue depth, kept by a background check that `run()` owns (see ``StoreHealth``).
    let storeHealth = StoreHealth()
    /// How often the background check reads the store.
    static let storeCheckInterval = Duration.seconds(1)
    /// The listener's TLS context when it speaks HTTPS (set by `run()`); a reload swaps the context inside.
    let listenerTLS = Mutex<ServerTLSContext?>(nil)
    /// Requests without a valid key, per client address: 10 a second, 20 at once, 10,000 addresses at most.
    let failedAuthentications = RateLimiter(ratePerSecond: 10, burst: 20, maximumKeys: 10_000)
    let logger: Logger
    let requestMetrics: RequestMetrics
    private let onListening: @Sendable (String, Int) -> Void

    /// - Parameters:
    ///   - settings: the `server:` block (host, port, keys, limits), after `--host`/`--port`.
    ///   - allowAnonymous: `--no-auth`: no key needed (the caller checked the address is loopback).
    ///   - reloader: reads the configuration and templates again, for SIGHUP (nil: SIGHUP is not handled).
    ///   - routerFactory: builds the providers and routing of a reloaded configuration; the new router replaces
    ///     `dependencies.delivery.router` and the old one is shut down once its attempts in flight have finished.
    ///     Nil: providers and routing are not reloaded. Run the router as ``DeliveryRouterService``, so that
    ///     graceful shutdown stops the router current at that time.
    ///   - onListening: called with the bound host and port once the server accepts connections.
    public init(settings: ServerConfiguration, dependencies: Dependencies, allowAnonymous: Bool = false,
                logger: Logger = Logger(label: "norq.server"),
                reloader: (@Sendable () async throws(NorqError) -> Reloaded)? = nil,
                routerFactory: (@Sendable (NorqConfiguration) throws(NorqError) -> NotificationRouter)? = nil,
                onListening: @escaping @Sendable (String, Int) -> Void = { _, _ in }) {
        self.live = Mutex(Live(settings: settings, keys: APIKeyTable(settings.apiKeys),
                               rateLimiter: RateLimiter(ratePerSecond: settings.limits.ratePerSecond,
                                                        burst: settings.limits.burst),
                               configuration: dependencies.configuration))
        self.listenHost = settings.host
        self.listenPort = settings.port
        self.dependencies = dependencies
        self.allowAnonymous = allowAnonymous
        self.reloader = reloader
        self.routerFactory = routerFactory
        self.logger = logger
        self.requestMetrics = RequestMetrics()
        self.onListening = onListening
    }

    /// Refuses an insecure start: no keys without `--no-auth`, or `--no-auth` on an address that is not loopback.
    public static func checkSecurity(_ settings: ServerConfiguration, noAuth: Bool) throws(NorqError) {
        if noAuth {
            guard isLoopback(settings.host) else {
                throw NorqError(.serverInsecure,
                                "--no-auth is allowed only on a loopback address (127.0.0.1, ::1, localhost), not \(settings.host)",
                                hint: "add server.apiKeys to norq.yaml, or listen on 127.0.0.1")
            }
            return
        }
        guard !settings.apiKeys.isEmpty else {
            throw NorqError(.serverInsecure, "norq serve needs at least one API key (server.apiKeys in norq.yaml)",
                            at: settings.location,
                            hint: "server: { apiKeys: [{ name: me, key: \"${NORQ_API_KEY}\" }] }, or --no-auth on 127.0.0.1 for local use")
        }
    }

    /// Whether `host` certainly means this machine, without any name lookup: `localhost`, an IPv4 literal in
    /// 127.0.0.0/8 (four decimal parts), or the IPv6 loopback `::1` (also bracketed or written out in full).
    /// Anything else (`127.example.invalid`, another name) is refused.
    static func isLoopback(_ host: String) -> Bool {
        let host = host.lowercased()
        if host == "localhost" { return true }
        let unbracketed = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        if unbracketed == "::1" || unbracketed == "0:0:0:0:0:0:0:1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return false }
        var octets: [Int] = []
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy({ $0.isASCII && $0.isNumber }),
                  let value = Int(part), value <= 255 else { return false }
            octets.append(value)
        }
        return octets[0] == 127
    }

    /// Makes a Prometheus registry the process's swift-metrics backend (once per process) and returns it.
    public static func bootstrapMetrics() -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        return registry
    }

    /// Listens until graceful shutdown (stops accepting, lets requests in flight finish) or cancellation.
    public func run() async throws {
        let router = Router(context: ServerRequestContext.self)
        // Outermost; when the router traces, each request's answer is made inside its span.
        router.add(middleware: ErrorAndAccessMiddleware(logger: logger, metrics: requestMetrics,
                                                        tracing: dependencies.delivery.router.tracer.map(RequestTracing.init(tracer:)),
                                                        redact: { [weak self] in self?.publicError($0) ?? $0 }))
        addRoutes(to: router)
        let onListening = self.onListening
        let host = listenHost
        let (server, tls) = try Self.serverBuilder(settings, logger: logger)
        listenerTLS.withLock { $0 = tls }
        let app = Application(
            router: router,
            server: server,
            configuration: .init(address: .hostname(host, port: listenPort), serverName: "norq"),
            onServerRunning: { channel in onListening(host, channel.localAddress?.port ?? 0) },
            logger: logger)
        // The store's health is read in the background (a task of this group, ended with it), so that /readyz
        // and /metrics answer from memory whatever the database does. The first check is made before listening.
        let store = dependencies.delivery.store
        await storeHealth.check(store)
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await self.storeHealth.run(store: store, interval: Self.storeCheckInterval) }
                if reloader != nil {
                    group.addTask {
                        // SIGHUP: reload keys, limits, templates, TLS and providers; the listener and requests in flight go on.
                        for await _ in await UnixSignalsSequence(trapping: .sighup) { await self.reload() }
                    }
                }
                try await app.run()
                group.cancelAll()
            }
        } catch let error as NorqError {
            throw error
        } catch let error as IOError {
            throw NorqError(.serverBindFailed, "could not listen on \(host):\(listenPort): \(error)")
        }
    }
}

/// Maps every error to the JSON error body (a client mistake never becomes a 500), writes one access log line
/// per request (method, route pattern, status, key name, duration; never a key, a token or a body) and counts
/// requests by route pattern and status. When the router traces, the request's span (``RequestTracing``) is around
/// all of it.
struct ErrorAndAccessMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    let logger: Logger
    let metrics: RequestMetrics
    /// The request's span; nil when the router does not trace.
    let tracing: RequestTracing?
    /// Rewrites an error for the caller: no server path, no name outside the caller's scope.
    let redact: @Sendable (NorqError) -> NorqError

    func handle(_ request: Request, context: Context,
                next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let tracing else { return await answer(request, context: context, next: next) }
        return await tracing.traced(request, context: context) { request, context in
            await answer(request, context: context, next: next)
        }
    }

    /// The answer to `request`: the next responder's, or its error's; counted and logged.
    private func answer(_ request: Request, context: Context,
                        next: (Request, Context) async throws -> Response) async -> Response {
        let started = ContinuousClock.now
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as NorqError {
            response = ServerJSON.error(redact(error))
        } catch let limited as RateLimited {
            response = ServerJSON.error(limited.error, headers: [.retryAfter: "\(limited.seconds)"])
        } catch let error as any HTTPResponseError {
            let code: NorqError.Code = switch error.status.code {
            case 404: .serverNotFound
            case 413: .serverBodyTooLarge
            default: .serverInvalidRequest
            }
            if error.status.code == 404, let allowed = NorqServer.allowedMethods(path: request.uri.path) {
                // A route of the API asked with a method it does not take: 405 with the methods it takes.
                var answer = ServerJSON.error(NorqError(.serverInvalidRequest,
                                                        "\(request.method) is not allowed on \(request.uri.path.prefix(200))",
                                                        hint: "allowed: " + allowed.joined(separator: ", ")),
                                              headers: [.allow: allowed.joined(separator: ", ")])
                answer.status = .methodNotAllowed
                response = answer
            } else {
                var answer = ServerJSON.error(NorqError(code, error.status.code == 404
                                                        ? "no route \(request.method) \(request.uri.path.prefix(200))"
                                                        : "the request was refused (\(error.status.code))"))
                if error.status.code == 405 { answer.status = .methodNotAllowed }
                response = answer
            }
        } catch {
            logger.warning("unexpected error answering a request", metadata: ["norq.error": "\(type(of: error))"])
            response = ServerJSON.encoded(500, Components.Schemas._Error(error: .init(code: "server/internal",
                                                                                      message: "internal error")))
        }
        let route = context.endpointPath ?? "unmatched"
        let elapsed = ContinuousClock.now - started
        metrics.record(route: route, method: request.method.rawValue, status: response.status.code, duration: elapsed)
        logger.info("request", metadata: [
            "norq.http.method": "\(request.method)", "norq.http.route": "\(route)",
            "norq.http.status": "\(response.status.code)", "norq.api-key": "\(context.keyName ?? "-")",
            "norq.http.duration-ms": "\(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)",
        ])
        return response
    }
}
