import Crypto
import Foundation
import NorqCore
import NorqTesting
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// A real `norq serve` process on a free port, with the APNs emulator in this process and a SQLite store in a
/// temporary directory: what the end-to-end tests talk to over HTTP.
final class ServedNorq: Sendable {
    static let fullKey = "full-access-key-0123456789abcdef"
    static let limitedKey = "limited-key-0123456789abcdef01"
    static let consoleOnlyKey = "console-only-key-0123456789abcd"

    /// The built `norq` executable (next to the test bundle, else .build/debug).
    static let executable: URL = {
        var candidates: [URL] = []
        for bundle in Bundle.allBundles + [Bundle.main] {
            candidates.append(bundle.bundleURL.appendingPathComponent("norq"))
            candidates.append(bundle.bundleURL.deletingLastPathComponent().appendingPathComponent("norq"))
        }
        candidates.append(packageRoot.appendingPathComponent(".build/debug/norq"))
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[candidates.count - 1]
    }()

    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    let emulator: APNsEmulator
    let directory: URL
    let config: URL
    let process: Process
    let port: Int
    let session: URLSession

    private init(emulator: APNsEmulator, directory: URL, config: URL, process: Process, port: Int) {
        self.emulator = emulator
        self.directory = directory
        self.config = config
        self.process = process
        self.port = port
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 30
        configuration.httpMaximumConnectionsPerHost = 32
        session = URLSession(configuration: configuration)
    }

    /// Starts the emulator and `norq serve` (with `limits` as the `server.limits` YAML flow mapping).
    static func start(faults: APNsEmulator.Faults = .init(), limits: String = "{ ratePerSecond: 100000, burst: 100000, recipients: 100, bodyBytes: 65536, waitTimeout: 20s }",
                      store: String = "sqlite: ./norq.db", serverExtra: String = "", fcm: FCMEmulator? = nil,
                      emulator existing: APNsEmulator? = nil, directory existingDirectory: URL? = nil,
                      managementEndpoint: String? = nil, extraKeys: String = "") async throws -> ServedNorq {
        let key = P256.Signing.PrivateKey()
        let emulator: APNsEmulator
        if let existing {
            emulator = existing
        } else {
            emulator = try APNsEmulator(configuration: .init(environmentName: "sandbox", teamID: "TEAM123ABC",
                                                              signingKeys: ["KEY123ABCD": key.publicKey.pemRepresentation],
                                                              faults: faults))
            try await emulator.start()
        }
        let directory = existingDirectory ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("norq-serve-\(UUID().uuidString)")
        let config = directory.appendingPathComponent("norq.yaml")
        if existingDirectory == nil {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try emulator.writeCACertificate(to: directory.appendingPathComponent("ca.pem").path)
            try key.pemRepresentation.write(to: directory.appendingPathComponent("key.p8"), atomically: true, encoding: .utf8)
            // With an FCM emulator: an `fcm` provider for Android tokens (the demo service account, the emulator's CA).
            var fcmProvider = ""
            if let fcm {
                try fcm.writeCACertificate(to: directory.appendingPathComponent("fcm-ca.pem").path)
                fcmProvider = """
                  fcm:
                    config:
                      projectId: demo-project
                      serviceAccount: \(packageRoot.appendingPathComponent("examples/keys/fcm-service-account-DEMO.json").path)
                      endpoint: https://127.0.0.1:\(fcm.port)
                      tokenEndpoint: https://127.0.0.1:\(fcm.port)/token
                      caPath: ./fcm-ca.pem
                    retry: { retries: 2, backoff: 20ms }
                """
            }
            let yaml = """
                templates: \(packageRoot.appendingPathComponent("templates").path)
                providers:
                  apns:
                    config:
                      keyId: KEY123ABCD
                      teamId: TEAM123ABC
                      bundleId: com.example.app
                      keyPath: ./key.p8
                      endpoint: https://localhost:\(emulator.port)
                      managementEndpoint: \(managementEndpoint ?? "https://localhost:\(emulator.port)")
                      caPath: ./ca.pem
                    retry: { retries: 2, backoff: 20ms }
                \(fcmProvider)
                routing:
                  push: apns
                \(fcm == nil ? "" : "  push.android: fcm")
                store:
                  \(store)
                  callTimeout: 2s
                  pollInterval: 50ms
                  leaseDuration: 3s
                  claimBatchSize: 8
                server:
                  host: 127.0.0.1
                  port: 0
                  apiKeys:
                    - { name: full, key: "${NORQ_TEST_FULL_KEY}", scopes: [admin] }
                    - { name: limited, key: "${NORQ_TEST_LIMITED_KEY}", templates: [background-refresh] }
                    - { name: console-only, key: \(consoleOnlyKey), providers: [console] }
                \(extraKeys)
                  limits: \(limits)
                \(serverExtra)
                """
            try yaml.write(to: config, atomically: true, encoding: .utf8)
        }
        let (process, port) = try await launch(config: config, directory: directory)
        return ServedNorq(emulator: emulator, directory: directory, config: config, process: process, port: port)
    }

    /// Starts `norq serve` again on the same directory (and database) and emulator.
    func restart() async throws -> ServedNorq {
        try await Self.start(emulator: emulator, directory: directory)
    }

    /// Runs `norq serve -c config --port 0` and waits (at most 60 s) for the address it prints.
    static func launch(config: URL, directory: URL, extra: [String] = []) async throws -> (Process, Int) {
        let process = Process()
        process.executableURL = executable
        process.arguments = ["serve", "-c", config.path] + extra
        process.currentDirectoryURL = directory
        var environment = ProcessInfo.processInfo.environment
        environment["NORQ_TEST_FULL_KEY"] = fullKey
        environment["NORQ_TEST_LIMITED_KEY"] = limitedKey
        process.environment = environment
        let out = directory.appendingPathComponent("serve-\(UUID().uuidString.prefix(8)).out")
        let err = directory.appendingPathComponent("serve.log")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        if !FileManager.default.fileExists(atPath: err.path) { _ = FileManager.default.createFile(atPath: err.path, contents: nil) }
        process.standardOutput = try FileHandle(forWritingTo: out)
        let errHandle = try FileHandle(forWritingTo: err)
        errHandle.seekToEndOfFile()
        process.standardError = errHandle
        try process.run()
        let end = ContinuousClock.now.advanced(by: .seconds(60))
        while ContinuousClock.now < end {
            let text = (try? String(contentsOf: out, encoding: .utf8)) ?? ""
            if let range = text.range(of: "listening on http://127.0.0.1:") ?? text.range(of: "listening on https://127.0.0.1:") {
                let digits = text[range.upperBound...].prefix { $0.isNumber }
                if let port = Int(digits) { return (process, port) }
            }
            if !process.isRunning {
                let log = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
                throw NorqError("cli/emulator-failed", "norq serve exited with \(process.terminationStatus): \(log)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        process.terminate()
        throw NorqError("cli/emulator-failed", "norq serve did not print its address within 60 s")
    }

    var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("serve.log"), encoding: .utf8)) ?? ""
    }

    /// SIGTERM, then waits (at most `timeout`) for the exit; returns the exit status (nil: killed after the wait).
    @discardableResult
    func stop(timeout: Duration = .seconds(30)) async throws -> Int32? {
        guard process.isRunning else { return process.terminationStatus }
        process.terminate()
        let end = ContinuousClock.now.advanced(by: timeout)
        while process.isRunning, ContinuousClock.now < end { try await Task.sleep(for: .milliseconds(20)) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            return nil
        }
        return process.terminationStatus
    }

    /// For `defer`: stops the server process now (SIGTERM, at most 30 s, then SIGKILL) and removes the directory;
    /// the in-process emulator ends with the test process.
    /// Runs `norq serve <arguments>` in `directory` until it exits (a start-up that must fail): its exit status and
    /// what it wrote to standard error.
    static func runToExit(_ arguments: [String], in directory: URL) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = executable
        process.arguments = ["serve"] + arguments
        process.currentDirectoryURL = directory
        var environment = ProcessInfo.processInfo.environment
        environment["NORQ_TEST_FULL_KEY"] = fullKey
        environment["NORQ_TEST_LIMITED_KEY"] = limitedKey
        process.environment = environment
        let pipe = Pipe()
        process.standardError = pipe
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }

    func cleanupNow() {
        if process.isRunning {
            process.terminate()
            var waited = 0
            while process.isRunning, waited < 3000 { usleep(10_000); waited += 1 }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Stops the server and the emulator and removes the directory.
    func cleanup() async {
        _ = try? await stop()
        try? await emulator.shutdown()
        try? FileManager.default.removeItem(at: directory)
    }

    // MARK: HTTP

    struct Answer: Sendable {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
        var json: JSONValue? { try? JSONValue(parsing: body) }
        var text: String { String(decoding: body, as: UTF8.self) }
        /// `error.code` of an error body.
        var errorCode: String? { json?["error"]?["code"]?.stringValue }
        func header(_ name: String) -> String? {
            headers.first { $0.key.lowercased() == name.lowercased() }?.value
        }
    }

    func request(_ method: String, _ path: String, key: String? = ServedNorq.fullKey, json: JSONValue? = nil,
                 body: [UInt8]? = nil, contentType: String? = "application/json",
                 headers: [String: String] = [:]) async throws -> Answer {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        if let key { request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization") }
        if let json { request.httpBody = Data(json.serialized()) } else if let body { request.httpBody = Data(body) }
        if request.httpBody != nil, let contentType { request.setValue(contentType, forHTTPHeaderField: "Content-Type") }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await session.data(for: request)
        let http = response as! HTTPURLResponse
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields { fields["\(name)"] = "\(value)" }
        return Answer(status: http.statusCode, headers: fields, body: Array(data))
    }
}

extension JSONValue {
    var intValue: Int64? {
        if case .int(let value) = self { return value }
        return nil
    }
    var arrayValue: [JSONValue]? {
        if case .array(let items) = self { return items }
        return nil
    }
}
