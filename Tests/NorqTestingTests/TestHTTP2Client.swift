import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NorqTesting

/// A tiny HTTP/2-over-TLS client on raw frames, only for these tests.
struct TestResponse: Sendable {
    var status: Int
    var headers: [String: String]
    var body: String
}

struct TestStreamError: Error, Sendable {
    var description: String
}

struct TestRequest: Sendable {
    var method = "POST"
    var path: String
    var headers: [(String, String)]
    var body: [UInt8]
    var promise: EventLoopPromise<TestResponse>
}

final class TestClientHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = TestRequest
    typealias OutboundOut = HTTP2Frame

    private var nextStreamID: HTTP2StreamID = 1
    private var pending: [HTTP2StreamID: (promise: EventLoopPromise<TestResponse>, response: TestResponse)] = [:]
    /// Values of SETTINGS_MAX_CONCURRENT_STREAMS received, in order.
    let settingsSeen = NIOLockedValueBox<[Int]>([])
    let goAwaySeen = NIOLockedValueBox<Int?>(nil)

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        let id = nextStreamID
        nextStreamID = HTTP2StreamID(Int(id) + 2)
        var headers = HPACKHeaders([(":method", request.method), (":scheme", "https"), (":path", request.path),
                                    (":authority", "127.0.0.1")])
        for (n, v) in request.headers { headers.add(name: n, value: v) }
        pending[id] = (request.promise, TestResponse(status: 0, headers: [:], body: ""))
        let hasBody = !request.body.isEmpty
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: !hasBody)))),
                      promise: hasBody ? nil : promise)
        if hasBody {
            let buffer = context.channel.allocator.buffer(bytes: request.body)
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(buffer), endStream: true)))),
                          promise: promise)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let h):
            guard var entry = pending[frame.streamID] else { return }
            for (n, v, _) in h.headers {
                if n == ":status" { entry.response.status = Int(v) ?? -1 } else { entry.response.headers[n] = v }
            }
            pending[frame.streamID] = entry
            if h.endStream { finish(frame.streamID) }
        case .data(let d):
            guard var entry = pending[frame.streamID] else { return }
            if case .byteBuffer(let b) = d.data { entry.response.body += String(buffer: b) }
            pending[frame.streamID] = entry
            if d.endStream { finish(frame.streamID) }
        case .rstStream(let code):
            pending.removeValue(forKey: frame.streamID)?.promise.fail(TestStreamError(description: "reset \(code)"))
        case .settings(.settings(let settings)):
            for s in settings where s.parameter == .maxConcurrentStreams {
                settingsSeen.withLockedValue { $0.append(s.value) }
            }
        case .goAway(let last, _, _):
            goAwaySeen.withLockedValue { $0 = Int(last) }
        default:
            break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent, let entry = pending.removeValue(forKey: closed.streamID) {
            entry.promise.fail(TestStreamError(description: "closed \(String(describing: closed.reason))"))
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func finish(_ id: HTTP2StreamID) {
        if let entry = pending.removeValue(forKey: id) { entry.promise.succeed(entry.response) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        let all = pending
        pending = [:]
        for (_, entry) in all { entry.promise.fail(TestStreamError(description: "connection closed")) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

final class TestH2Client: Sendable {
    let channel: any Channel
    let settingsSeen: NIOLockedValueBox<[Int]>
    let goAwaySeen: NIOLockedValueBox<Int?>

    private init(channel: any Channel, settingsSeen: NIOLockedValueBox<[Int]>, goAwaySeen: NIOLockedValueBox<Int?>) {
        self.channel = channel
        self.settingsSeen = settingsSeen
        self.goAwaySeen = goAwaySeen
    }

    static func connect(to emulator: APNsEmulator, clientCertificate: (certificatePEM: String, privateKeyPEM: String)? = nil,
                        proxy: ConnectProxy? = nil)
        async throws -> TestH2Client
    {
        try await connect(port: emulator.port, caCertificatePEM: emulator.caCertificatePEM,
                          clientCertificate: clientCertificate, proxy: proxy)
    }

    static func connect(port: Int, caCertificatePEM: String,
                        clientCertificate: (certificatePEM: String, privateKeyPEM: String)? = nil,
                        proxy: ConnectProxy? = nil)
        async throws -> TestH2Client
    {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(caCertificatePEM.utf8), format: .pem)])
        tls.applicationProtocols = ["h2"]
        if let clientCertificate {
            tls.certificateChain = [.certificate(try NIOSSLCertificate(bytes: Array(clientCertificate.certificatePEM.utf8), format: .pem))]
            tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(clientCertificate.privateKeyPEM.utf8), format: .pem))
        }
        let context = try NIOSSLContext(configuration: tls)
        let handler = NIOLockedValueBox<(NIOLockedValueBox<[Int]>, NIOLockedValueBox<Int?>)?>(nil)
        @Sendable func addHandlers(_ channel: any Channel) throws {
            let sync = channel.pipeline.syncOperations
            try sync.addHandler(NIOSSLClientHandler(context: context, serverHostname: nil))
            try sync.addHandler(NIOHTTP2Handler(mode: .client))
            let h = TestClientHandler()
            handler.withLockedValue { $0 = (h.settingsSeen, h.goAwaySeen) }
            try sync.addHandler(h)
        }
        let channel: any Channel
        if let proxy {
            let tunnelUp = MultiThreadedEventLoopGroup.singleton.any().makePromise(of: Void.self)
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(ProxyHandshakeHandler(done: tunnelUp))
                    }
                }
                .connect(host: "127.0.0.1", port: proxy.port).get()
            let connect = "CONNECT 127.0.0.1:\(port) HTTP/1.1\r\nhost: 127.0.0.1:\(port)\r\n\r\n"
            try await channel.writeAndFlush(channel.allocator.buffer(string: connect)).get()
            try await tunnelUp.futureResult.get()
            try await channel.eventLoop.submit { try addHandlers(channel) }.get()
        } else {
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture { try addHandlers(channel) }
                }
                .connect(host: "127.0.0.1", port: port).get()
        }
        guard let boxes = handler.withLockedValue({ $0 }) else { throw TestStreamError(description: "no handler") }
        return TestH2Client(channel: channel, settingsSeen: boxes.0, goAwaySeen: boxes.1)
    }

    /// Writes all requests in one flush and waits for every answer (or failure), with a timeout.
    func sendAll(_ requests: [(method: String, path: String, headers: [(String, String)], body: [UInt8])],
                 timeout: TimeAmount = .seconds(5)) async -> [Result<TestResponse, any Error>]
    {
        var futures: [EventLoopFuture<TestResponse>] = []
        for r in requests {
            let promise = channel.eventLoop.makePromise(of: TestResponse.self)
            let timeoutTask = channel.eventLoop.scheduleTask(in: timeout) {
                promise.fail(TestStreamError(description: "timeout"))
            }
            promise.futureResult.whenComplete { _ in timeoutTask.cancel() }
            channel.write(TestRequest(method: r.method, path: r.path, headers: r.headers, body: r.body, promise: promise))
                .whenFailure { promise.fail($0) }
            futures.append(promise.futureResult)
        }
        channel.flush()
        var results: [Result<TestResponse, any Error>] = []
        for f in futures {
            do { results.append(.success(try await f.get())) } catch { results.append(.failure(error)) }
        }
        return results
    }

    func send(method: String = "POST", path: String, headers: [(String, String)], body: [UInt8]) async throws -> TestResponse {
        try await sendAll([(method, path, headers, body)])[0].get()
    }

    func close() async {
        try? await channel.close().get()
    }
}

/// Signs APNs-style JWTs for the tests.
struct TestSigner: Sendable {
    let key = P256.Signing.PrivateKey()
    var keyID = "KEY123"
    var teamID = "TEAM123"

    var publicKeyPEM: String { key.publicKey.pemRepresentation }

    func token(issuedAt: Int64, keyID: String? = nil, teamID: String? = nil, signer: P256.Signing.PrivateKey? = nil) throws -> String {
        let header = #"{"alg":"ES256","kid":"\#(keyID ?? self.keyID)"}"#
        let claims = #"{"iss":"\#(teamID ?? self.teamID)","iat":\#(issuedAt)}"#
        let input = Self.b64(Array(header.utf8)) + "." + Self.b64(Array(claims.utf8))
        let signature = try (signer ?? key).signature(for: Array(input.utf8)).rawRepresentation
        return input + "." + Self.b64(Array(signature))
    }

    static func b64(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}

/// Waits for the proxy's `HTTP/1.1 200` answer to CONNECT, then removes itself.
final class ProxyHandshakeHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    private let done: EventLoopPromise<Void>
    private var received = ""

    init(done: EventLoopPromise<Void>) {
        self.done = done
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        received += String(buffer: unwrapInboundIn(data))
        guard received.contains("\r\n\r\n") else { return }
        if received.hasPrefix("HTTP/1.1 200") {
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
            done.succeed()
        } else {
            done.fail(TestStreamError(description: "proxy answered \(received)"))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        done.fail(TestStreamError(description: "proxy closed"))
        context.fireChannelInactive()
    }
}
