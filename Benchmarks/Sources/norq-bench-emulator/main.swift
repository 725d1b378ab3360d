import Crypto
import Foundation
import NorqTesting

// norq-bench-emulator: starts NorqTesting.APNsEmulator (JWT verification and APNs checks on, request
// recording off) for the benchmark; `norq emulator` does not exist in this branch.
// usage: norq-bench-emulator --port P --key P8 --team TEAMID --key-id KEYID --ca-out PEM [--max-streams N]
var port = 0, key = "examples/keys/AuthKey_DEMO000000.p8", team = "DEMO000000", keyID = "DEMO000000"
var caOut = "/tmp/norq-emulator-ca.pem", maxStreams = 1000
var arguments = Array(CommandLine.arguments.dropFirst())
while !arguments.isEmpty {
    let name = arguments.removeFirst()
    guard let value = arguments.first else { FileHandle.standardError.write(Data("\(name) needs a value\n".utf8)); exit(2) }
    arguments.removeFirst()
    switch name {
    case "--port": port = Int(value) ?? 0
    case "--key": key = value
    case "--team": team = value
    case "--key-id": keyID = value
    case "--ca-out": caOut = value
    case "--max-streams": maxStreams = Int(value) ?? 1000
    default: FileHandle.standardError.write(Data("unknown option \(name)\n".utf8)); exit(2)
    }
}
do {
    guard let pem = FileManager.default.contents(atPath: key) else { throw CocoaError(.fileReadNoSuchFile) }
    let privateKey = try P256.Signing.PrivateKey(pemRepresentation: String(decoding: pem, as: UTF8.self))
    let emulator = try APNsEmulator(configuration: APNsEmulator.Configuration(
        port: port, environmentName: "sandbox", teamID: team, keyID: keyID,
        signingPublicKeyPEM: privateKey.publicKey.pemRepresentation, maxConcurrentStreams: maxStreams,
        recordRequests: false, recordBodies: false))
    try await emulator.start()
    try emulator.writeCACertificate(to: caOut)
    FileHandle.standardOutput.write(Data("listening \(emulator.port)\n".utf8))
    // Runs until the process is signalled (the script sends SIGTERM).
    while true { try await Task.sleep(for: .seconds(3600)) }
} catch {
    FileHandle.standardError.write(Data("norq-bench-emulator: \(error)\n".utf8))
    exit(1)
}
