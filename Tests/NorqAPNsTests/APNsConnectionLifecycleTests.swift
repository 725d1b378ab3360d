import Crypto
import Foundation
import NorqAPNs
import NorqCore
import NorqTesting
import Testing

/// Connection lifecycle against the emulator: idle PING replacing a dead connection, reconnecting after the
/// server went away, draining at shutdown, PKCS#12 client certificates.
@Suite(.serialized, .timeLimit(.minutes(1))) struct APNsConnectionLifecycleTests {
    typealias E2E = APNsEndToEndTests

    /// Polls `condition` every 20 ms for at most `timeout`.
    static func eventually(_ timeout: Duration = .seconds(5), _ condition: () -> Bool) async -> Bool {
        let end = ContinuousClock.now + timeout
        while ContinuousClock.now < end {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    @Test func idlePingReplacesADeadConnection() async throws {
        let proxy = ConnectProxy()
        try await proxy.start()
        let s = try await E2E.setup(configureProvider: {
            $0.proxy = APNsEndpoint(host: "127.0.0.1", port: proxy.port)
            $0.pingInterval = .milliseconds(300)
        })
        #expect(try await E2E.send(s.provider, PushContent(title: "before")).status == 200)
        #expect(s.emulator.openConnectionCount == 1)
        // The tunnel now swallows everything: the connection is dead but not closed. Only an unanswered
        // PING can tell (two ping intervals); the pool must then stop using it at once, even though closing
        // TLS waits for a close_notify the dead peer never sends.
        proxy.stallOpenTunnels()
        try await Task.sleep(for: .milliseconds(2_500))
        #expect(await E2E.outcome(s.provider, PushContent(title: "after"), token: Fixtures.iosToken(),
                                  timeout: .seconds(5)) == "200")
        #expect(s.emulator.connectionCount == 2 && proxy.connectCount == 2)
        await E2E.close(s)
        try? await proxy.shutdown()
    }

    @Test func errorBodiesBeyondTheConnectionWindowDoNotStallTheConnection() async throws {
        // 1 KB error bodies: 100 of them exceed the 65,535-byte connection receive window unless the client
        // hands the window back with WINDOW_UPDATE.
        let reason = String(repeating: "X", count: 1_000)
        let s = try await E2E.setup { $0.faults = .init(errorRate: 1, errorStatus: 400, errorReason: reason) }
        var reasons: [String] = []
        for start in stride(from: 0, to: 100, by: 20) {
            let batch = try await withThrowingTaskGroup(of: String.self) { group in
                for i in start..<(start + 20) {
                    group.addTask {
                        let r = try await E2E.send(s.provider, PushContent(title: "\(i)"), token: Fixtures.iosToken(E2E.token(i)),
                                                   timeout: .seconds(5))
                        return "\(r.status) \(r.reason == reason)"
                    }
                }
                var all: [String] = []
                for try await item in group { all.append(item) }
                return all
            }
            reasons += batch
        }
        #expect(reasons == Array(repeating: "400 true", count: 100))
        #expect(s.emulator.connectionCount == 1)
        await E2E.close(s)
    }

    @Test func idleConnectionAnsweringPingsIsKept() async throws {
        let s = try await E2E.setup(configureProvider: { $0.pingInterval = .seconds(1) })
        #expect(try await E2E.send(s.provider, PushContent(title: "before")).status == 200)
        try await Task.sleep(for: .milliseconds(2_500))
        #expect(try await E2E.send(s.provider, PushContent(title: "after")).status == 200)
        #expect(s.emulator.connectionCount == 1)
        await E2E.close(s)
    }

    @Test func reconnectsAfterTheServerWentAwayAndCameBackOnTheSamePort() async throws {
        let s = try await E2E.setup()
        #expect(try await E2E.send(s.provider, PushContent(title: "first")).status == 200)
        let port = s.emulator.port
        try await s.emulator.shutdown()
        #expect(await Self.eventually { s.emulator.openConnectionCount == 0 })
        // Nobody listens: requests fail fast with a transport error (not a hang until the deadline).
        let clock = ContinuousClock()
        let started = clock.now
        let down = await E2E.outcome(s.provider, PushContent(title: "down"), token: Fixtures.iosToken(), timeout: .seconds(5))
        #expect(down == "provider/transport-failed")
        #expect(started.duration(to: clock.now) < .seconds(4))
        // Back on the same port: requests succeed again (after the jittered reconnect backoff).
        try await s.emulator.start()
        #expect(s.emulator.port == port)
        var statuses: [String] = []
        for i in 0..<5 {
            statuses.append(await E2E.outcome(s.provider, PushContent(title: "\(i)"), token: Fixtures.iosToken(), timeout: .seconds(5)))
        }
        #expect(statuses == Array(repeating: "200", count: 5))
        #expect(s.emulator.connectionCount == 2)
        await E2E.close(s)
    }

    @Test func reconnectsAfterARestartWithRequestsInFlight() async throws {
        let s = try await E2E.setup()
        #expect(try await E2E.send(s.provider, PushContent(title: "first")).status == 200)
        try await s.emulator.restart()
        // The old connection is gone; the next requests open a new one.
        let outcomes = await withTaskGroup(of: String.self) { group in
            for i in 0..<10 {
                group.addTask {
                    await E2E.outcome(s.provider, PushContent(title: "\(i)"), token: Fixtures.iosToken(E2E.token(i)))
                }
            }
            var all: [String] = []
            for await outcome in group { all.append(outcome) }
            return all
        }
        #expect(outcomes == Array(repeating: "200", count: 10))
        #expect(s.emulator.connectionCount == 2)
        await E2E.close(s)
    }

    @Test func shutdownDrainsRequestsInFlight() async throws {
        let s = try await E2E.setup()
        #expect(try await E2E.send(s.provider, PushContent(title: "warm")).status == 200)
        s.emulator.setFaults(.init(latency: .milliseconds(700)))
        let inFlight = Task {
            await withTaskGroup(of: String.self) { group in
                for i in 0..<20 {
                    group.addTask {
                        await E2E.outcome(s.provider, PushContent(title: "\(i)"), token: Fixtures.iosToken(E2E.token(i)))
                    }
                }
                var all: [String] = []
                for await outcome in group { all.append(outcome) }
                return all
            }
        }
        // Let the 20 requests reach the connection (they then wait 700 ms for their answers).
        try await Task.sleep(for: .milliseconds(250))
        await s.provider.shutdown()
        #expect(await E2E.outcome(s.provider, PushContent(title: "late"), token: Fixtures.iosToken()) == "provider/shut-down")
        let outcomes = await inFlight.value
        #expect(outcomes == Array(repeating: "200", count: 20))
        #expect(s.emulator.requests.filter { $0.status == 200 }.count == 21)
        // Connections are closed once drained.
        #expect(await Self.eventually { s.emulator.openConnectionCount == 0 })
        try? await s.emulator.shutdown()
    }

    static func openSSL() -> String? {
        for path in ["/usr/bin/openssl", "/usr/local/bin/openssl", "/bin/openssl"]
        where FileManager.default.isExecutableFile(atPath: path) { return path }
        return nil
    }

    @Test(.enabled(if: openSSL() != nil, "needs the openssl command to build a PKCS#12 file"))
    func certificateAuthWithPKCS12() async throws {
        let openssl = try #require(Self.openSSL())
        let clock = TestClock()
        let emulator = try await E2E.makeEmulator(key: P256.Signing.PrivateKey(), clock: clock) {
            $0.requireClientCertificate = true
        }
        let client = try emulator.makeClientCertificate(commonName: "Apple Push Services: com.example.app")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("norq-p12-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let certPath = directory.appendingPathComponent("cert.pem").path
        let keyPath = directory.appendingPathComponent("key.pem").path
        let p12Path = directory.appendingPathComponent("cert.p12").path
        try client.certificatePEM.write(toFile: certPath, atomically: true, encoding: .utf8)
        try client.privateKeyPEM.write(toFile: keyPath, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: openssl)
        process.arguments = ["pkcs12", "-export", "-in", certPath, "-inkey", keyPath, "-out", p12Path,
                             "-passout", "pass:s3cret", "-name", "norq-test"]
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "openssl pkcs12 -export failed")
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: p12Path)))

        var configuration = APNsConfiguration(
            authentication: .certificate(APNsCertificateCredentials(material: .pkcs12(bytes: bytes), passphrase: "s3cret",
                                                                    source: "cert.p12")),
            bundleID: Fixtures.bundleID)
        configuration.sandboxEndpoint = APNsEndpoint(host: "localhost", port: emulator.port)
        configuration.additionalTrustRootsPEM = emulator.caCertificatePEM
        let provider = try APNsProvider(name: "apns-p12", configuration: configuration, clock: clock.apnsClock)
        #expect(try await E2E.send(provider, APNsNotification.mdm(pushMagic: "magic").content).status == 200)
        #expect(try await E2E.send(provider, PushContent(title: "x")).status == 200)
        #expect(emulator.requests.count == 2 && emulator.requests.allSatisfy { $0.header("authorization") == nil })
        await provider.shutdown()

        // The wrong passphrase is a typed configuration error before anything is sent.
        configuration.authentication = .certificate(APNsCertificateCredentials(
            material: .pkcs12(bytes: bytes), passphrase: "wrong", source: "cert.p12"))
        do {
            _ = try APNsProvider(name: "apns-p12", configuration: configuration, clock: clock.apnsClock)
            Issue.record("a wrong PKCS#12 passphrase must be refused")
        } catch {
            #expect(error.code == .apnsInvalidCertificate)
        }
        // Without a client certificate the emulator refuses the TLS handshake.
        var tokenOnly = Fixtures.tokenConfiguration()
        tokenOnly.sandboxEndpoint = configuration.sandboxEndpoint
        tokenOnly.additionalTrustRootsPEM = emulator.caCertificatePEM
        let anonymous = try APNsProvider(name: "anon", configuration: tokenOnly, clock: clock.apnsClock,
                                         tokenCache: APNsTokenCache())
        #expect(await E2E.outcome(anonymous, PushContent(title: "x"), token: Fixtures.iosToken(), timeout: .seconds(3))
                == "provider/transport-failed")
        await anonymous.shutdown()
        try? await emulator.shutdown()
    }
}
