import Foundation
import Logging
import NorqCore
import NorqStore
import NorqStorePostgres
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A listening TCP socket on 127.0.0.1 that never accepts nor answers (the kernel completes the handshake).
final class SilentPostgresServer {
    let socket: Int32
    let port: Int
    init() throws {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(socket, 16) == 0 else { throw NorqError(.storeFailed, "cannot listen") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        self.socket = socket
        self.port = Int(UInt16(bigEndian: address.sin_port))
    }
    deinit { close(socket) }
}

/// Keeps every log message and its metadata, at every level.
struct CapturingLogHandler: LogHandler {
    let captured: CapturedLogLines
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String,
             file: String, function: String, line: UInt) {
        let all = self.metadata.merging(metadata ?? [:]) { $1 }
        captured.lines.withLock { $0.append("\(message) \(all)") }
    }
}

final class CapturedLogLines: Sendable {
    let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
}

/// The issue's "bad input" for PostgreSQL that needs no server: a server that accepts connections and never
/// answers (every call has a deadline: a clear error naming the host, no hang), and a password that appears in no
/// log line, error message or hint.
@Suite struct PostgresBadInputTests {
    static func migrate(_ configuration: PostgresStoreConfiguration, logger: Logger,
                        timeout: Duration) async throws -> NorqError? {
        let store = PostgresDeliveryStore(configuration: configuration,
                                          settings: DeliveryStoreSettings(callTimeout: timeout), logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await store.run() }
            defer { group.cancelAll() }
            do {
                try await store.migrate()
                return nil
            } catch let error as NorqError {
                return error
            }
        }
    }

    @Test func silentServerIsAClearErrorNamingTheHostWithinTheDeadline() async throws {
        let server = try SilentPostgresServer()
        let configuration = PostgresStoreConfiguration(host: "127.0.0.1", port: server.port, username: "norq",
                                                       password: "hunter2-secret", database: "norq", tls: .disable)
        var quiet = Logger(label: "norq.test.silent")
        quiet.logLevel = .critical
        let started = ContinuousClock.now
        let error = try await Self.migrate(configuration, logger: quiet, timeout: .seconds(2))
        let took = ContinuousClock.now - started
        #expect(error?.code == .storeUnreachable)
        #expect(error?.message.contains("127.0.0.1:\(server.port)") == true, "\(String(describing: error))")
        #expect(took < .seconds(10), "every database call has a deadline: \(took)")
        #expect(error.map { !"\($0.message) \($0.hint ?? "")".contains("hunter2") } == true)
    }

    @Test func thePasswordIsNeverLoggedNorInAnError() async throws {
        // A port nothing listens on: connecting fails and is retried and logged (at every level here).
        let server = try SilentPostgresServer()
        let port = server.port
        let closed = PostgresStoreConfiguration(host: "127.0.0.1", port: port == 65535 ? 1 : port + 1,
                                                username: "norq", password: "hunter2-secret", database: "norq",
                                                tls: .disable)
        let captured = CapturedLogLines()
        let logger = Logger(label: "norq.test.password") { _ in CapturingLogHandler(captured: captured) }
        let refused = try await Self.migrate(closed, logger: logger, timeout: .seconds(2))
        #expect(refused?.code == .storeUnreachable)
        // The same against a silent server (the startup message is sent, no answer).
        let silent = PostgresStoreConfiguration(host: "127.0.0.1", port: port, username: "norq",
                                                password: "hunter2-secret", database: "norq", tls: .disable)
        let timedOut = try await Self.migrate(silent, logger: logger, timeout: .seconds(1))
        #expect(timedOut?.code == .storeUnreachable)
        for error in [refused, timedOut].compactMap({ $0 }) {
            #expect(!"\(error) \(error.message) \(error.hint ?? "")".contains("hunter2"))
        }
        #expect(!captured.all.isEmpty, "the logger saw the connection attempts")
        for line in captured.all { #expect(!line.contains("hunter2"), "logged: \(line)") }
        #expect(!"\(closed)".contains("hunter2"))
    }
}
