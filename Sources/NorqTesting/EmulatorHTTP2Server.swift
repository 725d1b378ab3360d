import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// A TLS HTTP/2 server (ALPN `h2`, a self-signed CA of its own) on 127.0.0.1 whose requests an
/// ``EmulatorHTTP2Service`` answers through ``EmulatorHTTP2Handler``: what a purpose-built sink needs (the benchmarks'
/// Expo sink) without the emulators' rules.
public final class EmulatorHTTP2Server<Service: EmulatorHTTP2Service>: Sendable {
    private let service: Service
    private let host: String
    private let maxConcurrentStreams: Int
    private let certificates: EmulatorCertificates
    private let sslContext: NIOSSLContext
    private let lifecycle: Mutex<(channel: (any Channel)?, port: Int)>

    /// `port` 0 picks a free port; `maxConcurrentStreams` is advertised in SETTINGS.
    public init(service: Service, host: String = "127.0.0.1", port: Int = 0, maxConcurrentStreams: Int = 1000) throws {
        self.service = service
        self.host = host
        self.maxConcurrentStreams = maxConcurrentStreams
        let certificates = try EmulatorCertificates()
        self.certificates = certificates
        self.sslContext = try EmulatorServer.tlsContext(certificates)
        self.lifecycle = Mutex((nil, port))
    }

    /// Binds and starts accepting connections; afterwards ``port`` is the bound port.
    public func start() async throws {
        let (service, maxStreams) = (self.service, maxConcurrentStreams)
        let channel = try await EmulatorServer.bind(
            group: MultiThreadedEventLoopGroup.singleton, host: host, port: lifecycle.withLock { $0.port },
            sslContext: sslContext, coalesceWrites: false, maxConcurrentStreams: { maxStreams },
            addConnectionHandler: { try $0.addHandler(EmulatorHTTP2Handler(service: service)) })
        let bound = channel.localAddress?.port ?? 0
        lifecycle.withLock { $0 = (channel, bound) }
    }

    public var port: Int { lifecycle.withLock { $0.port } }

    /// PEM of the server's self-signed CA.
    public var caCertificatePEM: String { certificates.caCertificatePEM }

    public func writeCACertificate(to path: String) throws {
        try Data(caCertificatePEM.utf8).write(to: URL(fileURLWithPath: path))
    }

    /// Stops listening (open connections end with their clients).
    public func shutdown() async {
        let channel = lifecycle.withLock { s -> (any Channel)? in
            defer { s.channel = nil }
            return s.channel
        }
        try? await channel?.close().get()
    }
}
