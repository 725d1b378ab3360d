import ArgumentParser
import Foundation
import Logging
import Norq
import NorqConfig
import NorqCore
import NorqTemplates
import NorqTesting
import NorqAPNs
import NorqWebPush

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
        abstract: "Send a template to recipients through the configured providers (or the built-in APNs emulator).",
        discussion: """
            Prints one line per token (delivered with its apns-id, rejected with the reason, failed or skipped \
            with why) and a summary. With --emulator, the APNs emulator runs in-process on 127.0.0.1, accepts \
            the configuration's own keys, and every APNs provider is pointed at it: a real HTTP/2 + TLS send \
            that reaches no Apple server. A progress line is shown on a terminal for more than 100 tokens.

            Examples:
              norq send order-shipped -c examples/quickstart/norq.yaml \\
                  --sample default --to examples/quickstart/recipients.json --emulator
              norq send order-shipped --data order.json --to recipients.json \\
                  --idempotency-key order-A-1-shipped --json

            \(ExitCodes.help)
            """
    )

    @Argument(help: "Template name (a folder of the templates directory).")
    var template: String

    @OptionGroup var configOptions: ConfigOptions
    @OptionGroup var dataOptions: DataOptions

    @Option(name: .long, help: ArgumentHelp("Recipients: a JSON file path or inline JSON (recipient objects, or a list of token objects).", valueName: "FILE|JSON"))
    var to: String?

    @OptionGroup var tuning: SendTuningOptions

    @Flag(name: .long, help: "Start the APNs emulator in-process and send to it instead of Apple.")
    var emulator = false

    @Option(name: .long, help: ArgumentHelp("Bound on all attempts of one token, in seconds.", valueName: "SECONDS"))
    var deadline: Int = 30

    @Flag(name: .long, help: "Print one JSON document (outcomes and summary) instead of lines.")
    var json = false

    @Flag(name: .long, help: "Log the router's and providers' debug messages on stderr.")
    var verbose = false

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
        let library = try TemplateLibrary(directory: configOptions.templatesDirectory(configuration))
        let compiled = try library.template(named: template)
        let data = try dataOptions.resolve(for: compiled)
        var recipients = try JSONInput.recipients(to)
        var options = try tuning.routerOptions()
        options.deadline = .seconds(max(1, deadline))

        var running: APNsEmulator?
        var runningWeb: WebPushEmulator?
        if emulator {
            let (webRewritten, webRecipients, webStarted) = try await WebPushEmulatorSetup.attach(to: configuration, recipients: recipients)
            configuration = webRewritten
            recipients = webRecipients
            runningWeb = webStarted
            if let webStarted, !json {
                Console.out(Style.stdout.dim("Web Push emulator (in-process) at \(webStarted.origin); it decrypts what it receives") + "\n")
            }
        }
        if emulator, runningWeb == nil || configuration.providers.contains(where: { $0.configuration is APNsConfiguration }) {
            let (rewritten, started) = try await EmulatorSetup.attach(to: configuration)
            configuration = rewritten
            running = started
            if !json {
                Console.out(Style.stdout.dim("APNs emulator (in-process) at https://localhost:\(started.port); nothing leaves this machine") + "\n")
            }
        }
        var logger = Logger(label: "norq")
        logger.logLevel = verbose ? .debug : .warning
        let router = try NotificationRouter(configuration: configuration, registry: ConfigOptions.registry,
                                            templates: library, logger: logger)
        let started = ContinuousClock.now
        let total = recipients.reduce(0) { $0 + $1.tokens.count + $1.channels.count }
        let progress = total > 100 && isatty(2) == 1
        var outcomes: [PushOutcome] = []
        outcomes.reserveCapacity(total)
        let stream = try router.sendStreaming(template: template, data: data, to: recipients, options: options)
        let style = Style.stdout
        for await outcome in stream {
            outcomes.append(outcome)
            if !json {
                if progress { Console.err("\r\u{1B}[K") }
                Console.out(Self.line(outcome, style: style) + "\n")
                if progress { Console.err("sending: \(outcomes.count)/\(total)") }
            }
        }
        if progress { Console.err("\r\u{1B}[K") }
        let elapsed = ContinuousClock.now - started
        await router.shutdown(gracePeriod: .seconds(5))
        if let running { try? await running.shutdown() }
        if let runningWeb { try? await runningWeb.shutdown() }

        let report = SendReport(outcomes: outcomes)
        if json {
            Console.out(Self.json(report, elapsed: elapsed).prettyPrinted() + "\n")
        } else {
            Console.out(Self.summary(report, elapsed: elapsed, style: style) + "\n")
        }
        return report.allDelivered ? 0 : 2
    }

    static func line(_ outcome: PushOutcome, style: Style) -> String {
        let who = DryRunFormatter.label(outcome.target) + (outcome.recipientID.map { " (\($0))" } ?? "")
        let provider = outcome.provider.map { " via \($0)" } ?? ""
        let attempts = outcome.attempts > 1 ? " after \(outcome.attempts) attempts" : ""
        switch outcome.result {
        case .delivered(let delivered):
            return style.green("delivered") + "  \(who)\(provider)  apns-id \(delivered.messageID ?? "-")\(attempts)"
        case .rejected(let rejected):
            return style.red("rejected ") + "  \(who)\(provider)  \(rejected.status) \(rejected.reason ?? "") (\(rejected.classification))\(attempts)"
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

    static func summary(_ report: SendReport, elapsed: Duration, style: Style) -> String {
        let maybeDelivered = report.mayHaveBeenDelivered > 0 ? " (\(report.mayHaveBeenDelivered) may have been delivered)" : ""
        let text = "\(report.outcomes.count) tokens: \(report.delivered) delivered, \(report.rejected) rejected, "
            + "\(report.failed) failed\(maybeDelivered), \(report.skipped) skipped, \(report.duplicates) duplicates in \(seconds(elapsed))"
        return style.bold(report.allDelivered ? "ok: " : "not all delivered: ") + text
    }

    static func json(_ report: SendReport, elapsed: Duration) -> JSONValue {
        let outcomes: [JSONValue] = report.outcomes.map { outcome in
            [
                "recipient": .optional(outcome.recipientID),
                "target": DryRunFormatter.targetJSON(outcome.target),
                "provider": .optional(outcome.provider),
                "attempts": .int(Int64(outcome.attempts)),
                "result": DryRunFormatter.outcomeJSON(outcome.result),
            ]
        }
        return [
            "outcomes": .array(outcomes),
            "summary": [
                "tokens": .int(Int64(report.outcomes.count)),
                "delivered": .int(Int64(report.delivered)),
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
