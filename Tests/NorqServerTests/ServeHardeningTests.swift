import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import NorqCore
import NorqTesting
import Testing

/// `norq serve` over real TLS, against slow clients and against floods of requests without a valid key.
@Suite(.serialized) struct ServeHardeningTests {
    /// A CA and a server certificate for 127.0.0.1 / localhost, written as PEM files to a temporary directory.
    static func writeCertificates() throws -> (directory: URL, ca: String, cert: String, key: String) {
        let certificates = try EmulatorCertificates()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("norq-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let cert = directory.appendingPathComponent("server.pem").path
        let key = directory.appendingPathComponent("server.key").path
        try certificates.serverCertificatePEM.write(toFile: cert, atomically: true, encoding: .utf8)
        try certificates.serverPrivateKeyPEM.write(toFile: key, atomically: true, encoding: .utf8)
        return (directory, certificates.caCertificatePEM, cert, key)
    }

    /// `/readyz` asks every provider: once APNs cannot be reached (its last connection attempt failed, none open),
    /// the server says it is not ready and which provider, and says nothing secret.
    @Test func readyzReportsAProviderThatCannotConnect() async throws {
        let served = try await ServedNorq.start()
        defer { served.cleanupNow() }
        #expect(try await served.request("GET", "/readyz", key: nil).status == 200)
        // APNs goes away before any connection was made; a send makes the worker try to connect.
        try await served.emulator.shutdown()
        let token = "a" + String(repeating: "0", count: 62) + "1"
        let body: JSONValue = ["template": "order-shipped", "sample": "Default", "to": [.string(token)]]
        #expect(try await served.request("POST", "/v1/sends", json: body).status == 202)
        var answer = try await served.request("GET", "/readyz", key: nil)
        let end = ContinuousClock.now.advanced(by: .seconds(20))
        while answer.status == 200, ContinuousClock.now < end {
            try await Task.sleep(for: .milliseconds(100))
            answer = try await served.request("GET", "/readyz", key: nil)
        }
        #expect(answer.status == 503, "\(answer.text.prefix(300))")
        #expect(answer.errorCode == "server/not-ready")
        #expect(answer.text.contains("apns cannot connect to https://localhost:"), "\(answer.text.prefix(300))")
        #expect(!answer.text.contains(ServedNorq.fullKey))
    }

    @Test func servesHTTPSWithTheConfiguredCertificate() async throws {
        let tls = try Self.writeCertificates()
        defer { try? FileManager.default.removeItem(at: tls.directory) }
        let served = try await ServedNorq.start(serverExtra: "  tls: { certPath: \(tls.cert), keyPath: \(tls.key) }")
        defer { served.cleanupNow() }
        let out = try FileManager.default.contentsOfDirectory(atPath: served.directory.path)
            .filter { $0.hasPrefix("serve-") && $0.hasSuffix(".out") }
            .compactMap { try? String(contentsOfFile: served.directory.appendingPathComponent($0).path, encoding: .utf8) }
            .joined()
        #expect(out.contains("listening on https://127.0.0.1:\(served.port)"), "\(out)")

        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(tls.ca.utf8), format: .pem)])
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: configuration))
        do {
            var health = HTTPClientRequest(url: "https://127.0.0.1:\(served.port)/healthz")
            health.method = .GET
            let healthAnswer = try await client.execute(health, timeout: .seconds(10))
            #expect(healthAnswer.status.code == 200)

            var send = HTTPClientRequest(url: "https://localhost:\(served.port)/v1/sends")
            send.method = .POST
            send.headers.add(name: "Authorization", value: "Bearer \(ServedNorq.fullKey)")
            send.headers.add(name: "Content-Type", value: "application/json")
            send.body = .bytes(ByteBuffer(bytes: ServeEndToEndTests.sendBody([ServeEndToEndTests.token(77)]).serialized()))
            let answer = try await client.execute(send, timeout: .seconds(10))
            #expect(answer.status.code == 202)
            let body = try await answer.body.collect(upTo: 1 << 16)
            let json = try JSONValue(parsing: Array(body.readableBytesView))
            #expect(json["status"]?.stringValue == "accepted")

            // A client that does not trust the server's CA is refused by its own verification: the server presents
            // the configured certificate, not some default.
            let untrusting = HTTPClient(eventLoopGroupProvider: .singleton)
            await #expect(throws: (any Error).self) {
                _ = try await untrusting.execute(health, timeout: .seconds(10))
            }
            try await untrusting.shutdown()
        } catch {
            try await client.shutdown()
            throw error
        }
        try await client.shutdown()
        // Plain HTTP on the TLS port gets no HTTP answer.
        await #expect(throws: (any Error).self) { _ = try await served.request("GET", "/healthz", key: nil) }
    }

    @Test func refusesToStartWithAnUnusableCertificate() async throws {
        let tls = try Self.writeCertificates()
        defer { try? FileManager.default.removeItem(at: tls.directory) }
        let other = try Self.writeCertificates()
        defer { try? FileManager.default.removeItem(at: other.directory) }
        let served = try await ServedNorq.start()
        defer { served.cleanupNow() }
        let base = try String(contentsOf: served.config, encoding: .utf8)
        let cases = [
            ("  tls: { certPath: \(tls.directory.path)/missing.pem, keyPath: \(tls.key) }", "missing.pem"),
            ("  tls: { certPath: \(tls.cert), keyPath: \(tls.cert) }", "keyPath"),
            ("  tls: { certPath: \(tls.cert), keyPath: \(other.key) }", "do not make a TLS context"),
        ]
        for (line, expected) in cases {
            let config = served.directory.appendingPathComponent("tls-\(UUID().uuidString.prefix(6)).yaml")
            try (base + line + "\n").write(to: config, atomically: true, encoding: .utf8)
            let (status, output) = try ServedNorq.runToExit(["-c", config.path, "--port", "0"], in: served.directory)
            #expect(status == 1, "\(output)")
            #expect(output.contains("server/invalid-tls") && output.contains(expected), "\(output)")
            #expect(!output.contains("PRIVATE KEY"), "no key material in the message")
        }
    }

    @Test func aClientTricklingItsBodyIsDisconnected() async throws {
        let served = try await ServedNorq.start(
            limits: "{ ratePerSecond: 100000, burst: 100000, bodyTimeout: 500ms, idleTimeout: 30s }")
        defer { served.cleanupNow() }
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: served.port).get()
        let head = "POST /v1/sends HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(ServedNorq.fullKey)\r\n"
            + "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"template\""
        try await channel.writeAndFlush(ByteBuffer(string: head))
        let started = ContinuousClock.now
        // The rest of the body never comes: the server closes the connection after the body timeout, well before
        // its 30 s idle timeout.
        let closed = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask { try await channel.closeFuture.get(); return true }
            group.addTask { try await Task.sleep(for: .seconds(15)); return false }
            let first = try await group.next() ?? false
            group.cancelAll()
            return first
        }
        if !closed { try await channel.close() }
        #expect(closed, "the server closed the connection")
        #expect(ContinuousClock.now - started < .seconds(15))
        // Everyone else is served as before.
        #expect(try await served.request("GET", "/healthz", key: nil).status == 200)
        #expect(try await served.request("POST", "/v1/sends", json: ServeEndToEndTests.sendBody([ServeEndToEndTests.token(5)])).status == 202)
        let metrics = try await served.request("GET", "/metrics")
        #expect(metrics.text.contains("norq_http_slow_clients_closed_total 1"), "\(metrics.text.prefix(2000))")
    }

    @Test func aFloodWithoutAValidKeyGets429AndValidKeysStillPass() async throws {
        let served = try await ServedNorq.start()
        defer { served.cleanupNow() }
        var statuses: [Int] = []
        for _ in 0..<40 {
            let answer = try await served.request("POST", "/v1/validate", key: "wrong-key-0123456789abcdef", json: [:])
            statuses.append(answer.status)
            if answer.status == 429 {
                #expect(answer.errorCode == "server/rate-limited")
                #expect(Int(answer.header("Retry-After") ?? "") ?? 0 >= 1)
            }
        }
        #expect(statuses.prefix(20).allSatisfy { $0 == 401 }, "\(statuses)")
        #expect(statuses.contains(429), "past 20 at once, failed attempts are limited: \(statuses)")
        #expect(Set(statuses).isSubset(of: [401, 429]))
        // A valid key from the same address is not affected.
        #expect(try await served.request("POST", "/v1/validate", json: [:]).status == 200)
    }
}
