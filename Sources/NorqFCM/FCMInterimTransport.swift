import NorqCore
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// INTERIM: the FCM transport on swift-nio-http2's stream multiplexer, until NorqHTTP2 (issue 14) lands; then it
/// is replaced by `FCMConnectionTransport` on `HTTP2ConnectionPool`. One connection per origin, opened on first
/// use and again after it closes; every request has its deadline; failures carry `possiblyProcessed` (true once
/// the request's HEADERS were written).
final class FCMInterimTransport: FCMTransport {
    private let host: String
    private let port: Int
    private let sslContext: NIOSSLContext
    private let group: any EventLoopGroup
    private let logger: Logger

    private struct State {
        var connection: EventLoopFuture<(any Channel, NIOHTTP2Handler.StreamMultiplexer)>?
        var shutDown = false
        var inFlight = 0
        var drained: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    init(origin: FCMURL, configuration: FCMConfiguration, logger: Logger) throws(NorqError) {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.applicationProtocols = ["h2"]
        if let pem = configuration.additionalTrustRootsPEM {
            do {
                tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMBytes(Array(pem.utf8)))]
            } catch {
                throw NorqError(.configInvalidValue, "the CA file \(configuration.caPath ?? "caPath") cannot be loaded")
            }
        }
        do {
            self.sslContext = try NIOSSLContext(configuration: tls)
        } catch {
            throw NorqError(.configInvalidValue, "the TLS configuration for \(origin) is invalid: \(error)")
        }
        self.host = origin.host
        self.port = origin.port
        self.group = MultiThreadedEventLoopGroup.singleton
        self.logger = logger
    }

    /// The API transport, and the token endpoint's when it is another origin.
    static func make(configuration: FCMConfiguration,
                     logger: Logger) throws(NorqError) -> (api: FCMInterimTransport, token: FCMInterimTransport?) {
        let api = try FCMInterimTransport(origin: configuration.endpoint, configuration: configuration, logger: logger)
        let token = configuration.tokenEndpoint
        if token.host == configuration.endpoint.host && token.port == configuration.endpoint.port { return (api, nil) }
        return (api, try FCMInterimTransport(origin: token, configuration: configuration, logger: logger))
    }

    private func connection() -> EventLoopFuture<(any Channel, NIOHTTP2Handler.StreamMultiplexer)> {
        state.withLock { s in
            if let existing = s.connection { return existing }
            let sslContext = self.sslContext
            let host = self.host
            let made = ClientBootstrap(group: group)
                .connectTimeout(.seconds(10))
                .channelOption(.tcpOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let serverName = host.first?.isNumber == true || host.contains(":") ? nil : host
                        try channel.pipeline.syncOperations.addHandler(
                            try NIOSSLClientHandler(context: sslContext, serverHostname: serverName))
                        // In the initializer, not after the connect: added later, the first answer was lost now
                        // and then (a stress test of fresh connections lost about one in twenty).
                        _ = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                            mode: .client, connectionConfiguration: .init(), streamConfiguration: .init(),
                            inboundStreamInitializer: { $0.eventLoop.makeSucceededVoidFuture() })
                    }
                }
                .connect(host: host, port: port)
                .flatMapThrowing { channel -> (any Channel, NIOHTTP2Handler.StreamMultiplexer) in
                    (channel, try channel.pipeline.syncOperations.handler(type: NIOHTTP2Handler.self).syncMultiplexer())
                }
            made.whenComplete { [self] result in
                switch result {
                case .success(let (channel, _)):
                    channel.closeFuture.whenComplete { [self] _ in state.withLock { $0.connection = nil } }
                case .failure:
                    state.withLock { $0.connection = nil }
                }
            }
            s.connection = made
            return made
        }
    }

    func start(_ request: FCMWireRequest, deadline: ContinuousClock.Instant,
               completion: @escaping @Sendable (Result<FCMWireResponse, NorqError>) -> Void) {
        let accepted = state.withLock { s -> Bool in
            guard !s.shutDown else { return false }
            s.inFlight += 1
            return true
        }
        guard accepted else {
            completion(.failure(NorqError(.providerShutDown, "the FCM transport is shut down")))
            return
        }
        let finish: @Sendable (Result<FCMWireResponse, NorqError>) -> Void = { [self] result in
            completion(result)
            let drained = state.withLock { s -> CheckedContinuation<Void, Never>? in
                s.inFlight -= 1
                guard s.inFlight == 0, s.shutDown else { return nil }
                defer { s.drained = nil }
                return s.drained
            }
            drained?.resume()
        }
        let remaining = ContinuousClock.now.duration(to: deadline)
        let (seconds, attoseconds) = remaining.components
        let nanos = max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        let nioDeadline = NIODeadline.now() + .nanoseconds(nanos)
        connection().whenComplete { result in
            switch result {
            case .failure(let error):
                finish(.failure(NorqError(.transportFailed, "FCM: cannot connect to \(self.host):\(self.port): \(error)")))
            case .success(let (_, multiplexer)):
                let box = FCMStreamHandler.Completion(finish)
                multiplexer.createStreamChannel { stream in
                    stream.eventLoop.makeCompletedFuture {
                        try stream.pipeline.syncOperations.addHandler(
                            FCMStreamHandler(request: request, deadline: nioDeadline, completion: box))
                    }
                }.whenFailure { error in
                    box.complete(.failure(NorqError(.transportFailed, "FCM: cannot open a stream: \(error)")))
                }
            }
        }
    }

    func shutdown() async {
        let connection = state.withLock { s -> EventLoopFuture<(any Channel, NIOHTTP2Handler.StreamMultiplexer)>? in
            s.shutDown = true
            return s.connection
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { s -> Bool in
                if s.inFlight == 0 { return true }
                s.drained = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
        if let connection, let (channel, _) = try? await connection.get() { try? await channel.close().get() }
    }
}

/// One request on its own stream channel: writes HEADERS and DATA, collects the answer, enforces the deadline.
final class FCMStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    /// Completes exactly once.
    final class Completion: Sendable {
        private let body: Mutex<(@Sendable (Result<FCMWireResponse, NorqError>) -> Void)?>
        init(_ body: @escaping @Sendable (Result<FCMWireResponse, NorqError>) -> Void) { self.body = Mutex(body) }
        func complete(_ result: Result<FCMWireResponse, NorqError>) {
            let body = self.body.withLock { b in defer { b = nil }; return b }
            body?(result)
        }
    }

    /// Largest answer body kept (FCM answers are small JSON documents).
    static let maxBodyBytes = 64 * 1024

    private let request: FCMWireRequest
    private let deadline: NIODeadline
    private let completion: Completion
    private var status: Int?
    private var headers: [HTTPHeader] = []
    private var body: [UInt8] = []
    private var written = false
    private var timer: Scheduled<Void>?

    init(request: FCMWireRequest, deadline: NIODeadline, completion: Completion) {
        self.request = request
        self.deadline = deadline
        self.completion = completion
    }

    func channelActive(context: ChannelHandlerContext) {
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: deadline) { [self] in
            completion.complete(.failure(NorqError(.deadlineExceeded, "FCM: no answer before the deadline",
                                                   possiblyProcessed: written)))
            bound.value.close(promise: nil)
        }
        var fields = HPACKHeaders()
        fields.add(name: ":method", value: request.method)
        fields.add(name: ":scheme", value: "https")
        fields.add(name: ":authority", value: request.authority)
        fields.add(name: ":path", value: request.path)
        for header in request.headers {
            fields.add(name: header.name, value: header.value, indexing: header.name == "authorization" ? .neverIndexed : .indexable)
        }
        written = true
        context.write(wrapOutboundOut(.headers(.init(headers: fields, endStream: request.body.isEmpty))), promise: nil)
        if !request.body.isEmpty {
            var buffer = context.channel.allocator.buffer(capacity: request.body.count)
            buffer.writeBytes(request.body)
            context.write(wrapOutboundOut(.data(.init(data: .byteBuffer(buffer), endStream: true))), promise: nil)
        }
        context.flush()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let frame):
            for (name, value, _) in frame.headers {
                if name == ":status" {
                    if let code = Int(value), code >= 200 { status = code }
                } else if !name.hasPrefix(":") {
                    headers.append(HTTPHeader(name, value))
                }
            }
            if frame.endStream { finish(context: context) }
        case .data(let frame):
            if case .byteBuffer(let buffer) = frame.data, body.count + buffer.readableBytes <= Self.maxBodyBytes {
                body.append(contentsOf: buffer.readableBytesView)
            }
            if frame.endStream { finish(context: context) }
        case .rstStream(let code):
            timer?.cancel()
            completion.complete(.failure(NorqError(.transportFailed, "FCM: the stream was reset (\(code))",
                                                   possiblyProcessed: code != .refusedStream)))
        default:
            break
        }
    }

    private func finish(context: ChannelHandlerContext) {
        timer?.cancel()
        guard let status else {
            completion.complete(.failure(NorqError(.transportFailed, "FCM: an answer without :status", possiblyProcessed: true)))
            return
        }
        completion.complete(.success(FCMWireResponse(status: status, headers: headers, body: body)))
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        completion.complete(.failure(NorqError(.transportFailed, "FCM: the connection closed before the answer",
                                               possiblyProcessed: written)))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        timer?.cancel()
        completion.complete(.failure(NorqError(.transportFailed, "FCM: \(error)", possiblyProcessed: written)))
        context.close(promise: nil)
    }
}
