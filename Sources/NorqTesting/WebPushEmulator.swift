public import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// An in-process push service (RFC 8030) on 127.0.0.1 over TLS, HTTP/2 or HTTP/1.1: it issues subscriptions
/// (holding each user agent's private key and auth secret, as a browser does), **decrypts** every message
/// (RFC 8291, its own implementation), verifies the VAPID token (RFC 8292: ES256 signature with `k`, `aud` = this
/// origin, `exp` in the future and at most 24 h ahead, `sub`, and the subscription's `applicationServerKey`), and
/// enforces the request syntax.
///
/// Checks, in order: `POST` (405), path `/push/<id>` of a live subscription (404 unknown, 410 unsubscribed),
/// `Authorization` (401 missing when ``Configuration/requireVAPID``, 403 invalid or a key other than the
/// subscription's), `TTL` present, one non-negative integer (400), `Urgency` one of `very-low|low|normal|high`
/// (400), `Topic` at most 32 characters of the URL-safe base64 alphabet (400), `Content-Encoding: aes128gcm`
/// (400), body at most 4,096 bytes (413), decryption (400). Success is 201 with `Location` and the `TTL` used.
///
/// Faults (``Faults``, replaceable with ``setFaults(_:)``): scripted answers per subscription or for the next N
/// requests (404/410/413/429/5xx with `Retry-After`), silent subscriptions, latency, GOAWAY after N streams,
/// dropped connections.
public final class WebPushEmulator: Sendable {
    let shared: WebPushEmulatorShared
    private let certificates: EmulatorCertificates
    private let sslContext: NIOSSLContext
    private let group: any EventLoopGroup
    private let lifecycle: Mutex<(channel: (any Channel)?, port: Int)>

    public init(configuration: Configuration = .init()) throws {
        self.shared = WebPushEmulatorShared(configuration: configuration)
        let certificates = try EmulatorCertificates()
        self.certificates = certificates
        let serverCert = try NIOSSLCertificate(bytes: Array(certificates.serverCertificatePEM.utf8), format: .pem)
        let serverKey = try NIOSSLPrivateKey(bytes: Array(certificates.serverPrivateKeyPEM.utf8), format: .pem)
        var tls = TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(serverCert)],
                                                           privateKey: .privateKey(serverKey))
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = [configuration.httpVersion.rawValue]
        self.sslContext = try NIOSSLContext(configuration: tls)
        self.group = MultiThreadedEventLoopGroup.singleton
        self.lifecycle = Mutex((nil, configuration.port))
    }

    public var configuration: Configuration { shared.configuration }

    /// Binds and starts accepting connections; afterwards ``port`` is the bound port.
    public func start() async throws {
        let shared = self.shared
        let sslContext = self.sslContext
        let version = shared.configuration.httpVersion
        let bootstrap = EmulatorServer.bootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                    let connection = WebPushEmulatorConnection(id: shared.register(channel))
                    channel.closeFuture.whenComplete { _ in shared.unregister(connection.id) }
                    switch version {
                    case .http1:
                        try sync.configureHTTPServerPipeline(withErrorHandling: true)
                        try sync.addHandler(WebPushEmulatorHandler(shared: shared, connection: connection,
                                                                   httpVersion: "HTTP/1.1", streamID: nil))
                    case .http2:
                        var settings = NIOHTTP2Handler.ConnectionConfiguration()
                        settings.initialSettings = [
                            HTTP2Setting(parameter: .maxConcurrentStreams, value: shared.configuration.maxConcurrentStreams),
                            HTTP2Setting(parameter: .maxHeaderListSize, value: 16384),
                        ]
                        _ = try sync.configureHTTP2Pipeline(
                            mode: .server, connectionConfiguration: settings,
                            streamConfiguration: NIOHTTP2Handler.StreamConfiguration()
                        ) { stream in
                            stream.eventLoop.makeCompletedFuture {
                                let streamID = try stream.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)
                                let number = connection.openedStream(id: streamID.map(Int.init) ?? 0)
                                let faults = shared.streamFaults
                                if let last = connection.goAwayLastStreamID, let id = streamID.map(Int.init), id > last {
                                    // Above the GOAWAY's last-stream-id: not processed, and said so.
                                    stream.writeAndFlush(HTTP2Frame.FramePayload.rstStream(.refusedStream), promise: nil)
                                    return
                                }
                                if let n = faults.dropConnectionAfterStreams, number >= n {
                                    stream.parent?.close(promise: nil)
                                    return
                                }
                                if let n = faults.goAwayAfterStreams, number == n, let id = streamID {
                                    connection.goAwayLastStreamID = Int(id)
                                    let frame = HTTP2Frame(streamID: .rootStream,
                                                           payload: .goAway(lastStreamID: id, errorCode: .noError, opaqueData: nil))
                                    // After this read batch: a write from inside NIOHTTP2Handler's read loop is refused.
                                    stream.eventLoop.execute { stream.parent?.writeAndFlush(frame, promise: nil) }
                                }
                                let sync = stream.pipeline.syncOperations
                                try sync.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
                                try sync.addHandler(WebPushEmulatorHandler(shared: shared, connection: connection,
                                                                           httpVersion: "HTTP/2", streamID: streamID.map(Int.init)))
                            }
                        }
                    }
                }
            }
        let port = lifecycle.withLock { $0.port }
        let channel = try await bootstrap.bind(host: shared.configuration.host, port: port).get()
        let bound = channel.localAddress?.port ?? port
        lifecycle.withLock { $0 = (channel, bound) }
        shared.setPort(bound)
    }

    /// The bound port.
    public var port: Int { lifecycle.withLock { $0.port } }

    /// `https://<endpointHost>:PORT`: the origin of every endpoint (the VAPID `aud`).
    public var origin: String { shared.origin }

    /// PEM of the emulator's CA (its certificate names `127.0.0.1`, `::1` and `localhost`).
    public var caCertificatePEM: String { certificates.caCertificatePEM }

    /// Writes ``caCertificatePEM`` to `path`.
    public func writeCACertificate(to path: String) throws {
        try Data(caCertificatePEM.utf8).write(to: URL(fileURLWithPath: path))
    }

    /// Issues a subscription, as a browser's `pushManager.subscribe()` would (a fresh P-256 key pair and auth
    /// secret, kept here). With `applicationServerKey` (base64url VAPID public key) only that key is accepted.
    public func subscribe(applicationServerKey: String? = nil) -> Subscription {
        shared.subscribe(applicationServerKey: applicationServerKey)
    }

    /// Takes over a subscription made elsewhere (a demo subscription whose user-agent private key is published,
    /// as the CLI's quick start has): messages to `<origin>/push/<id>` are decrypted with these keys.
    ///
    /// - Parameter path: the subscription's own path (`/fcm/send/…` of its real endpoint), when the sender keeps
    ///   the endpoint and only moves its origin here (`norq send --emulator`); messages to `<origin><path>` (query
    ///   ignored) are then this subscription's too.
    public func adopt(id: String, userAgentPrivateKey: P256.KeyAgreement.PrivateKey, authSecret: [UInt8],
                      path: String? = nil) -> Subscription {
        shared.adopt(id: id, privateKey: userAgentPrivateKey, authSecret: authSecret, path: path)
    }

    /// Accepts messages to `<origin>/push/<id>` (and `<origin><path>`, as for ``adopt(id:userAgentPrivateKey:authSecret:path:)``)
    /// for a subscription whose private key it does not have (a subscription from a real browser, given to
    /// `norq send --emulator`): every check but decryption applies.
    public func adoptWithoutKeys(id: String, p256dh: String, auth: String, path: String? = nil) -> Subscription {
        shared.adoptWithoutKeys(id: id, p256dh: p256dh, auth: auth, path: path)
    }

    /// The subscription is gone (the user revoked permission): later messages get 410.
    public func unsubscribe(_ id: String) { shared.unsubscribe(id) }

    /// The decrypted plaintexts received for a subscription, in order.
    public func messages(for subscriptionID: String) -> [Message] {
        shared.state.withLock { $0.messages.all.filter { $0.subscriptionID == subscriptionID } }
    }

    /// Every request answered (or abandoned) so far.
    public var messages: [Message] { shared.state.withLock { $0.messages.all } }
    /// Messages dropped from ``messages`` to stay within ``Configuration/recordLimit``.
    public var droppedMessageCount: Int { shared.state.withLock { $0.messages.dropped } }

    public func resetMessages() { shared.state.withLock { $0.messages.removeAll() } }

    public func setFaults(_ faults: Faults) {
        shared.state.withLock {
            $0.faults = faults
            $0.attempts = [:]
            $0.burstIndex = 0
        }
    }

    /// Connections accepted so far, and open now.
    public var connectionCount: Int { shared.state.withLock { $0.connectionCount } }
    public var openConnectionCount: Int { shared.state.withLock { $0.channels.count } }

    /// Decrypts an `aes128gcm` body as a user agent would (for tests: the RFC 8291 vector, or bodies recorded
    /// elsewhere). Throws when the body does not decrypt.
    public static func decrypt(body: [UInt8], userAgentPrivateKey: P256.KeyAgreement.PrivateKey,
                               authSecret: [UInt8]) throws -> [UInt8] {
        try WebPushCrypto.decrypt(body: body, userAgentPrivateKey: userAgentPrivateKey, authSecret: authSecret)
    }

    /// Stops listening and closes every connection.
    public func shutdown() async throws {
        let server = lifecycle.withLock { state -> (any Channel)? in
            defer { state.channel = nil }
            return state.channel
        }
        if let server { try? await server.close().get() }
        let channels = shared.state.withLock { Array($0.channels.values) }
        for channel in channels { try? await channel.close().get() }
    }
}
