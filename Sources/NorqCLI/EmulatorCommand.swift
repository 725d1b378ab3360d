import ArgumentParser
import Dispatch
import Foundation
import NorqCore
import NorqFCM
import NorqLocalEmulators
import NorqTesting

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `norq emulator`: the APNs emulator as a standalone server.
struct EmulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "emulator",
        abstract: "Run the APNs emulator (and with --fcm the FCM emulator; HTTP/2 + TLS on 127.0.0.1) until Ctrl-C or SIGTERM.",
        discussion: """
            Prints its address and the path of its CA certificate; point a provider at it with \
            `endpoint: https://127.0.0.1:PORT` and `caPath: <that file>` in norq.yaml (or NORQ_APNS_ENDPOINT and \
            NORQ_APNS_CA_PATH). It verifies JWTs made with the given key (--key/--team/--key-id, or the APNs \
            providers of --config), checks headers and payloads the way APNs does, and can inject faults.

            Examples:
              norq emulator --config examples/quickstart/norq.yaml --port 2197
              norq emulator --key examples/keys/AuthKey_DEMO000000.p8 \\
                  --team TEAM123ABC --key-id DEMO000000
              norq emulator --config norq.yaml --unregistered <token> \\
                  --error-rate 0.1 --latency-ms 20
              norq emulator --config norq.yaml --log-requests  # a JSON line per request
              norq emulator --config examples/quickstart/norq.yaml --fcm  # APNs and FCM
              norq emulator --expo                                         # APNs and Expo

            \(ExitCodes.help)
            """
    )

    @Option(name: .long, help: "Port (0 picks a free one).")
    var port: Int = 0

    @Option(name: .long, help: "Address to listen on.")
    var host: String = "127.0.0.1"

    @Option(name: .long, help: ArgumentHelp("Accept JWTs signed by this P-256 key: a .p8 private key or a public key PEM.", valueName: "PATH"))
    var key: String?

    @Option(name: .long, help: "The team id JWTs must name (iss).")
    var team: String?

    @Option(name: .long, help: "The key id of --key (default: from a file name AuthKey_<ID>.p8).")
    var keyId: String?

    @Option(name: [.customShort("c"), .long], help: "Accept the keys and team of this config's APNs providers.")
    var config: String?

    @Option(name: .long, help: "Accept only these bundle ids as apns-topic (repeatable; default any).")
    var bundleId: [String] = []

    @Option(name: .long, help: ArgumentHelp("Where to write the CA certificate (default: a temporary file).", valueName: "PATH"))
    var caOut: String?

    @Flag(name: .long, help: "Certificate-auth mode: require a client certificate signed by the emulator's CA.")
    var requireClientCert = false

    @Option(name: .long, help: "Advertised SETTINGS_MAX_CONCURRENT_STREAMS.")
    var maxStreams: Int = 1000

    @Option(name: .long, help: ArgumentHelp("Answer 410 Unregistered for this device token (repeatable).", valueName: "TOKEN"))
    var unregistered: [String] = []

    @Option(name: .long, help: ArgumentHelp("Answer 400 BadDeviceToken for this device token (repeatable).", valueName: "TOKEN"))
    var badToken: [String] = []

    @Option(name: .long, help: ArgumentHelp("Never answer this device token (repeatable).", valueName: "TOKEN"))
    var silentToken: [String] = []

    @Option(name: .long, help: "Share (0...1) of valid requests answered with --error-status.")
    var errorRate: Double = 0

    @Option(name: .long, help: "Status of injected errors.")
    var errorStatus: Int = 503

    @Option(name: .long, help: "Reason of injected errors.")
    var errorReason: String = "ServiceUnavailable"

    @Option(name: .long, help: ArgumentHelp("Add retry-after to injected 429/503 answers.", valueName: "SECONDS"))
    var retryAfter: Int?

    @Option(name: .long, help: ArgumentHelp("Delay before every answer.", valueName: "MS"))
    var latencyMs: Int = 0

    @Option(name: .long, help: ArgumentHelp("Send GOAWAY after this many streams on a connection.", valueName: "N"))
    var goawayAfter: Int?

    @Option(name: .long, help: ArgumentHelp("Drop the connection when its Nth stream opens.", valueName: "N"))
    var dropAfter: Int?

    @Flag(name: .long, help: "Print one JSON line per request received (method, path, authority, headers, body, answer).")
    var logRequests = false

    @Flag(name: .long, help: "Also run the FCM emulator (OAuth token endpoint and messages:send), trusting the FCM service accounts of --config and --service-account.")
    var fcm = false

    @Option(name: .long, help: ArgumentHelp("With --fcm: trust this service-account JSON key file (repeatable).", valueName: "PATH"))
    var serviceAccount: [String] = []

    @Option(name: .long, help: "With --fcm: the FCM emulator's port (0 picks a free one).")
    var fcmPort: Int = 0

    @Flag(name: .long, help: "Also run the Expo push service emulator (send and getReceipts, 100 recipients a request).")
    var expo = false

    @Option(name: .long, help: "With --expo: the Expo emulator's port (0 picks a free one).")
    var expoPort: Int = 0

    @Option(name: .long, help: ArgumentHelp("With --expo: require this access token (enhanced push security).", valueName: "TOKEN"))
    var expoAccessToken: String?

    @Flag(name: .long, help: "Run the Web Push service emulator instead (issues subscriptions, decrypts every message, checks VAPID).")
    var webpush = false

    @Option(name: .long, help: "With --webpush: how many subscriptions to issue and print as recipient tokens.")
    var subscriptions: Int = 1

    @Flag(name: .long, help: "With --webpush: speak HTTP/1.1 only (a push service without HTTP/2).")
    var http1 = false

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0...65535") }
        guard (0...1).contains(errorRate) else { throw ValidationError("--error-rate must be between 0 and 1") }
        guard maxStreams > 0 else { throw ValidationError("--max-streams must be positive") }
        if key != nil, team == nil { throw ValidationError("--key needs --team (the JWT issuer)") }
    }

    func run() async throws {
        do {
            try await serve()
        } catch {
            throw Console.fail(error)
        }
    }

    func signingKeys() throws(NorqError) -> (keys: [String: String], team: String?) {
        var keys: [String: String] = [:]
        var teams: Set<String> = []
        if let config {
            let configuration = try ConfigOptions(config: config).loadConfiguration()
            let credentials = try EmulatorSetup.credentials(of: configuration, requireAPNs: !fcm)
            keys = credentials.keys
            teams = credentials.teams
        }
        if let key {
            guard let data = FileManager.default.contents(atPath: key) else {
                throw NorqError(.cliFileNotFound, "--key: no such file '\(key)'")
            }
            let name = (key as NSString).lastPathComponent
            var id = keyId
            if id == nil, name.hasPrefix("AuthKey_"), name.hasSuffix(".p8") {
                id = String(name.dropFirst("AuthKey_".count).dropLast(3))
            }
            guard let id else {
                throw NorqError(.cliInvalidOption, "--key needs --key-id (or a file named AuthKey_<KEYID>.p8)")
            }
            keys[id] = try EmulatorSetup.publicKeyPEM(fromPEM: String(decoding: data, as: UTF8.self), source: "--key \(key)")
        }
        if let team { teams = [team] }
        return (keys, teams.count == 1 ? teams.first : nil)
    }

    func serve() async throws(NorqError) {
        if webpush {
            try await serveWebPush()
            return
        }
        let (keys, teamID) = try signingKeys()
        let faults = APNsEmulator.Faults(
            unregisteredTokens: Dictionary(unregistered.map { ($0, Int64(Date().timeIntervalSince1970 * 1000)) },
                                           uniquingKeysWith: { a, _ in a }),
            badTokens: Set(badToken), errorRate: errorRate, errorStatus: errorStatus, errorReason: errorReason,
            retryAfterSeconds: retryAfter, latency: .milliseconds(latencyMs), silentTokens: Set(silentToken),
            goAwayAfterStreams: goawayAfter, dropConnectionAfterStreams: dropAfter)
        let emulator: APNsEmulator
        // Requests are printed as the emulator records them (the newest 10,000 wait when the terminal is slow).
        let (requests, printer) = AsyncStream.makeStream(of: RecordedRequest.self,
                                                         bufferingPolicy: .bufferingNewest(10_000))
        do {
            var configuration = APNsEmulator.Configuration(
                host: host, port: port, teamID: teamID, signingKeys: keys,
                bundleIDs: bundleId.isEmpty ? nil : Set(bundleId), requireClientCertificate: requireClientCert,
                maxConcurrentStreams: maxStreams, recordRequests: logRequests, recordBodies: logRequests,
                faults: faults)
            // Nothing reads the records here: keep few.
            configuration.recordLimit = 1_000
            if logRequests { configuration.onRequest = { printer.yield($0) } }
            emulator = try APNsEmulator(configuration: configuration)
            try await emulator.start()
        } catch {
            throw NorqError(.cliEmulatorFailed, "the APNs emulator could not start on \(host):\(port): \(error)")
        }
        let caPath = caOut ?? (NSTemporaryDirectory() as NSString)
            .appendingPathComponent("norq-emulator-\(getpid())-\(emulator.port)-ca.pem")
        do {
            try emulator.writeCACertificate(to: caPath)
        } catch {
            try? await emulator.shutdown()
            throw NorqError(.cliEmulatorFailed, "cannot write the CA certificate to \(caPath): \(error)")
        }
        var banner = "APNs emulator listening on \(emulator.endpoint)\n"
        banner += "CA certificate: \(caPath)\n"
        if requireClientCert {
            banner += "auth: client certificates signed by the emulator CA\n"
        } else if keys.isEmpty {
            banner += "auth: JWTs are not checked (give --key/--team or --config to verify them)\n"
        } else {
            let list = keys.keys.sorted().map { "kid=\($0)" }.joined(separator: ", ")
            banner += "auth: ES256 JWT with \(list)\(teamID.map { " iss=\($0)" } ?? " (any team)")\n"
        }
        banner += "norq.yaml: endpoint: \(emulator.endpoint)  caPath: \(caPath)\n"
        var fcmEmulator: FCMEmulator?
        var fcmCAPath: String?
        if fcm {
            let (started, path, lines) = try await startFCM()
            fcmEmulator = started
            fcmCAPath = path
            banner += lines
        }
        var expoEmulator: ExpoEmulator?
        var expoCAPath: String?
        if expo {
            let (started, path, lines) = try await startExpo()
            expoEmulator = started
            expoCAPath = path
            banner += lines
        }
        banner += "Ctrl-C to stop.\n"
        Console.out(banner)

        await Self.waitForSignal(printing: logRequests ? requests : nil)
        printer.finish()
        try? await emulator.shutdown()
        try? await fcmEmulator?.shutdown()
        try? await expoEmulator?.shutdown()
        if let expoCAPath { try? FileManager.default.removeItem(atPath: expoCAPath) }
        if caOut == nil { try? FileManager.default.removeItem(atPath: caPath) }
        if let fcmCAPath { try? FileManager.default.removeItem(atPath: fcmCAPath) }
        Console.err("emulator stopped\n")
    }

    /// Starts the FCM emulator trusting the FCM service accounts of `--config` and `--service-account`; returns it,
    /// the path of its CA certificate and the banner lines.
    func startFCM() async throws(NorqError) -> (FCMEmulator, String, String) {
        var accounts: [FCMServiceAccount] = []
        if let config { accounts += EmulatorSetup.fcmServiceAccounts(of: try ConfigOptions(config: config).loadConfiguration()) }
        for path in serviceAccount {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw NorqError(.cliFileNotFound, "--service-account: no such file '\(path)'")
            }
            accounts.append(try FCMServiceAccount(json: String(decoding: data, as: UTF8.self),
                                                  location: SourceLocation(file: path)))
        }
        guard !accounts.isEmpty else {
            throw NorqError(.cliInvalidOption, "--fcm needs a service account to trust: --service-account PATH, or a --config with an FCM provider",
                            hint: "the demo one: --service-account examples/keys/fcm-service-account-DEMO.json")
        }
        let faults = FCMEmulator.Faults(
            unregisteredTokens: Set(unregistered), silentTokens: Set(silentToken), errorRate: errorRate,
            errorAnswer: .code(errorStatus == 429 ? "QUOTA_EXCEEDED" : "UNAVAILABLE", retryAfterSeconds: retryAfter),
            latency: .milliseconds(latencyMs), goAwayAfterStreams: goawayAfter, dropConnectionAfterStreams: dropAfter)
        let emulator = try await EmulatorSetup.startFCM(accounts: accounts, host: host, port: fcmPort,
                                                        recordRequests: logRequests, faults: faults)
        let caPath = (NSTemporaryDirectory() as NSString)
            .appendingPathComponent("norq-fcm-emulator-\(getpid())-\(emulator.port)-ca.pem")
        do {
            try emulator.writeCACertificate(to: caPath)
        } catch {
            try? await emulator.shutdown()
            throw NorqError(.cliEmulatorFailed, "cannot write the FCM emulator's CA certificate to \(caPath): \(error)")
        }
        var lines = "FCM emulator listening on \(emulator.endpoint)\n"
        lines += "FCM CA certificate: \(caPath)\n"
        lines += "FCM auth: RS256 assertions of " + accounts.map(\.clientEmail).joined(separator: ", ") + "\n"
        lines += "norq.yaml (fcm): endpoint: \(emulator.endpoint)  tokenEndpoint: \(emulator.tokenEndpoint)  caPath: \(caPath)\n"
        return (emulator, caPath, lines)
    }

    /// Waits for SIGINT or SIGTERM; meanwhile prints the requests of `printing` as they come.
    static func waitForSignal(printing: AsyncStream<RecordedRequest>?) async {
        let (signals, continuation) = AsyncStream.makeStream(of: Int32.self)
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            sources.append(source)
        }
        await withTaskGroup(of: Void.self) { group in
            if let printing {
                group.addTask {
                    for await record in printing { Console.out(requestJSON(record).compactDescription + "\n") }
                }
            }
            group.addTask { for await _ in signals { break } }
            // The first to end is the signal (the printer ends only when cancelled).
            await group.next()
            group.cancelAll()
        }
        sources.forEach { $0.cancel() }
    }

    static func requestJSON(_ record: RecordedRequest) -> JSONValue {
        [
            "method": .string(record.method),
            "path": .string(record.path),
            "authority": .string(record.authority),
            "headers": .array(record.headers.map { ["name": .string($0.name), "value": .string($0.value)] }),
            "bodyText": .string(String(decoding: record.body, as: UTF8.self)),
            "bodyBytes": .int(Int64(record.body.count)),
            "status": .int(Int64(record.status)),
            "reason": .optional(record.reason),
            "apnsId": .optional(record.apnsID),
        ]
    }
}

extension ConfigOptions {
    init(config: String?, templates: String? = nil) {
        self.init()
        self.config = config
        self.templates = templates
    }
}
