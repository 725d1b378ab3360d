// Run from the repository root:  swift run norq-example-library --emulator
// It sends templates/order-shipped to examples/quickstart/recipients.json with examples/quickstart/norq.yaml (demo
// keys). --emulator starts the APNs, FCM and Web Push emulators in-process (NorqLocalEmulators; nothing leaves this
// machine). Without it, pass your own config (real keys) and recipients: norq-example-library CONFIG RECIPIENTS
import Foundation
import Logging
import Norq
import NorqBuiltIns
import NorqConfig
import NorqLocalEmulators
import NorqTemplates
import ServiceLifecycle

let arguments = CommandLine.arguments.dropFirst()
let paths = arguments.filter { !$0.hasPrefix("--") }
let configPath = paths.first ?? "examples/quickstart/norq.yaml"                 // see "Configuration"
let recipientsPath = paths.dropFirst().first ?? "examples/quickstart/recipients.json"

let logger = Logger(label: "push")
let registry = ProviderTypeRegistry.builtIn  // apns, fcm, webpush, console; register third-party types on a copy
var configuration = try ConfigurationLoader(registry: registry).load(path: configPath)
let recipients = try Recipient.list(from: JSONValue(parsing: String(contentsOfFile: recipientsPath, encoding: .utf8)))
// e.g. [{"id": "u1", "push": {"tokens": [{"token": "a1b2…", "platform": "ios"},
//        {"token": "c3d4…", "platform": "ios", "provider": "apns-enterprise", "environment": "production"}]}}]

var emulators: LocalEmulators?
if arguments.contains("--emulator") {
    let started = try await LocalEmulators.start(for: configuration, recipients: recipients)
    started.descriptions.forEach { print($0) }
    configuration = started.configuration                   // the providers, pointed at the emulators
    emulators = started
}

let templates = try TemplateLibrary(directory: configuration.templatesDirectory ?? "templates")
let router = try NotificationRouter(
    configuration: configuration,
    registry: registry,
    templates: templates,
    logger: logger,
    onInvalidToken: { event in
        // Unregistered, ExpiredToken, BadDeviceToken only (never credential errors).
        // event.invalidSince is APNs' 410 timestamp; event.hint warns when the token may be from the other
        // environment (BadDeviceToken): check before deleting.
        logger.info("drop token", metadata: ["reason": "\(event.reason)"])
    })

// The router is a Service: graceful shutdown stops new sends and drains the ones in flight.
let services = ServiceGroup(services: [router], gracefulShutdownSignals: [.sigterm], logger: logger)
async let running: Void = services.run()

let report = try await router.send(
    template: "order-shipped",
    data: ["order": ["id": "A-1001", "items": [["name": "Blue mug", "price": 12.5]]],  // the data the template uses
           "user": ["first_name": "Ada"],                                               // (or any Encodable)
           "tracking_url": "https://track.example.com/A-1001"],
    to: recipients,
    options: RouterSendOptions(idempotencyKey: "order-A-1001-shipped",  // repeats are reported as duplicates
                               deadline: .seconds(30)))                  // bounds all attempts of a token
for outcome in report.outcomes {
    let token = "\(outcome.target.redacted) via \(outcome.provider ?? "-")"
    switch outcome.result {
    case .delivered(let delivered): print("sent", token, delivered.messageID ?? "")     // e.g. the apns-id
    case .rejected(let rejected): print("rejected", token, rejected.status, rejected.reason ?? "")
    case .failed(let error): print("no answer:", token, error)  // retry later, same key; error.possiblyProcessed: may have been delivered
    case .skipped(let skipped): print("skipped:", token, skipped.code)                  // e.g. routing/no-provider
    case .duplicate(of: let first): print("already sent:", token, first.kind)
    }
}
print("\(report.delivered) of \(report.outcomes.count) delivered")

await services.triggerGracefulShutdown()
try await running
await emulators?.shutdown()
if !report.allDelivered { exit(2) }
