public import Tracing
public import Logging
public import Metrics
public import NorqCore
public import ServiceLifecycle
import NorqSpanAttributes
import Synchronization

/// The library applications call: renders a template once, routes every token to a provider instance,
/// delivers concurrently (bounded per provider) under each provider's retry policy, deduplicates by
/// idempotency key, and reports one outcome per token.
///
/// It is a `Service` (swift-service-lifecycle): `run()` waits for graceful shutdown, then stops
/// accepting sends, drains the ones in flight within `shutdownGracePeriod` and shuts the providers down.
public final class NotificationRouter: Service {
    /// Provider instances by name.
    public let providers: [String: any PushProvider]
    /// Provider instance names in the order they were given (routing's "only provider" step uses it).
    public let providerNames: [String]
    /// `routing["push"]`: the fallback provider for every platform it serves.
    public let defaultProvider: String?
    /// `routing["push.<platform>"]`.
    public let byPlatform: [Platform: String]
    /// The route of a token without an explicit provider, per platform, worked out at init. Searched in order:
    /// a few platforms of short names compare faster than a dictionary hashes one, per token.
    let implicitRoutes: [(platform: Platform, route: RouteDecision)]
    /// How long `shutdown()` waits for in-flight sends.
    public let shutdownGracePeriod: Duration
    /// Invalid-token events (`Unregistered`, `ExpiredToken`, `BadDeviceToken`). Buffers the newest 10,000
    /// when nobody reads; finishes at shutdown.
    public let invalidTokens: AsyncStream<InvalidTokenEvent>

    let templates: (any TemplateSource)?
    let deduplication: any DeduplicationStore
    let logger: Logger
    /// `logger.logLevel <= .trace`, read once (the getter copied the log handler, per push).
    let logsTrace: Bool
    let metrics: RouterMetrics
    /// The spans of delivery (nil: none): see `init`'s `tracer`.
    public let tracer: (any Tracer)?
    /// How Norq's spans get their attributes with ``tracer`` (a list to Norq's OTLP tracer, `SpanAttributes` to
    /// others), decided once; nil when the router does not trace.
    let spanRecorder: SpanAttributeRecorder?
    let clock: RouterClock
    let onInvalidToken: (@Sendable (InvalidTokenEvent) -> Void)?
    let invalidTokenContinuation: AsyncStream<InvalidTokenEvent>.Continuation
    let lifecycle = Mutex(Lifecycle())
    /// Latched when, shutdown begun, the last send in flight ends: what `shutdown()` waits for.
    let drained = WakeSignal()
    /// Latched when `shutdown()` has finished: what a second caller of it waits for.
    let shutDown = WakeSignal()

    struct Lifecycle {
        /// False once shutdown began: new sends throw `provider/shut-down`.
        var accepting = true
        /// True once the grace period ended: tokens not yet started fail with `provider/shut-down`.
        var stopped = false
        var activeSends = 0
        var shutdownStarted = false
        var shutdownFinished = false
    }

    /// A router built in code from live provider instances.
    ///
    /// - Parameters:
    ///   - providers: provider instances; names must be unique.
    ///   - defaultProvider: `routing["push"]`.
    ///   - byPlatform: `routing["push.<platform>"]`; each must name a provider serving that platform.
    ///   - templates: where `send(template:...)` renders from (nil: only `send(content:...)`).
    ///   - deduplication: the dedup store (default: in memory, 24 h, bounded).
    ///   - onInvalidToken: called for every invalid-token event (also on `invalidTokens`), on the thread that
    ///     received the answer (an event loop for APNs): it must not block.
    ///   - metricsFactory: swift-metrics factory (nil: the bootstrapped `MetricsSystem.factory`).
    ///   - clock: time, sleeps and jitter (tests inject short ones).
    ///   - logger: the router's logger (`norq.router`); it never logs a secret or a whole token.
    ///   - shutdownGracePeriod: how long `shutdown()` lets sends in flight finish before their unstarted tokens fail.
    ///   - tracer: makes the spans of delivery (`norq.enqueue`, `norq.claim`, `norq.attempt`; docs/server.md,
    ///     "Tracing"), children of the caller's `InstrumentationContext.current`. Nil (the default): no spans.
    public init(providers: [any PushProvider], defaultProvider: String? = nil, byPlatform: [Platform: String] = [:],
                templates: (any TemplateSource)? = nil,
                deduplication: any DeduplicationStore = InMemoryDeduplicationStore(),
                logger: Logger = Logger(label: "norq.router"), metricsFactory: (any MetricsFactory)? = nil,
                clock: RouterClock = .continuous, shutdownGracePeriod: Duration = .seconds(30),
                onInvalidToken: (@Sendable (InvalidTokenEvent) -> Void)? = nil,
                tracer: (any Tracer)? = nil) throws(NorqError) {
        self.tracer = tracer
        self.spanRecorder = tracer.map(SpanAttributeRecorder.init(tracer:))
        var byName: [String: any PushProvider] = [:]
        var names: [String] = []
        for provider in providers {
            guard byName[provider.name] == nil else {
                throw NorqError(.duplicateProvider, "two providers are named \"\(provider.name)\"")
            }
            byName[provider.name] = provider
            names.append(provider.name)
        }
        if let defaultProvider, byName[defaultProvider] == nil {
            throw NorqError(.unknownProvider, "routing push names unknown provider \"\(defaultProvider)\"",
                            hint: Self.knownList(names))
        }
        for (platform, name) in byPlatform.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            guard let provider = byName[name] else {
                throw NorqError(.unknownProvider, "routing push.\(platform) names unknown provider \"\(name)\"",
                                hint: Self.knownList(names))
            }
            guard provider.platforms.contains(platform) else {
                throw NorqError(.platformNotSupported,
                                "routing push.\(platform) names provider \"\(name)\", which does not serve \(platform)")
            }
        }
        self.providers = byName
        self.providerNames = names
        self.defaultProvider = defaultProvider
        self.byPlatform = byPlatform
        var platforms = Set(byPlatform.keys)
        for provider in providers { platforms.formUnion(provider.platforms) }
        var implicitRoutes: [(platform: Platform, route: RouteDecision)] = []
        for platform in platforms {
            implicitRoutes.append((platform, Self.implicitRoute(for: platform, providers: byName, providerNames: names,
                                                                defaultProvider: defaultProvider, byPlatform: byPlatform)))
        }
        self.implicitRoutes = implicitRoutes
        self.templates = templates
        self.deduplication = deduplication
        self.logger = logger
        self.logsTrace = logger.logLevel <= .trace
        self.metrics = RouterMetrics(factory: metricsFactory, providers: names,
                                     reasons: providers.reduce(into: Set<String>()) { $0.formUnion($1.knownReasons) })
        self.clock = clock
        self.shutdownGracePeriod = shutdownGracePeriod
        self.onInvalidToken = onInvalidToken
        let (events, continuation) = AsyncStream.makeStream(of: InvalidTokenEvent.self,
                                                            bufferingPolicy: .bufferingNewest(10_000))
        self.invalidTokens = events
        self.invalidTokenContinuation = continuation
    }

    static func knownList(_ names: [String]) -> String {
        names.isEmpty ? "no providers are configured" : "known providers: " + names.joined(separator: ", ")
    }

    func publish(_ event: InvalidTokenEvent) {
        invalidTokenContinuation.yield(event)
        onInvalidToken?(event)
    }
}
