public import Norq
public import NorqConfig
public import NorqTemplates
public import ServiceLifecycle
import Logging
import Metrics
import NIOSSL

extension NorqServer {
    /// What a reload read: the `server:` block (after the same `--host`/`--port` overrides as at start), the
    /// templates and the whole configuration (providers, routing, store).
    public struct Reloaded: Sendable {
        public var settings: ServerConfiguration
        public var templates: TemplateLibrary
        public var configuration: NorqConfiguration

        public init(settings: ServerConfiguration, templates: TemplateLibrary, configuration: NorqConfiguration) {
            self.settings = settings
            self.templates = templates
            self.configuration = configuration
        }
    }

    /// Reads the configuration and templates again and swaps them in (SIGHUP). All or nothing: a bad
    /// configuration, one that would be insecure, a certificate that does not load (`server/invalid-tls`) or a
    /// provider that cannot be built (a missing or malformed key, an unknown provider in `routing:`) keeps the
    /// current configuration, and the log says why.
    ///
    /// What is applied: API keys and their scopes, limits, templates, the TLS certificate (new connections get it,
    /// open ones keep theirs) and, with a `routerFactory`, providers and routing. Providers are built anew from
    /// the files (a rotated `.p8` key or service account is read again): sends enqueued and attempts started from
    /// then on use the new providers, attempts already in flight finish on the old ones, which are shut down once
    /// those have ended. Rows queued for a provider that the new configuration no longer has end as failed
    /// (`routing/unknown-provider`), as they would on an instance started with it. The listen address, the
    /// connection timeouts and the store take effect at the next start (the log line says which changed).
    public func reload() async {
        guard let reloader else { return }
        let reloaded: Reloaded
        let router: NotificationRouter?
        var newTLS: (context: NIOSSLContext, certificatePath: String)?
        var settings: ServerConfiguration
        var nextStartOnly: [String] = []
        do {
            reloaded = try await reloader()
            settings = reloaded.settings
            try Self.checkSecurity(settings, noAuth: allowAnonymous)
            let current = live.withLock { $0 }
            if settings.host != listenHost || (settings.port != listenPort && settings.port != 0) {
                nextStartOnly.append("server.host/port")
            }
            if settings.limits.bodyTimeout != current.settings.limits.bodyTimeout
                || settings.limits.idleTimeout != current.settings.limits.idleTimeout {
                nextStartOnly.append("connection timeouts")
            }
            if reloaded.configuration.store != current.configuration.store {
                nextStartOnly.append("store")
            }
            let tlsHolder = listenerTLS.withLock { $0 }
            switch (tlsHolder, settings.tls) {
            case (_?, let tls?):
                newTLS = (try Self.makeTLSContext(tls), tls.certificatePath)
            case (_?, nil):
                logger.notice("server.tls was removed: HTTPS goes on with the current certificate until the next start")
                settings.tls = current.settings.tls
            case (nil, _?):
                nextStartOnly.append("server.tls")
                settings.tls = nil
            case (nil, nil):
                break
            }
            settings.host = listenHost
            settings.port = listenPort
            // Last, since it opens nothing yet but must not be thrown away: every check before it has passed.
            router = try routerFactory?(reloaded.configuration)
        } catch {
            Counter(label: "norq_server_reloads_total", dimensions: [("result", "failed")]).increment()
            logger.error("reload failed; keeping the current configuration",
                         metadata: ["norq.error": "\(error.code)", "norq.reason": "\(error.message)"])
            return
        }
        if routerFactory == nil { nextStartOnly.append("providers") }
        let applied = settings
        live.withLock { live in
            let rateChanged = live.settings.limits.ratePerSecond != applied.limits.ratePerSecond
                || live.settings.limits.burst != applied.limits.burst
            live = Live(settings: applied, keys: APIKeyTable(applied.apiKeys),
                        rateLimiter: rateChanged
                            ? RateLimiter(ratePerSecond: applied.limits.ratePerSecond, burst: applied.limits.burst)
                            : live.rateLimiter,
                        configuration: reloaded.configuration)
        }
        dependencies.templates?.replace(with: reloaded.templates)
        if let newTLS, let holder = listenerTLS.withLock({ $0 }) {
            holder.replace(with: newTLS.context)
            logger.notice("TLS certificate reloaded for new connections", metadata: ["norq.tls.cert": "\(newTLS.certificatePath)"])
        }
        let retired = router.map { dependencies.delivery.replaceRouter(with: $0) }
        Counter(label: "norq_server_reloads_total", dimensions: [("result", "applied")]).increment()
        logger.notice("configuration reloaded", metadata: [
            "norq.api-keys": "\(applied.apiKeys.count)",
            "norq.templates": "\(reloaded.templates.templateNames.count)",
            "norq.providers": "\(router.map { $0.providerNames.joined(separator: ",") } ?? "unchanged")",
            "norq.next-start-only": "\(nextStartOnly.isEmpty ? "none" : nextStartOnly.joined(separator: ", "))",
        ])
        if let retired {
            // Not cut short by the server stopping meanwhile: the old providers' attempts in flight still finish.
            await Self.retire(retired)
            logger.notice("previous providers shut down", metadata: ["norq.providers": "\(retired.providerNames.joined(separator: ","))"])
        }
    }

    /// Shuts a replaced router down (it waits for its attempts in flight, up to its grace period), shielded from
    /// the cancellation of the signal loop that runs reloads, which ends when the listener stops.
    static func retire(_ router: NotificationRouter) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Task.detached {
                await router.shutdown()
                done.resume()
            }
        }
    }
}

/// Runs the router of a `DurableDelivery` as a `Service`: at graceful shutdown it shuts down the router current
/// at that time (the one the last reload installed), as `NotificationRouter.run()` does for itself. Put it where
/// the router would be in the `ServiceGroup`: before the worker and the server.
public struct DeliveryRouterService: Service {
    public let delivery: DurableDelivery

    public init(delivery: DurableDelivery) {
        self.delivery = delivery
    }

    public func run() async throws {
        do {
            try await gracefulShutdown()
        } catch {
            await delivery.router.shutdown(gracePeriod: .zero)
            return
        }
        await delivery.router.shutdown()
    }
}
