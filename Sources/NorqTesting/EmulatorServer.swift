import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// The TLS HTTP/2 listener the emulators (APNs, FCM, Expo) and ``EmulatorHTTP2Server`` share: their certificate, ALPN `h2`, and an `NIOHTTP2Handler`
/// tuned for fault tests, in front of the emulator's own connection handler (raw frames, no stream channels).
enum EmulatorServer {
    /// The server's TLS context from the emulator's certificates; with `requireClientCertificate`, clients must
    /// present a certificate signed by the emulator's CA (mutual TLS, as APNs certificate auth).
    static func tlsContext(_ certificates: EmulatorCertificates, requireClientCertificate: Bool = false) throws -> NIOSSLContext {
        let serverCert = try NIOSSLCertificate(bytes: Array(certificates.serverCertificatePEM.utf8), format: .pem)
        let serverKey = try NIOSSLPrivateKey(bytes: Array(certificates.serverPrivateKeyPEM.utf8), format: .pem)
        var tls: TLSConfiguration
        if requireClientCertificate {
            let ca = try NIOSSLCertificate(bytes: Array(certificates.caCertificatePEM.utf8), format: .pem)
            tls = .makeServerConfigurationWithMTLS(
                certificateChain: [.certificate(serverCert)], privateKey: .privateKey(serverKey),
                trustRoots: .certificates([ca]))
            tls.certificateVerification = .noHostnameVerification
        } else {
            tls = .makeServerConfiguration(certificateChain: [.certificate(serverCert)], privateKey: .privateKey(serverKey))
        }
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        return try NIOSSLContext(configuration: tls)
    }

    /// The listener's socket options, shared by every emulator: a backlog for bursts of connections, the port
    /// reusable at once after a restart, no Nagle delay on answers.
    static func bootstrap(group: any EventLoopGroup) -> ServerBootstrap {
        ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
    }

    /// Binds `host:port` (0: any free port). Each connection gets TLS, then (with `coalesceWrites`) a
    /// ``WriteCoalescingHandler``, then HTTP/2 announcing `maxConcurrentStreams()` (read per connection: a test
    /// may lower it), then what `addConnectionHandler` adds.
    static func bind(group: any EventLoopGroup, host: String, port: Int, sslContext: NIOSSLContext,
                     coalesceWrites: Bool, maxConcurrentStreams: @escaping @Sendable () -> Int,
                     addConnectionHandler: @escaping @Sendable (ChannelPipeline.SynchronousOperations) throws -> Void)
        async throws -> any Channel {
        let bootstrap = Self.bootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let maxStreams = maxConcurrentStreams()
                    var connection = NIOHTTP2Handler.ConnectionConfiguration()
                    connection.initialSettings = [
                        HTTP2Setting(parameter: .maxConcurrentStreams, value: maxStreams),
                        HTTP2Setting(parameter: .maxHeaderListSize, value: HPACKDecoder.defaultMaxHeaderListSize),
                        HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
                    ]
                    // Fault tests reset and refuse streams by the thousand: NIOHTTP2's abuse limits would close
                    // the connection first.
                    connection.maximumConnectionGlitches = 1_000_000
                    // NIOHTTP2 remembers only this many streams it closed without their end (by RST_STREAM or by a
                    // GOAWAY's last-stream-id); a DATA frame for a forgotten one is a connection error that also
                    // drops the rest of the read batch, i.e. other streams' DATA below the GOAWAY. The default (32)
                    // is far below the hundreds of streams a burst leaves above a GOAWAY.
                    connection.maximumRecentlyResetStreams = max(32, 2 * maxStreams)
                    var stream = NIOHTTP2Handler.StreamConfiguration()
                    stream.streamResetFrameRateLimit.maximumCount = 1_000_000
                    stream.streamErrorRateLimit.maximumCount = 1_000_000
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                    if coalesceWrites { try sync.addHandler(WriteCoalescingHandler()) }
                    try sync.addHandler(NIOHTTP2Handler(
                        mode: .server, connectionConfiguration: connection, streamConfiguration: stream))
                    try addConnectionHandler(sync)
                }
            }
        return try await bootstrap.bind(host: host, port: port).get()
    }
}
