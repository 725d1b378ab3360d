import BenchServer
import Crypto
import Foundation
import NorqTesting

// norq-bench-emulator: starts NorqTesting.APNsEmulator (JWT verification and APNs checks on, request
// recording off) for the benchmark; `norq emulator` does not exist in this branch.
// usage: norq-bench-emulator --port P --key P8 --team TEAMID --key-id KEYID --ca-out PEM [--max-streams N]
let options = BenchServerProcess.options(known: ["--port", "--key", "--team", "--key-id", "--ca-out", "--max-streams"])
await BenchServerProcess.run("norq-bench-emulator") {
    let key = options["--key"] ?? "examples/keys/AuthKey_DEMO000000.p8"
    guard let pem = FileManager.default.contents(atPath: key) else { throw CocoaError(.fileReadNoSuchFile) }
    let privateKey = try P256.Signing.PrivateKey(pemRepresentation: String(decoding: pem, as: UTF8.self))
    let emulator = try APNsEmulator(configuration: APNsEmulator.Configuration(
        port: Int(options["--port"] ?? "") ?? 0, environmentName: "sandbox", teamID: options["--team"] ?? "DEMO000000",
        keyID: options["--key-id"] ?? "DEMO000000", signingPublicKeyPEM: privateKey.publicKey.pemRepresentation,
        maxConcurrentStreams: Int(options["--max-streams"] ?? "") ?? 1000, recordRequests: false, recordBodies: false))
    try await emulator.start()
    try emulator.writeCACertificate(to: options["--ca-out"] ?? "/tmp/norq-emulator-ca.pem")
    return emulator.port
}
