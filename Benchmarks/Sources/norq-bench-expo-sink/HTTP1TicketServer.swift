import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NorqZlib

/// The sink's HTTP/1.1 side (TLS, keep-alive), for clients that speak only HTTP/1.1 (the Python exponent-server-sdk on
/// `requests`): the same path, the same recipient count and the same ticket answers as the HTTP/2 side
/// (``ExpoTicketSink/answer(method:path:contentEncoding:body:)``). Bodies are bounded by the sink's 4 MiB.
enum HTTP1TicketServer {
    /// Binds 127.0.0.1:`port` (0: any) with the certificate and key at the given PEM paths; returns the bound port.
    static func start(sink: ExpoTicketSink, port: Int, certificatePath: String, keyPath: String) async throws -> Int {
        let chain = try NIOSSLCertificate.fromPEMFile(certificatePath).map { NIOSSLCertificateSource.certificate($0) }
        var tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain,
                                                           privateKey: .privateKey(try NIOSSLPrivateKey(file: keyPath, format: .pem)))
        tls.applicationProtocols = ["http/1.1"]
        let context = try NIOSSLContext(configuration: tls)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLServerHandler(context: context))
                    try sync.configureHTTPServerPipeline(withErrorHandling: true)
                    try sync.addHandler(Handler(sink: sink))
                }
            }
            .bind(host: "127.0.0.1", port: port).get()
        return channel.localAddress?.port ?? port
    }

    /// One connection: collects a request's body (bounded), answers it with the sink's answer, keeps the connection.
    final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        let sink: ExpoTicketSink
        var head: HTTPRequestHead?
        var body = ByteBuffer()
        var tooLarge = false

        init(sink: ExpoTicketSink) { self.sink = sink }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
                body.clear()
                tooLarge = false
            case .body(var part):
                if body.readableBytes + part.readableBytes > sink.maxRequestBodyBytes { tooLarge = true } else { body.writeBuffer(&part) }
            case .end:
                guard let head else { return }
                self.head = nil
                let answer = tooLarge ? sink.payloadTooLarge()
                    : sink.answer(method: head.method.rawValue, path: head.uri,
                                  contentEncoding: head.headers.first(name: "content-encoding"), body: body)
                var headers = HTTPHeaders()
                for (name, value) in answer.headers { headers.add(name: name, value: value) }
                headers.add(name: "content-length", value: String(answer.body.count))
                let keepAlive = head.isKeepAlive && !tooLarge
                if !keepAlive { headers.add(name: "connection", value: "close") }
                let response = HTTPResponseHead(version: head.version, status: .init(statusCode: answer.status), headers: headers)
                context.write(wrapOutboundOut(.head(response)), promise: nil)
                context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: answer.body)))), promise: nil)
                let channel = context.channel
                context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                    if !keepAlive { channel.close(promise: nil) }
                }
            }
        }
    }
}
