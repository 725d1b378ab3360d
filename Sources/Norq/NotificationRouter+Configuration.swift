public import Tracing
public import Logging
public import Metrics
public import NorqConfig
public import NorqCore

extension NotificationRouter {
    /// A router from a loaded `norq.yaml`: every provider instance is created through its type in
    /// `registry` (so a third-party package can add a type), with the instance's `retry:` and
    /// `maxInFlight`; several instances of one type work side by side. Routing comes from `routing:`.
    ///
    /// - Parameters:
    ///   - configuration: the loaded `norq.yaml` (providers, routing, templates folder).
    ///   - registry: the provider types instances are made through (`ProviderTypeRegistry.builtIn()` and yours).
    ///   - templates: where `send(template:...)` renders from; pass a `TemplateLibrary` of
    ///     `configuration.templatesDirectory` (the `TemplateLibrary+TemplateSource` conformance).
    ///   - deferProviderErrors: false (the default) throws the error of an instance that cannot be made (a
    ///     certificate key that cannot be read); true puts an ``UnavailableProvider`` in its place, so that only the
    ///     tokens routed to it fail (with that error, naming the instance and its config place) and sends to the
    ///     other providers go on: what `norq send` and `norq render --to` do.
    ///   - deduplication: the dedup store (default: in memory, 24 h, bounded).
    ///   - logger: the router's logger (`norq.router`).
    ///   - metricsFactory: swift-metrics factory (nil: the bootstrapped `MetricsSystem.factory`).
    ///   - clock: time, sleeps and jitter (tests inject short ones).
    ///   - shutdownGracePeriod: how long `shutdown()` lets sends in flight finish.
    ///   - onInvalidToken: called for every invalid-token event, on the thread that received the answer.
    ///   - tracer: makes the spans of delivery (nil, the default: none); see `init(providers:...)`.
    /// - Throws: `config/unknown-provider-type` for an instance whose type is not registered, the provider
    ///   type's own errors, and the routing validation errors of `init(providers:...)`.
    public convenience init(configuration: NorqConfiguration, registry: ProviderTypeRegistry,
                            templates: (any TemplateSource)? = nil, deferProviderErrors: Bool = false,
                            deduplication: any DeduplicationStore = InMemoryDeduplicationStore(),
                            logger: Logger = Logger(label: "norq.router"),
                            metricsFactory: (any MetricsFactory)? = nil, clock: RouterClock = .continuous,
                            shutdownGracePeriod: Duration = .seconds(30),
                            onInvalidToken: (@Sendable (InvalidTokenEvent) -> Void)? = nil,
                            tracer: (any Tracer)? = nil) throws(NorqError) {
        var providers: [any PushProvider] = []
        for instance in configuration.providers {
            guard let type = registry.type(named: instance.typeName) else {
                throw NorqError(.configUnknownProviderType,
                                "provider \"\(instance.name)\" has type \"\(instance.typeName)\", which is not registered",
                                hint: "registered types: " + registry.typeNames.joined(separator: ", "))
            }
            let policy = DeliveryPolicy(retry: instance.retry, maxInFlight: instance.maxInFlight)
            var providerLogger = logger
            providerLogger[metadataKey: "norq.provider"] = "\(instance.name)"
            do throws(NorqError) {
                providers.append(try type.makeProvider(name: instance.name, configuration: instance.configuration,
                                                       policy: policy, context: ProviderContext(logger: providerLogger)))
            } catch {
                // Either way the error names the instance, its type and its place in the config file.
                let finding = LintProviders.failure(error, instance: instance)
                var named = error
                named.message = finding.message
                named.location = finding.location
                guard deferProviderErrors else { throw named }
                providers.append(UnavailableProvider(name: instance.name, typeName: instance.typeName,
                                                     platforms: type.platforms, error: named, policy: policy))
            }
        }
        try self.init(providers: providers, defaultProvider: configuration.routing.defaultProvider,
                      byPlatform: configuration.routing.byPlatform, templates: templates,
                      deduplication: deduplication, logger: logger, metricsFactory: metricsFactory, clock: clock,
                      shutdownGracePeriod: shutdownGracePeriod, onInvalidToken: onInvalidToken, tracer: tracer)
    }

    /// A router built in code with a `RoutingTable`.
    public convenience init(providers: [any PushProvider], routing: RoutingTable,
                            templates: (any TemplateSource)? = nil,
                            deduplication: any DeduplicationStore = InMemoryDeduplicationStore(),
                            logger: Logger = Logger(label: "norq.router"),
                            metricsFactory: (any MetricsFactory)? = nil, clock: RouterClock = .continuous,
                            shutdownGracePeriod: Duration = .seconds(30),
                            onInvalidToken: (@Sendable (InvalidTokenEvent) -> Void)? = nil,
                            tracer: (any Tracer)? = nil) throws(NorqError) {
        try self.init(providers: providers, defaultProvider: routing.defaultProvider, byPlatform: routing.byPlatform,
                      templates: templates, deduplication: deduplication, logger: logger,
                      metricsFactory: metricsFactory, clock: clock, shutdownGracePeriod: shutdownGracePeriod,
                      onInvalidToken: onInvalidToken, tracer: tracer)
    }
}
