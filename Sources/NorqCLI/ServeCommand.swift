import ArgumentParser
import Foundation
import Logging
import Norq
import NorqConfig
import NorqCore
import NorqServer
import NorqTemplates
import NorqLocalEmulators
import ServiceLifecycle
import UnixSignals

/// `norq serve`: the router as an authenticated HTTP API (sends enqueued in the durable store).
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the HTTP API: send, render, validate, status, token registry, health and metrics.",
        discussion: """
            Listens on server.host:server.port of norq.yaml (--host/--port override; port 0 picks a free one) and \
            prints the address. Sends are enqueued in the durable store (store: in norq.yaml, or --store) and \
            delivered by a worker in this process (and by any other on the same database). Every route but \
            /healthz and /readyz needs Authorization: Bearer <key> with a key of server.apiKeys; without keys the \
            server refuses to start unless --no-auth is given and it listens on a loopback address. SIGTERM or \
            SIGINT: stop accepting, finish the requests and attempts in flight, release claimed rows, exit.

            Examples:
              NORQ_API_KEY=$(openssl rand -hex 32) norq serve -c norq.yaml
              norq serve --port 0 --no-auth --emulator --store ./norq.db

            \(ExitCodes.help)
            """
    )

    @OptionGroup var configOptions: ConfigOptions

    @Option(name: .long, help: "Address to listen on (default: server.host, else 127.0.0.1).")
    var host: String?

    @Option(name: .long, help: "Port (default: server.port, else 8080; 0: any free port).")
    var port: Int?

    @Option(name: .long, help: ArgumentHelp("A SQLite file or a postgres:// URL (default: store: of the config).", valueName: "PATH|URL"))
    var store: String?

    @Flag(name: .long, help: "Serve without API keys (only on a loopback address).")
    var noAuth = false

    @Flag(name: .long, help: ArgumentHelp(
        "Start the in-process emulators of the configured providers (APNs, FCM, Web Push) and deliver to them.",
        discussion: "APNs channel management goes to the APNs emulator too; nothing leaves this machine. Each emulator keeps its last 10,000 requests. With --verbose, one line per APNs emulator request."))
    var emulator = false

    @Option(name: .long, help: "Worker batches in flight at once.")
    var lanes: Int = 2

    @Flag(name: .long, help: "Log debug messages (and one access line per request) on stderr.")
    var verbose = false

    func run() async throws {
        do {
            try await serve()
        } catch {
            throw Console.fail(error)
        }
    }

    func serve() async throws(NorqError) {
        var configuration = try configOptions.loadConfiguration()
        var settings = configuration.server ?? ServerConfiguration()
        if let host { settings.host = host }
        if let port {
            guard (0...65535).contains(port) else { throw NorqError(.cliInvalidOption, "--port must be from 0 to 65535") }
            settings.port = port
        }
        try NorqServer.checkSecurity(settings, noAuth: noAuth)
        try NorqServer.checkTLS(settings)
        // `telemetry:` (off by default): refused at load when this build cannot export (`config/otlp-not-built`).
        try ServeTelemetry.check(configuration.telemetry)
        let storeConfiguration = try DurableCLI.requireStore(store, configuration)
        let library = try configOptions.library(configuration)
        var configuredLogger = Logger(label: "norq")
        configuredLogger.logLevel = verbose ? .debug : .notice
        let logger = configuredLogger
        let registry = NorqServer.bootstrapMetrics()

        var running: LocalEmulators?
        if emulator {
            var log: (@Sendable (String) -> Void)?
            if verbose { log = { @Sendable line in Console.err(line + "\n") } }
            let emulators = try await LocalEmulators.startForServing(configuration, requestLog: log)
            configuration = emulators.configuration
            running = emulators
            for line in emulators.descriptions { Console.err(line + "\n") }
        }
        let templates = ReloadableTemplates(library)
        let telemetry = try ServeTelemetry.make(configuration.telemetry, logger: logger)
        let tracer = telemetry?.tracer
        let router = try NotificationRouter(configuration: configuration, registry: ConfigOptions.registry,
                                            templates: templates, logger: logger, tracer: tracer)
        // SIGHUP: the same files again, with the same --host/--port overrides and emulators; a new router from
        // the providers and routing read (the store needs a restart).
        let options = configOptions
        let hostOverride = host, portOverride = port, emulators = running
        let reloader: @Sendable () async throws(NorqError) -> NorqServer.Reloaded = { () throws(NorqError) in
            var configuration = try options.loadConfiguration()
            var settings = configuration.server ?? ServerConfiguration()
            if let hostOverride { settings.host = hostOverride }
            if let portOverride { settings.port = portOverride }
            let library = try options.library(configuration)
            if let emulators { configuration = emulators.pointed(configuration) }
            return NorqServer.Reloaded(settings: settings, templates: library, configuration: configuration)
        }
        let routerFactory: @Sendable (NorqConfiguration) throws(NorqError) -> NotificationRouter = { configuration throws(NorqError) in
            try NotificationRouter(configuration: configuration, registry: ConfigOptions.registry,
                                   templates: templates, logger: logger, tracer: tracer)
        }
        let lanes = max(1, self.lanes)
        let noAuth = self.noAuth
        let loaded = configuration
        let listen = settings
        let result: Result<Void, NorqError>
        do {
            try await DurableCLI.withStore(storeConfiguration, logger: logger) { store, postgres in
                let durable = DurableDelivery(router: router, store: store, settings: storeConfiguration.settings,
                                              logger: logger)
                let worker = DurableWorker(delivery: durable, lanes: lanes, hints: postgres?.hints)
                let server = NorqServer(
                    settings: listen,
                    dependencies: .init(delivery: durable, templates: templates, configuration: loaded, metrics: registry),
                    allowAnonymous: noAuth, logger: logger, reloader: reloader, routerFactory: routerFactory,
                    onListening: { host, port in
                        let shown = host.contains(":") ? "[\(host)]" : host
                        let scheme = listen.tls == nil ? "http" : "https"
                        Console.out("norq serve: listening on \(scheme)://\(shown):\(port) (store \(storeConfiguration))\n")
                    })
                // Graceful shutdown runs in reverse order: the listener stops first (requests in flight finish),
                // then the worker (attempts in flight finish, claimed rows are released), then the router drains.
                // The span exporter first: it stops last, after the spans of the last attempts were made.
                let exporter: [ServiceGroupConfiguration.ServiceConfiguration] = telemetry.map { [.init(service: $0.service)] } ?? []
                let group = ServiceGroup(configuration: .init(
                    services: exporter + [.init(service: DeliveryRouterService(delivery: durable)), .init(service: worker),
                                          .init(service: server)],
                    gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
                try await group.run()
                Console.err("norq serve: stopped\n")
            }
            result = .success(())
        } catch let error as NorqError {
            result = .failure(error)
        } catch {
            result = .failure(NorqError(.serverBindFailed, "the server stopped: \(error)"))
        }
        if let running { await running.shutdown() }
        try result.get()
    }
}
