import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// An in-process APNs look-alike: an HTTP/2 + TLS (ALPN `h2`) server on 127.0.0.1 that checks requests the way
/// APNs does and answers with APNs' statuses, headers and JSON error bodies.
///
/// Checks, in order: path `/3/device/<64+ hex>` (404 `BadPath`, 405 `MethodNotAllowed`, 400 `MissingDeviceToken`
/// / `BadDeviceToken`), duplicate `apns-*` headers (`DuplicateHeaders`), the JWT when signing keys are configured
/// and client certificates are not required (403 `MissingProviderToken` / `InvalidProviderToken` /
/// `ExpiredProviderToken`, 429 `TooManyProviderTokenUpdates` when a connection's token changes sooner than
/// `tokenUpdateMinInterval`; a verified token is cached per connection), `apns-id` (`BadMessageId`),
/// `apns-push-type` (`InvalidPushType`), `apns-topic` and its push-type suffix (`MissingTopic`, `TopicDisallowed`,
/// `DeviceTokenNotForTopic`), `apns-priority` (`BadPriority`; background must be 5), `apns-expiration`
/// (`BadExpirationDate`), `apns-collapse-id` (`BadCollapseId`, > 64 bytes), payload (`PayloadEmpty`, 413
/// `PayloadTooLarge` above 4096 bytes or 5120 for voip, and the emulator's own 400 `BadPayload` for a body that
/// is not a JSON object). Success is 200 with `apns-id` (the request's, lowercased, or generated) and
/// `apns-unique-id`.
///
/// Fault knobs (``Faults``, settable at runtime with ``setFaults(_:)``), applied to requests that passed the checks:
/// - `silentTokens`: never answered (the stream stays open; the client's deadline must fire).
/// - `unregisteredTokens`: 410 `Unregistered` with `timestamp` (ms). `badTokens`: 400 `BadDeviceToken`.
/// - `failFirstAttempts[token]`: the first N requests for a token get the scripted answers (e.g. 503 then 200).
/// - `failNextRequests`: a burst, the next N valid requests of any token get the scripted answers.
/// - `errorRate` with `errorStatus`/`errorReason`: a seeded (deterministic) random share of failures.
/// - `retryAfterSeconds`: adds `retry-after` to fault answers with 429/503.
/// - `latency`: delay before each answer.
/// - `goAwayAfterStreams`: `GOAWAY` (last-stream-id = the Nth stream) after N streams on a connection; later
///   streams are not processed (ignored, not recorded); the connection closes once done.
/// - `dropConnectionAfterStreams`: the connection is closed when its Nth stream opens; what was not answered
///   by then never is (recorded with status 0).
/// Also: ``lowerMaxConcurrentStreams(to:)`` sends a new `SETTINGS`, ``restart()`` drops every connection and
/// listens again on the same port.
public final class APNsEmulator: Sendable {
    let shared: EmulatorShared
    private let certificates: EmulatorCertificates
    private let sslContext: NIOSSLContext
    private let group: any EventLoopGroup

    private struct Lifecycle {
        var serverChannel: (any Channel)?
        var port: Int
    }
    private let lifecycle: Mutex<Lifecycle>

    /// Creates the emulator and its certificates (nothing is bound until ``start()``).
    public init(configuration: Configuration = .init()) throws {
        self.shared = try EmulatorShared(configuration: configuration)
        let certificates = try EmulatorCertificates()
        self.certificates = certificates
        self.sslContext = try EmulatorServer.tlsContext(
            certificates, requireClientCertificate: configuration.requireClientCertificate)
        self.group = MultiThreadedEventLoopGroup.singleton
        self.lifecycle = Mutex(Lifecycle(serverChannel: nil, port: configuration.port))
    }

    /// The configuration given at init.
    public var configuration: Configuration { shared.configuration }

    /// Binds and starts accepting connections; afterwards ``port`` is the bound port.
    public func start() async throws {
        let port = lifecycle.withLock { $0.port }
        let channel = try await bind(port: port)
        let bound = channel.localAddress?.port ?? port
        lifecycle.withLock {
            $0.serverChannel = channel
            $0.port = bound
        }
    }

    private func bind(port: Int) async throws -> any Channel {
        let shared = self.shared
        return try await EmulatorServer.bind(
            group: group, host: shared.configuration.host, port: port, sslContext: sslContext, coalesceWrites: true,
            maxConcurrentStreams: { shared.state.withLock { $0.maxConcurrentStreams } },
            addConnectionHandler: { try $0.addHandler(EmulatorConnectionHandler(shared: shared)) })
    }

    /// The bound port (the configured one before ``start()``).
    public var port: Int { lifecycle.withLock { $0.port } }

    /// `https://127.0.0.1:PORT`.
    public var endpoint: String {
        let host = shared.configuration.host.contains(":") ? "[\(shared.configuration.host)]" : shared.configuration.host
        return "https://\(host):\(port)"
    }

    /// PEM of the emulator's self-signed CA; trust it to verify the server (its certificate names
    /// `127.0.0.1`, `::1` and `localhost`).
    public var caCertificatePEM: String { certificates.caCertificatePEM }

    /// Writes ``caCertificatePEM`` to `path`.
    public func writeCACertificate(to path: String) throws {
        try Data(caCertificatePEM.utf8).write(to: URL(fileURLWithPath: path))
    }

    /// A client certificate and its P-256 key (both PEM) signed by the emulator CA, for certificate-auth mode.
    public func makeClientCertificate(commonName: String) throws -> (certificatePEM: String, privateKeyPEM: String) {
        try certificates.makeClientCertificate(commonName: commonName)
    }

    /// Replaces the faults (per-token attempt counters and the burst position restart).
    public func setFaults(_ faults: Faults) {
        shared.state.withLock {
            $0.faults = faults
            $0.rng = FastUUIDGenerator(seed: faults.seed)
            $0.perTokenAttempts = [:]
            $0.burstIndex = 0
        }
    }

    /// The current faults.
    public var faults: Faults { shared.state.withLock { $0.faults } }

    /// Lowers (or raises) `SETTINGS_MAX_CONCURRENT_STREAMS`: sends a `SETTINGS` frame on every open connection
    /// and uses the value for new ones. Returns once the frame is written on every connection, so that any
    /// request sent afterwards is answered after it (the write is queued on each connection's event loop, and a
    /// request arriving in the same loop tick could otherwise be answered first).
    public func lowerMaxConcurrentStreams(to limit: Int) async {
        let channels = shared.state.withLock { s -> [any Channel] in
            s.maxConcurrentStreams = limit
            return Array(s.channels.values)
        }
        for channel in channels {
            let frame = HTTP2Frame(
                streamID: .rootStream,
                payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: limit)])))
            // A connection closing meanwhile is no error here.
            try? await channel.writeAndFlush(frame).get()
        }
    }

    /// Every request received so far, in order of answer (or of giving up on it).
    public var requests: [RecordedRequest] { shared.state.withLock { $0.records.all } }
    /// Requests dropped from ``requests`` to stay within ``Configuration/recordLimit``.
    public var droppedRequestCount: Int { shared.state.withLock { $0.records.dropped } }

    /// Forgets the recorded requests.
    public func resetRecords() {
        shared.state.withLock { $0.records.removeAll() }
    }

    /// Connections accepted so far (since init, across restarts).
    public var connectionCount: Int { shared.state.withLock { $0.connectionCount } }

    /// Connections open now.
    public var openConnectionCount: Int { shared.state.withLock { $0.channels.count } }

    /// Closes every connection and the listener, then listens again on the same port.
    public func restart() async throws {
        try await closeAll()
        let port = lifecycle.withLock { $0.port }
        let channel = try await bind(port: port)
        lifecycle.withLock { $0.serverChannel = channel }
    }

    /// Stops listening and closes every connection.
    public func shutdown() async throws {
        try await closeAll()
    }

    private func closeAll() async throws {
        let server = lifecycle.withLock { s -> (any Channel)? in
            defer { s.serverChannel = nil }
            return s.serverChannel
        }
        if let server { try? await server.close().get() }
        let channels = shared.state.withLock { Array($0.channels.values) }
        for channel in channels { try? await channel.close().get() }
    }
}
