import ArgumentParser
import Norq
import NorqConfig
import NorqCore
import NorqTemplates

/// Options shared by `render --to` and `send`: what the router is told about the send.
struct SendTuningOptions: ParsableArguments {
    @Option(name: .long, help: "Idempotency key: fixes every token's apns-id (a UUIDv5 of key and token); repeats within this one process are deduplicated. Across runs of norq send it protects only with a durable store (--store or store:).")
    var idempotencyKey: String?

    @Option(name: .long, help: ArgumentHelp("The app (bundle id) to send to, instead of the template's headers.apns-topic or the provider's bundleId; the push type's topic suffix is added.", valueName: "BUNDLE-ID"))
    var topic: String?

    @Option(name: .long, help: ArgumentHelp("Send time in UNIX epoch seconds (default: now); makes apns-expiration reproducible.", valueName: "EPOCH"))
    var sendTime: Int64?

    @Option(name: .long, help: "Environment (sandbox or production) of the tokens that do not name one; a token's own \"environment\" always wins, since a token only works in the environment it was issued for. Default: the provider's `production:` setting.")
    var environment: String?

    @Flag(name: .long, help: "Render missing variables as empty instead of failing.")
    var lenient = false

    @Flag(name: .long, help: "Fail (exit 1, nothing sent) on what is otherwise a warning: an apns-expiration in the past.")
    var strict = false

    @Flag(name: .long, help: "Server-side dry run: FCM validates each message (validate_only) and delivers nothing; tokens of providers without one (APNs, Web Push) fail with routing/validate-only-unsupported, nothing sent.")
    var validateOnly = false

    func routerOptions() throws(NorqError) -> RouterSendOptions {
        var options = RouterSendOptions(idempotencyKey: idempotencyKey,
                                        environment: try environment.map { value throws(NorqError) in try PushEnvironment.parse(value) },
                                        strict: !lenient, sendTime: sendTime)
        options.topic = topic
        options.validateOnly = validateOnly
        return options
    }
}

/// `norq render`: the dry run. No network, nothing sent.
struct RenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render",
        abstract: "Dry run: show the rendered notification, or with --to the exact HTTP/2 request per token.",
        discussion: """
            Without --to, prints the rendered content (title, body, image, action URL, headers, iOS fields, data).
            With --to, prints per token the request the router would send: method, URL with the environment's \
            host, every header in send order (authorization redacted as `bearer <redacted ES256 JWT kid=… iss=…>`), \
            the body pretty-printed with its size against the push type's limit, and the routing decision. \
            Nothing is sent and no secret is printed.

            Examples:
              norq render order-shipped --sample default
              norq render order-shipped --data order.json
              norq render order-shipped --sample default \\
                  --data '{"user": {"first_name": "Ada"}}'     # merged on the sample
              norq render order-shipped -c examples/quickstart/norq.yaml \\
                  --sample default --to examples/quickstart/recipients.json
              norq render order-shipped --to '[{"token": "<hex>", "platform": "ios"}]' \\
                  --idempotency-key k1 --send-time 1700000000 --json

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

    @Flag(name: .long, help: "Print one JSON document on stdout.")
    var json = false

    func run() async throws {
        do {
            let code = try render()
            if code != 0 { throw ExitCode(code) }
        } catch let error as NorqError {
            if json { Console.out(JSONValue.object(["error": Console.json(error)]).prettyPrinted() + "\n") }
            throw Console.fail(error)
        }
    }

    func render() throws(NorqError) -> Int32 {
        let configuration: NorqConfiguration? = to == nil
            ? try configOptions.loadConfigurationIfPresent()
            : try configOptions.loadConfiguration()
        let library = try configOptions.library(configuration)
        let compiled = try library.template(named: template)
        let data = try dataOptions.resolve(for: compiled)
        let options = try tuning.routerOptions()
        try tuning.checkWarnings(compiled, data: data)

        guard let to else {
            guard compiled.enabled else {
                Console.err("note: template \"\(template)\" is disabled (enabled: false); a send would skip every token\n")
                return 0
            }
            let content = try compiled.render(data: data, options: RenderOptions(strict: options.strict))
            // What every provider refuses before sending (a header value that cannot be written on HTTP/2:
            // `template/invalid-header-value`), as `norq validate` and a send's `prepare` do; payload limits are
            // `norq validate`'s.
            _ = try library.rules.payloadSizes(of: content, options: SendOptions(collapseID: options.collapseID))
            if json {
                Console.out(DryRunJSON.contentJSON(content, template: template).prettyPrinted() + "\n")
            } else {
                Console.out(DryRunFormatter.contentText(content, template: template, style: .stdout))
            }
            return 0
        }
        let recipients = try JSONInput.recipients(to)
        guard let configuration else { return 1 }
        let router = try NotificationRouter(configuration: configuration, registry: ConfigOptions.registry,
                                            templates: library, deferProviderErrors: true)
        let deliveries = try router.prepare(template: template, data: data, to: recipients, options: options)
        if json {
            Console.out(DryRunJSON.deliveriesJSON(deliveries, template: template).prettyPrinted() + "\n")
        } else {
            Console.out(DryRunFormatter.deliveriesText(deliveries, template: template, style: .stdout))
        }
        return deliveries.allSatisfy { $0.request != nil } ? 0 : 2
    }
}
