import Foundation
import NorqTesting

// norq-bench-fcm-emulator: starts NorqTesting.FCMEmulator (assertion verification at POST /token, FCM's request
// checks on messages:send, request recording off) for Benchmarks/fcm.sh, in a process of its own.
// usage: norq-bench-fcm-emulator --port P --service-account JSON --project ID --ca-out PEM [--max-streams N]
var port = 0, serviceAccount = "examples/keys/fcm-service-account-DEMO.json", project = "norq-demo"
var caOut = "/tmp/norq-fcm-emulator-ca.pem", maxStreams = 1000
var arguments = Array(CommandLine.arguments.dropFirst())
while !arguments.isEmpty {
    let name = arguments.removeFirst()
    guard let value = arguments.first else { FileHandle.standardError.write(Data("\(name) needs a value\n".utf8)); exit(2) }
    arguments.removeFirst()
    switch name {
    case "--port": port = Int(value) ?? 0
    case "--service-account": serviceAccount = value
    case "--project": project = value
    case "--ca-out": caOut = value
    case "--max-streams": maxStreams = Int(value) ?? 1000
    default: FileHandle.standardError.write(Data("unknown option \(name)\n".utf8)); exit(2)
    }
}
do {
    guard let json = FileManager.default.contents(atPath: serviceAccount) else { throw CocoaError(.fileReadNoSuchFile) }
    var configuration = FCMEmulator.Configuration(port: port, projectID: project, maxConcurrentStreams: maxStreams,
                                                  recordRequests: false)
    try configuration.trust(serviceAccountJSON: String(decoding: json, as: UTF8.self))
    let emulator = try FCMEmulator(configuration: configuration)
    try await emulator.start()
    try emulator.writeCACertificate(to: caOut)
    FileHandle.standardOutput.write(Data("listening \(emulator.port)\n".utf8))
    // Runs until the process is signalled (the script sends SIGTERM).
    while true { try await Task.sleep(for: .seconds(3600)) }
} catch {
    FileHandle.standardError.write(Data("norq-bench-fcm-emulator: \(error)\n".utf8))
    exit(1)
}
