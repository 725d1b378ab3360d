import NIOCore
import NIOPosix
import NIOSSL
import NorqTesting
import Synchronization

/// An HTTP/2 server over TLS (ALPN `h2`, 127.0.0.1, port 0 by default) that misbehaves on purpose, as an attacker or
/// a broken proxy would: the other end of the end-to-end tests of the HTTP/2 client's hardening (issue 14).
///
/// It speaks HTTP/2 itself, frame by frame (no NIOHTTP2 on the server side, so it can send what NIOHTTP2 would
/// refuse to): it reads the client preface and frames, decodes request headers with NIOHPACK, and writes raw frames
/// with literal (never indexed) HPACK fields. Without a fault it answers every request `200` with the request's
/// `apns-id`, like APNs. Its certificate is signed by its own CA (``caCertificatePEM``), as the APNs emulator's is,
/// so an APNs provider given that CA (`additionalTrustRootsPEM` or `caPath`) trusts it. It checks no JWT.
///
/// It counts, per device token (the last component of `:path`), the requests it received and the `200` answers it
/// wrote, so a test can assert that no push was answered `200` twice; and it records the `GOAWAY` and `RST_STREAM`
/// codes the client sent, so a test can check which error the client raised.
///
/// Bounds: a connection's unparsed input is at most 1 MiB plus one frame, a request header block at most 64 KiB, the
/// open streams of a connection at most 10,000, the requests held by ``Fault/resetConnection(holding:)`` at most its
/// count, a CONTINUATION flood at most its byte count (written with back-pressure), an overrun of the client's
/// receive window at most 16 MiB; past a bound the connection is closed. The statistics grow with the distinct
/// tokens a test sends.
public final class HostileHTTP2Server: Sendable {
    /// How the server misbehaves. An open set: tests combine the static members below.
    public struct Fault: Sendable, Hashable, CustomStringConvertible {
        enum Kind: Sendable, Hashable {
            case none
            case goAwayAfterSettings
            case closeAfterSettings
            case resetConnection(holding: Int)
            case resetStreams(code: UInt32)
            case oversizedResponseHeaders(token: String, bytes: Int)
            case continuationFlood(bytes: Int)
            case interimResponse
            case silentFirstRequest
            case rejectAll(status: Int, reason: String)
            case delayedSettings(milliseconds: Int)
            case delayedHandshake(milliseconds: Int)
            case dataOnIdleStream
            case zeroWindowUpdateOnConnection
            case zeroWindowUpdateOnStream
            case connectionWindowOverflow
            case streamWindowOverflow
            case initialWindowSizeTooLarge
            case initialWindowSizeOverflowsStream
            case enablePush
            case firstFrameNotSettings
            case badPriorityFrameSize
            case missingStatus
            case overrunReceiveWindow
            case goAwayBelowSent(answered: Int, held: Int)
            case doubleGoAway(answered: Int, held: Int)
            case refuseEvery(nth: Int)
        }
        let kind: Kind
        public let description: String

        init(_ kind: Kind, _ description: String) {
            self.kind = kind
            self.description = description
        }

        /// Behaves: every request is answered `200`.
        public static let none = Fault(.none, "none")
        /// Defect 1: sends its SETTINGS, then a GOAWAY (last-stream-id 0, NO_ERROR), then closes the connection.
        public static let goAwayAfterSettings = Fault(.goAwayAfterSettings, "GOAWAY after SETTINGS")
        /// Defect 1: sends its SETTINGS, then closes the TCP connection.
        public static let closeAfterSettings = Fault(.closeAfterSettings, "close after SETTINGS")
        /// Defects 2 and 3: answers the first request of a connection, then holds the next `holding` requests (or
        /// those that came within 50 ms of the first held one) and writes, in one flight, `200` answers to all held
        /// requests but the last, then resets the TCP connection (SO_LINGER 0): the answers reach the client just
        /// before the RST, and the last request may have been processed.
        ///
        /// The flight is padded (with frames of an unknown type, which a client must ignore) to a size on the wire
        /// that fills a SwiftNIO client's read buffer exactly (2048 bytes, and a few others, one per connection in
        /// turn): the client's next read, in the same read loop, returns the reset, and SwiftNIO closes without a
        /// read-complete (where TLS plaintext that was decrypted but not yet passed on can be lost).
        public static func resetConnection(holding: Int) -> Fault {
            Fault(.resetConnection(holding: max(1, holding)), "TCP reset after \(holding) held requests")
        }
        /// Defects 2 and 7: answers every request with RST_STREAM of this error code (7: REFUSED_STREAM).
        public static func resetStreams(code: UInt32) -> Fault {
            Fault(.resetStreams(code: code), "RST_STREAM \(code) on every stream")
        }
        /// Defect 7: every stream refused.
        public static let refuseEveryStream = resetStreams(code: 7)
        /// Defect 4: the answer to `token` is a `200` whose header block is `bytes` long (HEADERS + CONTINUATION,
        /// capped at 1 MiB); every other request is answered normally.
        public static func oversizedResponseHeaders(token: String, bytes: Int = 64 * 1024) -> Fault {
            Fault(.oversizedResponseHeaders(token: token, bytes: min(bytes, 1 << 20)), "oversized header block for one token")
        }
        /// Defect 5: answers the first request of a connection with a HEADERS frame without END_HEADERS followed by
        /// CONTINUATION frames totalling `bytes` (capped at 64 MiB), never ending the block.
        public static func continuationFlood(bytes: Int = 8 << 20) -> Fault {
            Fault(.continuationFlood(bytes: min(bytes, 64 << 20)), "CONTINUATION flood of \(bytes) bytes")
        }
        /// Defect 6: every answer is a `103` interim response, then the `200`.
        public static let interimResponse = Fault(.interimResponse, "103 before 200")
        /// Defect 8: the first request the server receives is never answered; every other one is.
        public static let silentFirstRequest = Fault(.silentFirstRequest, "no answer to the first request")
        /// Defect 8: every request is answered `status` with `{"reason": reason}` (APNs style), 20 ms after it
        /// arrived, so that a client that keeps one stream at a time shows in ``Statistics/maxOpenStreams``.
        public static func rejectAll(status: Int = 400, reason: String = "BadDeviceToken") -> Fault {
            Fault(.rejectAll(status: status, reason: reason), "\(status) \(reason) to every request, 20 ms late")
        }
        /// Defect 10: the server's SETTINGS (its preface) come this long after the client's preface; then it behaves.
        public static func delayedSettings(milliseconds: Int) -> Fault {
            Fault(.delayedSettings(milliseconds: milliseconds), "SETTINGS \(milliseconds) ms late")
        }
        /// Defect 10: the TLS handshake starts this long after the TCP connection was accepted; then it behaves.
        public static func delayedHandshake(milliseconds: Int) -> Fault {
            Fault(.delayedHandshake(milliseconds: milliseconds), "TLS handshake \(milliseconds) ms late")
        }
        /// Defect 9: a DATA frame on an idle stream (connection error PROTOCOL_ERROR), then the answer.
        public static let dataOnIdleStream = Fault(.dataOnIdleStream, "DATA on an idle stream")
        /// Defect 9: WINDOW_UPDATE of 0 on the connection (connection error PROTOCOL_ERROR), then the answer.
        public static let zeroWindowUpdateOnConnection = Fault(.zeroWindowUpdateOnConnection, "zero WINDOW_UPDATE on the connection")
        /// Defect 9: WINDOW_UPDATE of 0 on the request's stream (stream error PROTOCOL_ERROR), then the answer.
        public static let zeroWindowUpdateOnStream = Fault(.zeroWindowUpdateOnStream, "zero WINDOW_UPDATE on a stream")
        /// Defect 9: WINDOW_UPDATE of 2^31-1 on the connection (window past 2^31-1: connection error
        /// FLOW_CONTROL_ERROR), then the answer.
        public static let connectionWindowOverflow = Fault(.connectionWindowOverflow, "connection window overflow")
        /// Defect 9: WINDOW_UPDATE of 2^31-1 on the request's stream (stream error FLOW_CONTROL_ERROR), then the
        /// answer.
        public static let streamWindowOverflow = Fault(.streamWindowOverflow, "stream window overflow")
        /// Defect 9: SETTINGS_INITIAL_WINDOW_SIZE of 2^31 (connection error FLOW_CONTROL_ERROR), then the answer.
        public static let initialWindowSizeTooLarge = Fault(.initialWindowSizeTooLarge, "SETTINGS_INITIAL_WINDOW_SIZE 2^31")
        /// Defect 9: a WINDOW_UPDATE that brings the request's stream window close to 2^31-1, then
        /// SETTINGS_INITIAL_WINDOW_SIZE = 2^31-1, whose delta takes that window past 2^31-1 (connection error
        /// FLOW_CONTROL_ERROR, RFC 9113 §6.9.2), then the answer.
        public static let initialWindowSizeOverflowsStream = Fault(.initialWindowSizeOverflowsStream,
                                                                   "SETTINGS_INITIAL_WINDOW_SIZE delta overflows a stream window")
        /// Defect 9: SETTINGS_ENABLE_PUSH = 1 from the server (connection error PROTOCOL_ERROR), then the answer.
        public static let enablePush = Fault(.enablePush, "SETTINGS_ENABLE_PUSH 1")
        /// Defect 9: the server's first frame is a PING, not SETTINGS (connection error PROTOCOL_ERROR); then it
        /// behaves.
        public static let firstFrameNotSettings = Fault(.firstFrameNotSettings, "first frame not SETTINGS")
        /// Defect 9: a PRIORITY frame of 4 bytes on the request's stream (stream error FRAME_SIZE_ERROR), then the
        /// answer.
        public static let badPriorityFrameSize = Fault(.badPriorityFrameSize, "PRIORITY frame of 4 bytes")
        /// Defect 9: the answer has no `:status` (malformed: stream error PROTOCOL_ERROR).
        public static let missingStatus = Fault(.missingStatus, "response without :status")
        /// Defect 9: the answer's DATA exceeds the client's receive window by one byte (FLOW_CONTROL_ERROR), as the
        /// server knows the window when it writes: a client that grants window while it reads may rightly see no
        /// overrun.
        public static let overrunReceiveWindow = Fault(.overrunReceiveWindow, "DATA past the client's receive window")
        /// Issue 30, a graceful drain as on a rolling restart: answers the first `answered` requests of a connection,
        /// then holds the next ones (received, not processed) until `held` of them wait (or 50 ms passed since the
        /// first), then sends GOAWAY (NO_ERROR) with a last-stream-id below every held or incomplete stream (so lower
        /// than streams the client already sent), and closes the connection. Held streams are never processed.
        public static func goAwayBelowSent(answered: Int, held: Int) -> Fault {
            Fault(.goAwayBelowSent(answered: max(0, answered), held: max(1, held)),
                  "GOAWAY below the streams sent after \(answered) answers, then close")
        }
        /// Issue 30, the double GOAWAY of RFC 9113 §6.8: answers the first `answered` requests of a connection, holds
        /// the next ones until `held` wait (or 50 ms passed), sends GOAWAY with last-stream-id 2^31-1, and 20 ms later
        /// processes (answers) the held streams up to the median id of those held before the first GOAWAY, sends the
        /// real GOAWAY with that id and closes the connection. Streams above it (held, or arriving after the first
        /// GOAWAY) are never processed.
        public static func doubleGoAway(answered: Int, held: Int) -> Fault {
            Fault(.doubleGoAway(answered: max(0, answered), held: max(1, held)),
                  "GOAWAY 2^31-1, then the real last id, after \(answered) answers")
        }
        /// Issue 30: every `nth` request of a connection is refused with RST_STREAM REFUSED_STREAM (not processed);
        /// every other one is answered.
        public static func refuseEvery(nth: Int) -> Fault {
            Fault(.refuseEvery(nth: max(1, nth)), "REFUSED_STREAM on every \(nth)th stream")
        }
    }

    public struct Configuration: Sendable {
        public var fault: Fault
        /// The first this many connections misbehave, later ones behave; nil: all of them.
        public var faultyConnections: Int?
        /// `SETTINGS_MAX_CONCURRENT_STREAMS` the server announces.
        public var maxConcurrentStreams: Int
        public var host: String
        public var port: Int

        public init(fault: Fault = .none, faultyConnections: Int? = nil, maxConcurrentStreams: Int = 100,
                    host: String = "127.0.0.1", port: Int = 0) {
            self.fault = fault
            self.faultyConnections = faultyConnections
            self.maxConcurrentStreams = maxConcurrentStreams
            self.host = host
            self.port = port
        }
    }

    /// What the server saw and did.
    public struct Statistics: Sendable {
        /// Connections accepted.
        public var connections = 0
        /// Complete requests received, by device token (last `:path` component).
        public var requestsByToken: [String: Int] = [:]
        /// `200` answers written (whole, before any reset), by device token.
        public var okByToken: [String: Int] = [:]
        /// Requests the server processed (acted on and answered, whatever the status), by device token. A request
        /// refused (REFUSED_STREAM) or left above a GOAWAY's last-stream-id is received (``requestsByToken``) but not
        /// processed.
        public var processedByToken: [String: Int] = [:]
        /// Tokens answered `200` on a connection after the server broke the protocol on it (or with a broken
        /// answer): a client may rightly discard those answers.
        public var answeredAfterViolation: Set<String> = []
        /// Error codes of the GOAWAY frames the client sent.
        public var goAwayCodesReceived: [UInt32] = []
        /// Error codes of the RST_STREAM frames the client sent.
        public var resetCodesReceived: [UInt32] = []
        /// Connections open now.
        public var openConnections = 0
        /// The most requests that were open at once on one connection (received, not yet answered).
        public var maxOpenStreams = 0
        /// Connections the client closed (or that failed) while the server still had them open (not by ``stop()``).
        public var connectionsClosedByClient = 0
        /// Whether a CONTINUATION flood was written to its end (a client that bounds header blocks closes first).
        public var floodsCompleted = 0
        /// Bytes of CONTINUATION flood written.
        public var floodBytesWritten = 0

        /// All complete requests received.
        public var requests: Int { requestsByToken.values.reduce(0, +) }
        /// All `200` answers written.
        public var oks: Int { okByToken.values.reduce(0, +) }
        /// Tokens answered `200` more than once (a duplicate delivery).
        public var answeredTwice: [String] { okByToken.filter { $0.value > 1 }.map(\.key).sorted() }
        /// Tokens processed more than once.
        public var processedTwice: [String] { processedByToken.filter { $0.value > 1 }.map(\.key).sorted() }
        /// All requests processed.
        public var processed: Int { processedByToken.values.reduce(0, +) }
    }

    let shared: HostileShared
    private let sslContext: NIOSSLContext
    private let certificates: EmulatorCertificates
    private let group: any EventLoopGroup
    private let listener = Mutex<(any Channel)?>(nil)

    /// Creates the server and its certificates (nothing is bound until ``start()``).
    public init(configuration: Configuration = .init()) throws {
        let certificates = try EmulatorCertificates()
        self.certificates = certificates
        let serverCert = try NIOSSLCertificate(bytes: Array(certificates.serverCertificatePEM.utf8), format: .pem)
        let serverKey = try NIOSSLPrivateKey(bytes: Array(certificates.serverPrivateKeyPEM.utf8), format: .pem)
        var tls = TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(serverCert)],
                                                           privateKey: .privateKey(serverKey))
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        self.sslContext = try NIOSSLContext(configuration: tls)
        self.group = MultiThreadedEventLoopGroup.singleton
        self.shared = HostileShared(configuration: configuration)
    }

    /// Binds and starts accepting connections; afterwards ``port`` is the bound port.
    public func start() async throws {
        let shared = self.shared
        let sslContext = self.sslContext
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let index = shared.connectionOpened(channel)
                    let faulty = shared.configuration.faultyConnections.map { index < $0 } ?? true
                    let fault = faulty ? shared.configuration.fault : .none
                    let reset = RawResetHandler()
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(reset)
                    let addTLS = {
                        try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                        try sync.addHandler(HostileConnectionHandler(shared: shared, fault: fault, reset: reset,
                                                                     connectionIndex: index))
                    }
                    guard case .delayedHandshake(let milliseconds) = fault.kind else { return try addTLS() }
                    // Nothing is read (the ClientHello waits in the socket) until the TLS handler is there.
                    try channel.syncOptions?.setOption(.autoRead, value: false)
                    channel.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(milliseconds))) {
                        guard channel.isActive else { return }
                        try? addTLS()
                        try? channel.syncOptions?.setOption(.autoRead, value: true)
                    }
                }
            }
            .bind(host: shared.configuration.host, port: shared.configuration.port).get()
        listener.withLock { $0 = channel }
    }

    /// The bound port (0 before ``start()``).
    public var port: Int { listener.withLock { $0?.localAddress?.port } ?? 0 }

    /// PEM of the server's CA: trust it to verify the server (its certificate names `127.0.0.1`, `::1`, `localhost`).
    public var caCertificatePEM: String { certificates.caCertificatePEM }

    /// A snapshot of what the server saw.
    public var statistics: Statistics { shared.state.withLock { $0.statistics } }

    /// Waits (a continuation, no polling) until `condition` holds for the statistics, or `timeout` passed; returns
    /// the statistics then.
    public func statistics(within timeout: Duration,
                           until condition: @escaping @Sendable (Statistics) -> Bool) async -> Statistics {
        await shared.wait(within: timeout, on: group.next(), until: condition)
    }

    /// Closes the listener and every connection.
    public func stop() async {
        let server = listener.withLock { $0 }
        try? await server?.close()
        for channel in shared.openChannels(stopping: true) {
            try? await channel.close()
        }
    }
}

/// State shared by the server and its connections, behind one lock.
final class HostileShared: Sendable {
    let configuration: HostileHTTP2Server.Configuration

    struct Waiter {
        var condition: @Sendable (HostileHTTP2Server.Statistics) -> Bool
        var continuation: CheckedContinuation<HostileHTTP2Server.Statistics, Never>
    }

    struct State {
        var statistics = HostileHTTP2Server.Statistics()
        var channels: [ObjectIdentifier: any Channel] = [:]
        var firstRequestSeen = false
        var stopping = false
        var waiters: [Int: Waiter] = [:]
        var nextWaiter = 0
    }
    let state = Mutex(State())

    init(configuration: HostileHTTP2Server.Configuration) {
        self.configuration = configuration
    }

    /// Registers a new connection; returns its index (0 for the first).
    func connectionOpened(_ channel: any Channel) -> Int {
        update { state in
            state.channels[ObjectIdentifier(channel)] = channel
            state.statistics.connections += 1
            state.statistics.openConnections += 1
            return state.statistics.connections - 1
        }
    }

    func connectionClosed(_ channel: any Channel, byClient: Bool) {
        update { state in
            if state.channels.removeValue(forKey: ObjectIdentifier(channel)) != nil {
                state.statistics.openConnections -= 1
            }
            if byClient, !state.stopping { state.statistics.connectionsClosedByClient += 1 }
        }
    }

    /// The open connections; with `stopping`, later closes are not counted as the client's.
    func openChannels(stopping: Bool = false) -> [any Channel] {
        state.withLock { state in
            if stopping { state.stopping = true }
            return Array(state.channels.values)
        }
    }

    /// Whether this is the first request the server received (once true, then false forever).
    func takeFirstRequest() -> Bool {
        state.withLock { state in
            defer { state.firstRequestSeen = true }
            return !state.firstRequestSeen
        }
    }

    /// Changes the statistics and wakes the waiters whose condition now holds.
    func update<T>(_ body: (inout State) -> T) -> T {
        var ready: [(CheckedContinuation<HostileHTTP2Server.Statistics, Never>, HostileHTTP2Server.Statistics)] = []
        let result = state.withLock { state in
            let result = body(&state)
            for (id, waiter) in state.waiters where waiter.condition(state.statistics) {
                state.waiters[id] = nil
                ready.append((waiter.continuation, state.statistics))
            }
            return result
        }
        for (continuation, statistics) in ready { continuation.resume(returning: statistics) }
        return result
    }

    func wait(within timeout: Duration, on loop: any EventLoop,
              until condition: @escaping @Sendable (HostileHTTP2Server.Statistics) -> Bool) async -> HostileHTTP2Server.Statistics {
        await withCheckedContinuation { continuation in
            let id: Int? = state.withLock { state in
                if condition(state.statistics) { return nil }
                state.nextWaiter += 1
                state.waiters[state.nextWaiter] = Waiter(condition: condition, continuation: continuation)
                return state.nextWaiter
            }
            guard let id else {
                continuation.resume(returning: state.withLock { $0.statistics })
                return
            }
            let (seconds, attoseconds) = timeout.components
            loop.scheduleTask(in: .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)) {
                let expired = self.state.withLock { state in
                    state.waiters.removeValue(forKey: id).map { ($0.continuation, state.statistics) }
                }
                if let (continuation, statistics) = expired { continuation.resume(returning: statistics) }
            }
        }
    }
}

/// First in the pipeline (below TLS): closes the TCP connection with a reset (SO_LINGER 0), skipping the TLS
/// close_notify, so that what was written just before is followed by an RST.
final class RawResetHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    /// Resets the connection now (after the bytes already handed to the socket).
    func reset() {
        guard let context else { return }
        if let provider = context.channel as? any SocketOptionProvider {
            provider.setSoLinger(NIOLinger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        } else {
            context.close(promise: nil)
        }
    }

    /// Closes the TCP connection now (a FIN), without the TLS close_notify.
    func closeNow() {
        context?.close(promise: nil)
    }
}
