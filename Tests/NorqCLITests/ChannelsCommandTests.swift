import Crypto
import Foundation
import NorqTesting
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `norq channels` against an in-process emulator, through the built executable.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ChannelsCommandTests {
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static let executable: URL = {
        var candidates: [URL] = []
        for bundle in [Bundle.main] + Bundle.allBundles {
            candidates.append(bundle.bundleURL.appendingPathComponent("norq"))
            candidates.append(bundle.bundleURL.deletingLastPathComponent().appendingPathComponent("norq"))
        }
        candidates.append(packageRoot.appendingPathComponent(".build/debug/norq"))
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[candidates.count - 1]
    }()

    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs `norq` with arguments, bounded by a timeout; output goes through files (no pipe back-pressure).
    static func norq(_ arguments: [String], timeout: Double = 30) throws -> Run {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("norq-channels-run-\(UInt64.random(in: 0...UInt64.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("out"), err = directory.appendingPathComponent("err")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        try process.run()
        let end = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < end { usleep(20_000) }
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        return Run(status: process.terminationStatus,
                   stdout: (try? String(contentsOf: out, encoding: .utf8)) ?? "",
                   stderr: (try? String(contentsOf: err, encoding: .utf8)) ?? "")
    }

    @Test("create, list, read, delete and dry-run through norq channels")
    func channelsCommand() async throws {
        let key = P256.Signing.PrivateKey()
        let emulator = try APNsEmulator(configuration: .init(
            environmentName: "production", teamID: "TEAM123456", keyID: "ABC123DEFG",
            signingPublicKeyPEM: key.publicKey.pemRepresentation))
        try await emulator.start()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("norq-channels-\(UInt64.random(in: 0...UInt64.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try key.pemRepresentation.write(to: directory.appendingPathComponent("AuthKey.p8"), atomically: true, encoding: .utf8)
        try emulator.caCertificatePEM.write(to: directory.appendingPathComponent("ca.pem"), atomically: true, encoding: .utf8)
        let config = directory.appendingPathComponent("norq.yaml").path
        try """
            providers:
              apns:
                config:
                  keyId: ABC123DEFG
                  teamId: TEAM123456
                  keyPath: ./AuthKey.p8
                  bundleId: com.example.app
                  productionEndpoint: https://localhost:\(emulator.port)
                  managementProductionEndpoint: https://localhost:\(emulator.port)
                  caPath: ./ca.pem
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let common = ["--config", config, "--environment", "production"]

        let dry = try Self.norq(["channels", "create", "--storage-policy", "0", "--dry-run"] + common)
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stdout.hasPrefix("POST https://localhost:\(emulator.port)/1/apps/com.example.app/channels\n"))
        #expect(dry.stdout.contains(#"{"message-storage-policy":0,"push-type":"LiveActivity"}"#))
        #expect(dry.stdout.contains("bearer <redacted"))
        #expect(emulator.requests.isEmpty)

        let requestID = "11111111-2222-4333-8444-555555555555"
        let created = try Self.norq(["channels", "create", "--storage-policy", "0", "--json", "--request-id", requestID] + common)
        #expect(created.status == 0, "\(created.stderr)")
        let ids = emulator.channelIDs(bundleID: "com.example.app")
        #expect(ids.count == 1)
        let id = try #require(ids.first)
        #expect(created.stdout.contains("\"channel\": \"\(id)\"") && created.stdout.contains(requestID))

        let list = try Self.norq(["channels", "list"] + common)
        #expect(list.status == 0 && list.stdout.hasPrefix("1 channel(s) in production") && list.stdout.contains(id), "\(list)")
        let read = try Self.norq(["channels", "read", id] + common)
        #expect(read.status == 0 && read.stdout.contains("message-storage-policy: 0 (no messages stored)"), "\(read)")
        // A broadcast send names the message id apns-request-id and counts the channel as a channel.
        let to = #"[{"id": "all", "push": {"channels": [{"channel": "\#(id)", "environment": "production"}]}}]"#
        let broadcast = try Self.norq(["send", "live-activity-update", "--templates", CLI.packageRoot.path + "/templates",
                                       "--to", to] + common)
        #expect(broadcast.stdout.contains("channel \(id) (all) via apns  apns-request-id "), "\(broadcast)")
        #expect(broadcast.stdout.contains(": 1 channel: "), "\(broadcast)")
        #expect(!broadcast.stdout.contains("1 tokens"), "\(broadcast)")

        let deleted = try Self.norq(["channels", "delete", id] + common)
        #expect(deleted.status == 0 && deleted.stdout.hasPrefix("deleted \(id) in production"), "\(deleted)")
        #expect(emulator.channelIDs(bundleID: "com.example.app").isEmpty)
        let gone = try Self.norq(["channels", "read", id] + common)
        #expect(gone.status == 1 && gone.stderr.contains("error[apns/channel-not-registered]"), "\(gone)")
        let badPolicy = try Self.norq(["channels", "create", "--storage-policy", "forever"] + common)
        #expect(badPolicy.status == 1 && badPolicy.stderr.contains("apns/invalid-storage-policy"), "\(badPolicy)")
        let badProvider = try Self.norq(["channels", "list", "--provider", "nope"] + common)
        #expect(badProvider.status == 1 && badProvider.stderr.contains("cli/channel-provider"), "\(badProvider)")
        try? await emulator.shutdown()
    }
}
