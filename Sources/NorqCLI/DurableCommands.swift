import ArgumentParser
import Foundation
import Logging
import Norq
import NorqConfig
import NorqCore
import NorqStore
import NorqStorePostgres
import NorqStoreSQLite
import NorqTemplates
import ServiceLifecycle
import UnixSignals

/// Opening the durable store of a configuration (or of `--store`) for the CLI commands.
enum DurableCLI {
    /// `--store` (a SQLite path, or a `postgres://` URL), else the configuration's `store:`; nil when neither.
    static func storeConfiguration(option: String?, configuration: NorqConfiguration?) throws(NorqError) -> StoreConfiguration? {
        let settings = configuration?.store?.settings ?? DeliveryStoreSettings()
        if let option {
            if option.hasPrefix("postgres://") || option.hasPrefix("postgresql://") {
                return StoreConfiguration(backend: .postgres(try PostgresStoreConfiguration(url: option)), settings: settings)
            }
            return StoreConfiguration(backend: .sqlite(path: option), settings: settings)
        }
        return configuration?.store
    }

    /// The store, migrated (safe when several instances start at once), for the duration of `body`; a
    /// PostgreSQL store's pool runs meanwhile.
    static func withStore<T: Sendable>(_ configuration: StoreConfiguration, logger: Logger,
                                       _ body: @escaping @Sendable (any DeliveryStore, PostgresDeliveryStore?) async throws -> T)
        async throws -> T {
        switch configuration.backend {
        case .sqlite(let path):
            return try await SQLiteDeliveryStore.withMigrated(path: path, settings: configuration.settings,
                                                              logger: logger) { try await body($0, nil) }
        case .postgres(let connection):
            let store = PostgresDeliveryStore(configuration: connection, settings: configuration.settings, logger: logger)
            return try await store.withMigrated { try await body($0, $0) }
        }
    }

    static func requireStore(_ option: String?, _ configuration: NorqConfiguration?) throws(NorqError) -> StoreConfiguration {
        guard let store = try storeConfiguration(option: option, configuration: configuration) else {
            throw NorqError(.configInvalidStore, "no durable store: add store: { sqlite: ./norq.db } to norq.yaml, or pass --store",
                            at: configuration?.file.map { SourceLocation(file: $0) })
        }
        return store
    }

    static func logger(verbose: Bool) -> Logger {
        var logger = Logger(label: "norq")
        logger.logLevel = verbose ? .debug : .warning
        return logger
    }
}

extension SendCommand {
    /// The send's report once the receipts of its accepted outcomes are in, or after `seconds` (those still
    /// without a receipt stay `accepted`).
    static func receipts(of sendID: String, in durable: DurableDelivery, within seconds: Int) async throws -> SendReport {
        do {
            return try await durable.wait(for: sendID, timeout: .seconds(max(1, seconds)), receipts: true)
        } catch where error.code == .storeDeadlineExceeded {
            return try await durable.status(of: sendID).report
        }
    }

    /// `norq send` with a store: enqueue (idempotency checked in the store), deliver with a worker in this process
    /// (workers elsewhere may take rows too), wait for every outcome, print today's lines in target order.
    func sendDurably(store storeConfiguration: StoreConfiguration, configuration: NorqConfiguration,
                     library: TemplateLibrary, data: JSONValue, recipients: [Recipient],
                     options: RouterSendOptions, logger: Logger) async throws(NorqError) -> Int32 {
        let template = self.template
        let json = self.json
        let started = ContinuousClock.now
        do {
            let router = try NotificationRouter(configuration: configuration, registry: ConfigOptions.registry,
                                                templates: library, deferProviderErrors: true, logger: logger)
            let waitLimit = Duration.seconds(max(60, 4 * deadline))
            let (receipt, report) = try await DurableCLI.withStore(storeConfiguration, logger: logger) { store, postgres in
                let durable = DurableDelivery(router: router, store: store, settings: storeConfiguration.settings,
                                              logger: logger)
                let worker = DurableWorker(delivery: durable, lanes: 1, hints: postgres?.hints)
                let receipt = try await durable.enqueue(template: template, data: data, to: recipients, options: options)
                if !json {
                    let what = receipt.created ? "enqueued as send" : "idempotency key repeated: original send"
                    Console.out(Style.stdout.dim("\(what) \(receipt.sendID) (\(receipt.targetCount) targets)") + "\n")
                }
                let report = try await withThrowingTaskGroup(of: SendReport?.self) { group in
                    group.addTask {
                        try await worker.run()
                        return nil
                    }
                    defer { worker.stop() }
                    var report = try await durable.wait(for: receipt.sendID, timeout: waitLimit)
                    if let waitReceipts, report.accepted > 0 {
                        // The worker fetches the receipts after the provider's `receiptDelay`; a receipt not there
                        // within --wait-receipts leaves its outcome `accepted` (workers elsewhere fetch it later).
                        if !json {
                            Console.out(Style.stdout.dim("waiting up to \(waitReceipts)s for \(report.accepted) receipts") + "\n")
                        }
                        report = try await Self.receipts(of: receipt.sendID, in: durable, within: waitReceipts)
                    }
                    worker.stop()
                    try await group.waitForAll()
                    return report
                }
                return (receipt, report)
            }
            await router.shutdown(gracePeriod: .seconds(5))
            let elapsed = ContinuousClock.now - started
            if json {
                var document = Self.json(report, elapsed: elapsed)
                if case .object(var object) = document {
                    object["sendId"] = .string(receipt.sendID)
                    document = .object(object)
                }
                Console.out(document.prettyPrinted() + "\n")
            } else {
                let idNames = router.providers.mapValues(\.messageIDName)
                for outcome in report.outcomes { Console.out(Self.line(outcome, style: Style.stdout, idNames: idNames) + "\n") }
                Console.out(Self.summary(report, elapsed: elapsed, style: Style.stdout) + "\n")
            }
            return report.allDelivered ? 0 : 2
        } catch let error as NorqError {
            throw error
        } catch {
            throw NorqError(.storeFailed, "\(error)")
        }
    }
}

/// `norq worker`: delivers the durable outbox until SIGTERM or SIGINT.
struct WorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "Deliver the durable outbox (store: in norq.yaml) until SIGTERM or SIGINT.",
        discussion: """
            Claims due rows in batches under a lease, sends them through the configured providers and records \
            each outcome with a compare-and-set on its lease. Several workers (processes or machines) may share one \
            PostgreSQL database. On SIGTERM or SIGINT the worker stops claiming, lets the requests in flight finish, \
            records them and gives back rows it had not started.

            Examples:
              norq worker -c norq.yaml
              norq worker --store postgres://norq@db:5432/norq --lanes 4

            \(ExitCodes.help)
            """
    )

    @OptionGroup var configOptions: ConfigOptions

    @Option(name: .long, help: ArgumentHelp("A SQLite file or a postgres:// URL (default: store: of the config).", valueName: "PATH|URL"))
    var store: String?

    @Option(name: .long, help: "Batches in flight at once.")
    var lanes: Int = 2

    @Option(name: .long, help: "The lease owner name written into claimed rows (default: worker-<random>).")
    var name: String?

    @Flag(name: .long, help: "Log debug messages on stderr.")
    var verbose = false

    func run() async throws {
        do {
            try await work()
        } catch {
            throw Console.fail(error)
        }
    }

    func work() async throws(NorqError) {
        let configuration = try configOptions.loadConfiguration()
        let storeConfiguration = try DurableCLI.requireStore(store, configuration)
        let logger = DurableCLI.logger(verbose: verbose)
        let library = try? TemplateLibrary(directory: configOptions.templatesDirectory(configuration),
                                           rules: ConfigOptions.templateRules(configuration))
        let router = try NotificationRouter(configuration: configuration, registry: ConfigOptions.registry,
                                            templates: library, logger: logger)
        let lanes = max(1, self.lanes)
        let name = self.name
        do {
            try await DurableCLI.withStore(storeConfiguration, logger: logger) { store, postgres in
                let durable = DurableDelivery(router: router, store: store, settings: storeConfiguration.settings,
                                              logger: logger)
                let worker = DurableWorker(delivery: durable, name: name, lanes: lanes, hints: postgres?.hints)
                Console.err("norq worker \(worker.name): delivering from \(storeConfiguration) (SIGTERM or SIGINT stops)\n")
                // The worker stops first (it finishes or gives back its rows), then the router drains its providers.
                let group = ServiceGroup(configuration: .init(
                    services: [.init(service: router), .init(service: worker)],
                    gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
                try await group.run()
                Console.err("norq worker \(worker.name): stopped\n")
            }
        } catch let error as NorqError {
            throw error
        } catch {
            throw NorqError(.storeFailed, "\(error)")
        }
    }
}

/// `norq status SEND_ID`: a send's progress and outcomes; `norq status`: the store's queue depth.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show a durable send's progress and outcomes, or the store's queue depth.",
        discussion: """
            Without a send id: the rows waiting or in flight in the store's outbox (due, scheduled for a retry, \
            leased, lease expired), never the history.

            Examples:
              norq status 2c7e1f0a-…
              norq status 2c7e1f0a-… --json
              norq status 2c7e1f0a-… --offset 1000 --limit 500
              norq status --store ./norq.db

            \(ExitCodes.help)
            """
    )

    @Argument(help: "The send id (printed by norq send with a store); without it, the queue depth.")
    var sendID: String?

    @OptionGroup var configOptions: ConfigOptions

    @Option(name: .long, help: ArgumentHelp("A SQLite file or a postgres:// URL (default: store: of the config).", valueName: "PATH|URL"))
    var store: String?

    @Option(name: .long, help: "The first row shown (a target's position in the send).")
    var offset = 0

    @Option(name: .long, help: "Rows shown at most (0: the counts only).")
    var limit = 100

    @Flag(name: .long, help: "Show every row (read from the store in pages).")
    var all = false

    @Flag(name: .long, help: "Print JSON.")
    var json = false

    func run() async throws {
        do {
            try await show()
        } catch {
            throw Console.fail(error)
        }
    }

    func show() async throws(NorqError) {
        let configuration = try configOptions.loadConfigurationIfPresent()
        let storeConfiguration = try DurableCLI.requireStore(store, configuration)
        let logger = DurableCLI.logger(verbose: false)
        let json = self.json
        guard let sendID = self.sendID else {
            try await showQueueDepth(storeConfiguration, logger: logger)
            return
        }
        // Each row's id under its provider type's name for it (`apns-id`, `fcm-message`, ...).
        var idNames: [String: String] = [:]
        for instance in configuration?.providers ?? [] {
            idNames[instance.name] = ConfigOptions.registry.type(named: instance.typeName)?.messageIDName
        }
        let offset = max(0, self.offset)
        let limit = all ? Int.max : max(0, self.limit)
        let idNameTable = idNames
        do {
            try await DurableCLI.withStore(storeConfiguration, logger: logger) { store, _ in
                guard try await store.send(id: sendID) != nil else {
                    throw NorqError(.storeSendNotFound, "no send with id \(sendID) in \(storeConfiguration)")
                }
                let states = try await store.stateCounts(ofSend: sendID)
                let targets = states.values.reduce(0, +)
                let end = offset + min(limit, max(0, targets - offset))
                let next: Int? = end < targets ? end : nil
                if json {
                    var rows: [JSONValue] = []
                    try await Self.forEachRow(store, sendID, offset..<end) { rows.append(Self.json($0)) }
                    let counts = JSONValue.object(.init(uniqueKeysWithValues: states
                        .sorted { $0.key.rawValue < $1.key.rawValue }
                        .map { ($0.key.rawValue, JSONValue.int(Int64($0.value))) }))
                    Console.out(JSONValue.object([
                        "sendId": .string(sendID), "targets": .int(Int64(targets)), "states": counts,
                        "page": ["offset": .int(Int64(offset)), "next": next.map { .int(Int64($0)) } ?? .null],
                        "rows": .array(rows),
                    ]).prettyPrinted() + "\n")
                    return
                }
                Console.out("send \(sendID): \(targets) targets: "
                            + states.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.value) \($0.key.rawValue)" }
                                .joined(separator: ", ") + "\n")
                try await Self.forEachRow(store, sendID, offset..<end) { row in
                    Console.out(Self.line(row, idName: row.provider.flatMap { idNameTable[$0] } ?? "message-id") + "\n")
                }
                if let next {
                    Console.out("  ... rows \(next)-\(targets - 1) not shown (--offset \(next), --limit N, or --all)\n")
                }
            }
        } catch let error as NorqError {
            throw error
        } catch {
            throw NorqError(.storeFailed, "\(error)")
        }
    }

    /// The rows of `positions`, read in pages of 1,000 (a send of a million targets is never held at once).
    static func forEachRow(_ store: any DeliveryStore, _ sendID: String, _ positions: Range<Int>,
                           _ body: (OutboxRow) throws -> Void) async throws(NorqError) {
        var start = positions.lowerBound
        while start < positions.upperBound {
            let end = start + min(1_000, positions.upperBound - start)
            let rows = try await DurableDelivery.rows(of: sendID, positions: start..<end, in: store)
            for row in rows {
                do { try body(row) } catch { throw NorqError(.storeFailed, "\(error)") }
            }
            start = end
        }
    }

    static func line(_ row: OutboxRow, idName: String) -> String {
        var line = "  \(row.position)  \(PushToken.redact(row.identity))  \(row.state)  attempts \(row.attempts)"
        if let id = row.messageID { line += "  \(idName) \(id)" }
        if let last = row.last {
            if let status = last.status { line += "  \(status)" }
            if let code = last.code { line += " [\(code)]" }
            if let reason = last.reason { line += " \(reason)" }
        }
        if row.mayHaveBeenDelivered { line += "  (may have been delivered more than once)" }
        return line
    }

    /// The hot outbox by group (`DeliveryStore.queueDepth`).
    func showQueueDepth(_ storeConfiguration: StoreConfiguration, logger: Logger) async throws(NorqError) {
        let json = self.json
        do {
            try await DurableCLI.withStore(storeConfiguration, logger: logger) { store, _ in
                let depth = try await store.queueDepth(now: StoreClock.system.nowMillis())
                if json {
                    let queue: JSONValue = [
                        "due": .int(Int64(depth.due)), "scheduled": .int(Int64(depth.scheduled)),
                        "leased": .int(Int64(depth.leased)), "lease-expired": .int(Int64(depth.leaseExpired)),
                        "total": .int(Int64(depth.total)),
                    ]
                    Console.out(JSONValue.object(["queue": queue]).prettyPrinted() + "\n")
                    return
                }
                Console.out("queue: \(depth.total) rows waiting or in flight: "
                            + depth.byLabel.map { "\($0.rows) \($0.label)" }.joined(separator: ", ") + "\n")
            }
        } catch let error as NorqError {
            throw error
        } catch {
            throw NorqError(.storeFailed, "\(error)")
        }
    }

    static func json(_ row: OutboxRow) -> JSONValue { DryRunJSON.rowJSON(row) }
}

/// `norq tokens invalid` / `norq tokens register TOKEN`: the token registry.
struct TokensCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tokens",
        abstract: "The token registry of the durable store: tokens providers reported invalid.",
        subcommands: [Invalid.self, Register.self]
    )

    /// One registry entry as `norq tokens invalid --json` prints it: the whole token, its provider instance and
    /// environment (null: none recorded, the entry applies to every one), the provider's reason and timestamp.
    static func json(_ record: InvalidTokenRecord) -> JSONValue {
        [
            "token": .string(record.token), "provider": .optional(record.provider),
            "environment": .optional(record.environment), "reason": .string(record.reason),
            "invalidSince": .int(record.invalidSince), "recordedAt": .int(record.recordedAt),
            "registeredAt": record.registeredAt.map(JSONValue.int) ?? .null, "skipped": .bool(record.isInvalid),
        ]
    }

    struct Invalid: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "invalid",
            abstract: "List tokens reported invalid (later sends to them are skipped with token/invalid).",
            discussion: """
                The registry is kept per (token, provider instance, environment): a token reported invalid in the \
                sandbox environment is still sent in production. An entry without a provider or environment (-) \
                applies to every one. The text output shortens tokens; --json prints them whole.
                """)

        @OptionGroup var configOptions: ConfigOptions
        @Option(name: .long, help: ArgumentHelp("A SQLite file or a postgres:// URL.", valueName: "PATH|URL"))
        var store: String?
        @Option(name: .long, help: "At most this many, newest first.")
        var limit: Int = 1000
        @Flag(name: .long, help: "Print JSON.")
        var json = false

        func run() async throws {
            do {
                let configuration = try configOptions.loadConfigurationIfPresent()
                let storeConfiguration = try DurableCLI.requireStore(store, configuration)
                let limit = max(1, self.limit)
                let json = self.json
                try await DurableCLI.withStore(storeConfiguration, logger: DurableCLI.logger(verbose: false)) { store, _ in
                    let records = try await store.invalidTokens(limit: limit)
                    if json {
                        Console.out(JSONValue.array(records.map(TokensCommand.json)).prettyPrinted() + "\n")
                        return
                    }
                    for record in records {
                        let state = record.isInvalid ? "invalid" : "registered again"
                        Console.out("\(PushToken.redact(record.token))  \(record.provider ?? "-")  \(record.environment ?? "-")  \(record.reason)  since \(record.invalidSince)  \(state)\n")
                    }
                    Console.out("\(records.count) tokens\n")
                }
            } catch let error as NorqError {
                throw Console.fail(error)
            }
        }
    }

    struct Register: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "register",
            abstract: "Record that tokens were registered again now (later sends reach them).")

        @Argument(help: "The device tokens (one or more).")
        var tokens: [String] = []
        @Option(name: .long, help: ArgumentHelp("Also the tokens in this file, one a line ('-': standard input).",
                                                valueName: "PATH"))
        var file: String?
        @OptionGroup var configOptions: ConfigOptions
        @Option(name: .long, help: ArgumentHelp("A SQLite file or a postgres:// URL.", valueName: "PATH|URL"))
        var store: String?
        @Option(name: .long, help: ArgumentHelp("Only for this provider instance (default: every one).", valueName: "NAME"))
        var provider: String?
        @Option(name: .long, help: ArgumentHelp("Only in this environment: sandbox or production (default: every one).",
                                                valueName: "ENV"))
        var environment: String?

        func run() async throws {
            do {
                let environment = try self.environment.map(PushEnvironment.parse)?.rawValue
                let configuration = try configOptions.loadConfigurationIfPresent()
                let storeConfiguration = try DurableCLI.requireStore(store, configuration)
                let tokens = try self.tokens + readFile()
                guard !tokens.isEmpty else {
                    throw NorqError(.cliMissingRecipients, "norq tokens register needs at least one token (arguments or --file)")
                }
                if let empty = tokens.firstIndex(where: \.isEmpty) {
                    throw NorqError(.emptyToken, "token \(empty + 1) is empty")
                }
                let provider = self.provider
                try await DurableCLI.withStore(storeConfiguration, logger: DurableCLI.logger(verbose: false)) { store, _ in
                    // One store call for the batch (one statement in the SQL stores).
                    try await store.registerTokens(tokens, provider: provider, environment: environment,
                                                   at: StoreClock.system.nowMillis())
                    let scope = [provider.map { "provider \($0)" }, environment].compactMap { $0 }.joined(separator: ", ")
                    let what = tokens.count == 1 ? PushToken.redact(tokens[0]) : "\(tokens.count) tokens"
                    Console.out("registered \(what)\(scope.isEmpty ? "" : " (\(scope))")\n")
                }
            } catch let error as NorqError {
                throw Console.fail(error)
            }
        }

        /// The tokens of `--file`: one a line, blank lines and surrounding spaces ignored.
        func readFile() throws(NorqError) -> [String] {
            guard let file else { return [] }
            let text: String
            if file == "-" {
                var lines: [String] = []
                while let line = readLine(strippingNewline: true) { lines.append(line) }
                text = lines.joined(separator: "\n")
            } else {
                guard let data = FileManager.default.contents(atPath: file) else {
                    throw NorqError(.cliFileNotFound, "cannot read the token file \(file)")
                }
                text = String(decoding: data, as: UTF8.self)
            }
            return text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }
        }
    }
}

/// `norq migrate`: create or upgrade the store's schema.
struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Create or upgrade the durable store's schema (workers and sends also do it at start).")

    @OptionGroup var configOptions: ConfigOptions
    @Option(name: .long, help: ArgumentHelp("A SQLite file or a postgres:// URL.", valueName: "PATH|URL"))
    var store: String?

    func run() async throws {
        do {
            let configuration = try configOptions.loadConfigurationIfPresent()
            let storeConfiguration = try DurableCLI.requireStore(store, configuration)
            try await DurableCLI.withStore(storeConfiguration, logger: DurableCLI.logger(verbose: false)) { _, _ in
                Console.out("schema up to date: \(storeConfiguration)\n")
            }
        } catch let error as NorqError {
            throw Console.fail(error)
        }
    }
}
