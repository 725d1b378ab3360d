import BenchServer
import Foundation
import NorqTesting

// norq-bench-fcm-emulator: starts NorqTesting.FCMEmulator (assertion verification at POST /token, FCM's request
// checks on messages:send, request recording off) for Benchmarks/fcm.sh, in a process of its own.
// usage: norq-bench-fcm-emulator --port P --service-account JSON --project ID --ca-out PEM [--max-streams N]
let options = BenchServerProcess.options(known: ["--port", "--service-account", "--project", "--ca-out", "--max-streams"])
await BenchServerProcess.run("norq-bench-fcm-emulator") {
    let serviceAccount = options["--service-account"] ?? "examples/keys/fcm-service-account-DEMO.json"
    guard let json = FileManager.default.contents(atPath: serviceAccount) else { throw CocoaError(.fileReadNoSuchFile) }
    var configuration = FCMEmulator.Configuration(
        port: Int(options["--port"] ?? "") ?? 0, projectID: options["--project"] ?? "norq-demo",
        maxConcurrentStreams: Int(options["--max-streams"] ?? "") ?? 1000, recordRequests: false)
    try configuration.trust(serviceAccountJSON: String(decoding: json, as: UTF8.self))
    let emulator = try FCMEmulator(configuration: configuration)
    try await emulator.start()
    try emulator.writeCACertificate(to: options["--ca-out"] ?? "/tmp/norq-fcm-emulator-ca.pem")
    return emulator.port
}
