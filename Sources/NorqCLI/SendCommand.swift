import ArgumentParser
import Foundation
import Logging
import Norq
import NorqConfig
import NorqCore
import NorqTemplates
import NorqLocalEmulators

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `norq send`: a real send through the router over HTTP/2.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send a template to recipients through the configured providers (or the built-in APNs and FCM emulators).",
        discussion: """
            Prints one line per token (delivered with its message id: apns-id, fcm-message; rejected with the reason, failed or skipped \
            with why) and a summary. With --emulator, the APNs emulator (for APNs providers) and the FCM \
            emulator (for FCM providers) run in-process on 127.0.0.1, accept the configuration's own keys and \
            service accounts, and every APNs and FCM provider is pointed at them: a real HTTP/2 + TLS send that \
            reaches no Apple or Google server. A progress line is shown on a terminal for more than 100 tokens.

            Idempotency: --idempotency-key K fixes each token's apns-id and deduplicates repeats of K within \
            this one process. Across runs it protects only with a durable store (--store, or store: in the \
            config): a repeat gets the original send and its outcomes. Without one, two runs with the same key \
            both send.

            Examples:
              norq send order-shipped -c examples/quickstart/norq.yaml \\
                  --sample default --to examples/quickstart/recipients.json --emulator
              norq send order-shipped --data order.json --to recipients.json \\
                  --idempotency-key order-A-1-shipped --json

            \(ExitCodes.help)
            """
    )

    @Argument(help: "Template id: a folder of the templates directory (`order-shipped`), or a Norq id (`transactional/orders/order-shipped`).")
    var template: String

    @OptionGroup var configOptions: ConfigOptions
    @OptionGroup var dataOptions: DataOptions

    @Option(name: .long, help: ArgumentHelp("Recipients: a JSON file path or inline JSON (recipient objects, or a list of token objects).", valueName: "FILE|JSON"))
    var to: String?

    @OptionGroup var tuning: SendTuningOptions

    @Flag(name: .long, help: "Start the APNs, FCM and Expo emulators in-process (for the configured APNs, FCM and Expo providers) and send to them instead of Apple and Google.")
    var emulator = false

    @Option(name: .long, help: ArgumentHelp("Bound on all attempts of one token, in seconds.", valueName: "SECONDS"))
    var deadline: Int = 30

    @Flag(name: .long, help: "Print one JSON document (outcomes and summary) instead of lines.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("Wait up to SECONDS for the receipts of accepted outcomes (Expo) and report them (with --store: the worker fetches them after the provider's receiptDelay).", valueName: "SECONDS"))
    var waitReceipts: Int?

    @Flag(name: .long, help: "Log the router's and providers' debug messages on stderr.")
    var verbose = false

    @Option(name: .long, help: ArgumentHelp("Enqueue in a durable store (a SQLite file or a postgres:// URL; default: store: of the config) and wait for the outcomes.", valueName: "PATH|URL"))
    var store: String?

    func run() async throws {
        do {
            let code = try await send()
            if code != 0 { throw ExitCode(code) }
        } catch let error as NorqError {
            if json { Console.out(JSONValue.object(["error": Console.json(error)]).prettyPrinted() + "\n") }
            throw Console.fail(error)
        }
    }

    func send() async throws(NorqError) -> Int32 {
        guard let to else {
            throw NorqError(.cliMissingRecipients, "norq send needs --to FILE|JSON (the recipients)")
        }
        var configuration = try configOptions.loadConfiguration()
        let library = try configOptions.library(configuration)
        let compiled = try library.template(named: template)
        let data = try dataOptions.resolve(for: compiled)
        try tuning.checkWarnings(compiled, data: data)
        let recipients = try JSONInput.recipients(to)
        var options = try tuning.routerOptions()
        options.deadline = .seconds(max(1, deadline))

        var running: LocalEmulators?
        if emulator {
            let started = try await LocalEmulators.start(for: configuration, recipients: recipients)
            configuration = started.configuration
            running = started
            if !json {
                for line in started.descriptions { Console.out(Style.stdout.dim(line) + "\n") }
            }
        }
        var logger = Logger(label: "norq")
        logger.logLevel = verbose ? .debug : .warning
        if let durable = try DurableCLI.storeConfiguration(option: store, configuration: configuration) {
            let result: Result<Int32, NorqError>
            do throws(NorqError) {
                result = .success(try await sendDurably(store: durable, configuration: configuration, library: library,
                                                        data: data, recipients: recipients, options: options,
                                                        logger: logger))
            } catch {
                result = .failure(error)
            }
            if let running { await running.shutdown() }
            return try result.get()
        }
                let router = try NotificationRouter(configuration: configuration,
                                            registry: ConfigOptions.registry(consoleToStandardError: json),
                                            templates: library, deferProviderErrors: true, logger: logger)
        let started = ContinuousClock.now
        let total = recipients.reduce(0) { $0 + $1.tokens.count + $1.channels.count }
        let progress = total > 100 && isatty(2) == 1
        var outcomes: [PushOutcome] = []
        outcomes.reserveCapacity(total)
        let stream = try router.sendStreaming(template: template, data: data, to: recipients, options: options)
        let style = Style.stdout
        // Each provider names its own message id (apns-id, fcm-message, ...).
        let idNames = router.providers.mapValues(\.messageIDName)
        for await outcome in stream {
            outcomes.append(outcome)
            if !json {
                if progress { Console.err("\r\u{1B}[K") }
                Console.out(Self.line(outcome, style: style, idNames: idNames) + "\n")
                if progress { Console.err("sending: \(outcomes.count)/\(total)") }
            }
        }
        if progress { Console.err("\r\u{1B}[K") }
        var report = SendReport(outcomes: outcomes)
        if let waitReceipts, report.accepted > 0 {
            if !json { Console.out(style.dim("waiting up to \(waitReceipts)s for \(report.accepted) receipts") + "\n") }
            let before = report
            report = await router.waitForReceipts(report, timeout: .seconds(max(1, waitReceipts)))
            if !json {
                for (old, outcome) in zip(before.outcomes, report.outcomes)
                where old.result.kind == "accepted" && outcome.result.kind != "accepted" {
                    Console.out("receipt: " + Self.line(outcome, style: style, idNames: idNames) + "\n")
                }
            }
        }
        let elapsed = ContinuousClock.now - started
        await router.shutdown(gracePeriod: .seconds(5))
        if let running { await running.shutdown() }

        if json {
            Console.out(Self.json(report, elapsed: elapsed).prettyPrinted() + "\n")
        } else {
            Console.out(Self.summary(report, elapsed: elapsed, style: style) + "\n")
        }
        return report.allDelivered ? 0 : 2
    }

    /// The name of the provider's message id on this outcome's line (the provider's own, `apns-id`,
    /// `fcm-message`, ...); an APNs broadcast answer's id is its `apns-request-id`.
    static func messageIDName(_ outcome: PushOutcome, idNames: [String: String]) -> String {
        let name = outcome.provider.flatMap { idNames[$0] } ?? "message-id"
        if case .channel = outcome.target, name == "apns-id" { return "apns-request-id" }
        return name
    }

    static func line(_ outcome: PushOutcome, style: Style, idNames: [String: String] = [:]) -> String {
        let who = DryRunFormatter.label(outcome.target) + (outcome.recipientID.map { " (\($0))" } ?? "")
        let provider = outcome.provider.map { " via \($0)" } ?? ""
        let attempts = outcome.attempts > 1 ? " after \(outcome.attempts) attempts" : ""
        let idName = messageIDName(outcome, idNames: idNames)
        switch outcome.result {
        case .delivered(let delivered):
            let unique = delivered.uniqueID.map { "  apns-unique-id \($0)" } ?? ""
            return style.green(delivered.accepted ? "accepted " : "delivered") + "  \(who)\(provider)  \(idName) \(delivered.messageID ?? "-")\(unique)\(attempts)"
        case .rejected(let rejected):
            let since = rejected.invalidSince.map { "  invalid since \(DryRunJSON.isoDate(milliseconds: $0)) (\($0))" } ?? ""
            let id = rejected.messageID.map { "  \(idName) \($0)" } ?? ""
            return style.red("rejected ") + "  \(who)\(provider)  \(rejected.status) \(rejected.reason ?? "") error[\(rejected.code.rawValue)] (\(rejected.classification))\(since)\(id)\(attempts)"
        case .failed(let error):
            let maybe = error.possiblyProcessed ? style.yellow("  (may have been delivered)") : ""
            return style.red("failed   ") + "  \(who)\(provider)  error[\(error.code.rawValue)]: \(error.message)\(attempts)\(maybe)"
        case .skipped(let skipped):
            return style.yellow("skipped  ") + "  \(who)\(provider)  [\(skipped.code.rawValue)] \(skipped.reason)"
        case .duplicate(let first):
            return style.dim("duplicate") + "  \(who)\(provider)  already sent with this idempotency key: \(first.kind)"
        }
    }

    static func seconds(_ duration: Duration) -> String {
        let millis = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        return String(format: "%.2f s", Double(millis) / 1000)
    }

    /// `3 tokens`, `2 channels`, `3 tokens and 1 channel`: broadcast channels are counted as channels.
    static func targets(_ report: SendReport) -> String {
        let channels = report.outcomes.count { if case .channel = $0.target { true } else { false } }
        let tokens = report.outcomes.count - channels
        func plural(_ n: Int, _ word: String) -> String { "\(n) \(word)\(n == 1 ? "" : "s")" }
        if channels == 0 { return plural(tokens, "token") }
        if tokens == 0 { return plural(channels, "channel") }
        return plural(tokens, "token") + " and " + plural(channels, "channel")
    }

    static func summary(_ report: SendReport, elapsed: Duration, style: Style) -> String {
        let maybeDelivered = report.mayHaveBeenDelivered > 0 ? " (\(report.mayHaveBeenDelivered) may have been delivered)" : ""
        // `accepted`: the service took them, their receipts are still to come (Expo; see --wait-receipts).
        let accepted = report.accepted > 0 ? "\(report.accepted) accepted, " : ""
        let text = "\(targets(report)): \(report.delivered) delivered, \(accepted)\(report.rejected) rejected, "
            + "\(report.failed) failed\(maybeDelivered), \(report.skipped) skipped, \(report.duplicates) duplicates in \(seconds(elapsed))"
        return style.bold(report.allDelivered ? "ok: " : "not all delivered: ") + text
    }

    static func json(_ report: SendReport, elapsed: Duration) -> JSONValue {
        let outcomes = report.outcomes.map { DryRunJSON.outcomeEntryJSON($0, redactTokens: false) }
        return [
            "outcomes": .array(outcomes),
            "summary": [
                "tokens": .int(Int64(report.outcomes.count { if case .token = $0.target { true } else { false } })),
                "channels": .int(Int64(report.outcomes.count { if case .channel = $0.target { true } else { false } })),
                "delivered": .int(Int64(report.delivered)),
                "accepted": .int(Int64(report.accepted)),
                "rejected": .int(Int64(report.rejected)),
                "failed": .int(Int64(report.failed)),
                "mayHaveBeenDelivered": .int(Int64(report.mayHaveBeenDelivered)),
                "skipped": .int(Int64(report.skipped)),
                "duplicates": .int(Int64(report.duplicates)),
                "allDelivered": .bool(report.allDelivered),
                "seconds": .double(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18),
            ],
        ]
    }
}
