import AsyncHTTPClient
import Foundation
import NIOCore
import NIOSSL
import NorqCore
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A renewed server certificate is served to new connections after a SIGHUP, without a restart; a certificate
/// that does not load keeps the current one.
@Suite(.serialized) struct ServeTLSReloadTests {
    /// The status of `GET /healthz` over a new HTTPS connection from a client that trusts only `ca`; nil when the
    /// handshake fails (the server presented a certificate that CA did not issue).
    static func health(port: Int, trusting ca: String) async throws -> Int? {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(ca.utf8), format: .pem)])
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: configuration))
        var request = HTTPClientRequest(url: "https://127.0.0.1:\(port)/healthz")
        request.method = .GET
        let status: Int?
        do {
            status = Int(try await client.execute(request, timeout: .seconds(10)).status.code)
        } catch {
            status = nil
        }
        try await client.shutdown()
        return status
    }

    @Test func sighupServesARenewedCertificateToNewConnectionsAndKeepsTheOldOneWhenTheNewIsBad() async throws {
        let a = try ServeHardeningTests.writeCertificates()
        defer { try? FileManager.default.removeItem(at: a.directory) }
        let b = try ServeHardeningTests.writeCertificates()
        defer { try? FileManager.default.removeItem(at: b.directory) }
        let served = try await ServedNorq.start(serverExtra: "  tls: { certPath: \(a.cert), keyPath: \(a.key) }")
        defer { served.cleanupNow() }
        #expect(try await Self.health(port: served.port, trusting: a.ca) == 200)
        #expect(try await Self.health(port: served.port, trusting: b.ca) == nil, "the server presents A")

        // The renewal: B's files replace A's at the same paths. Until the reload, new connections still get A.
        try String(contentsOfFile: b.cert, encoding: .utf8).write(toFile: a.cert, atomically: true, encoding: .utf8)
        try String(contentsOfFile: b.key, encoding: .utf8).write(toFile: a.key, atomically: true, encoding: .utf8)
        #expect(try await Self.health(port: served.port, trusting: a.ca) == 200)
        kill(served.process.processIdentifier, SIGHUP)
        try await ServeEndToEndTests.waitUntil("the reload") { served.log.contains("TLS certificate reloaded") }
        #expect(try await Self.health(port: served.port, trusting: b.ca) == 200, "a new connection gets B")
        #expect(try await Self.health(port: served.port, trusting: a.ca) == nil, "and no longer A")

        // A broken certificate file: the reload is refused, B stays, and the log says why.
        try "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"
            .write(toFile: a.cert, atomically: true, encoding: .utf8)
        kill(served.process.processIdentifier, SIGHUP)
        try await ServeEndToEndTests.waitUntil("the failed reload") { served.log.contains("reload failed") }
        #expect(served.log.contains("server/invalid-tls"), "\(served.log.suffix(2000))")
        #expect(try await Self.health(port: served.port, trusting: b.ca) == 200, "the current certificate stays")

        // A key that is not the certificate's: refused the same way.
        try String(contentsOfFile: b.cert, encoding: .utf8).write(toFile: a.cert, atomically: true, encoding: .utf8)
        let other = try ServeHardeningTests.writeCertificates()
        defer { try? FileManager.default.removeItem(at: other.directory) }
        try String(contentsOfFile: other.key, encoding: .utf8).write(toFile: a.key, atomically: true, encoding: .utf8)
        let failuresBefore = served.log.components(separatedBy: "reload failed").count
        kill(served.process.processIdentifier, SIGHUP)
        try await ServeEndToEndTests.waitUntil("the second failed reload") {
            served.log.components(separatedBy: "reload failed").count > failuresBefore
        }
        #expect(served.log.contains("do not make a TLS context"), "\(served.log.suffix(2000))")
        #expect(!served.log.contains("PRIVATE KEY"), "no key material in the log")
        #expect(try await Self.health(port: served.port, trusting: b.ca) == 200)
        #expect(try await served.stop() == 0)
    }
}
