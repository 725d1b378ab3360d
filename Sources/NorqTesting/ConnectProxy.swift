import NIOCore
import NIOPosix
import Synchronization

/// A minimal HTTP/1.1 `CONNECT` proxy on 127.0.0.1 that tunnels bytes to the requested host and port,
/// for testing a client's proxy support. Other methods get 405.
public final class ConnectProxy: Sendable {
    private struct State {
        var channel: (any Channel)?
        var port = 0
        var connectCount = 0
        var targets: [String] = []
        var tunnels = 0
        var stalledBelow = 0
    }
    private let state = Mutex(State())
    private let host: String

    public init(host: String = "127.0.0.1") {
        self.host = host
    }

    /// Binds on a free port.
    public func start() async throws {
        let proxy = self
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ConnectRequestHandler(proxy: proxy))
                }
            }
            .bind(host: host, port: 0).get()
        state.withLock {
            $0.channel = channel
            $0.port = channel.localAddress?.port ?? 0
        }
    }

    /// The bound port.
    public var port: Int { state.withLock { $0.port } }

    /// Successful `CONNECT` tunnels so far.
    public var connectCount: Int { state.withLock { $0.connectCount } }

    /// `host:port` of every tunnel opened, in order.
    public var connectTargets: [String] { state.withLock { $0.targets } }

    func didConnect(to target: String) {
        state.withLock {
            $0.connectCount += 1
            $0.targets.append(target)
        }
    }

    /// Makes every tunnel open now silently drop the bytes it reads, in both directions, without closing:
    /// the peers see a dead connection (no answers, no PING acks). Tunnels opened later work normally.
    public func stallOpenTunnels() {
        state.withLock { $0.stalledBelow = $0.tunnels }
    }

    func openTunnel() -> Int {
        state.withLock { s in
            defer { s.tunnels += 1 }
            return s.tunnels
        }
    }

    func isStalled(_ tunnel: Int) -> Bool {
        state.withLock { tunnel < $0.stalledBelow }
    }

    /// Stops listening (open tunnels close when either side closes).
    public func shutdown() async throws {
        let channel = state.withLock { s -> (any Channel)? in
            defer { s.channel = nil }
            return s.channel
        }
        try await channel?.close().get()
    }
}

/// Reads the `CONNECT host:port HTTP/1.1` request head, opens the upstream connection, then glues both.
final class ConnectRequestHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let proxy: ConnectProxy
    private var buffer: ByteBuffer?
    private var connecting = false

    init(proxy: ConnectProxy) {
        self.proxy = proxy
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = unwrapInboundIn(data)
        if buffer == nil { buffer = incoming } else { buffer!.writeBuffer(&incoming) }
        guard !connecting, let head = buffer, let end = head.readableBytesView.firstRange(of: Array("\r\n\r\n".utf8))
        else { return }
        let headLength = end.upperBound - head.readableBytesView.startIndex
        let headText = String(decoding: head.readableBytesView.prefix(headLength), as: UTF8.self)
        buffer!.moveReaderIndex(forwardBy: headLength)
        let requestLine = headText.split(separator: "\r\n", maxSplits: 1).first.map(String.init) ?? ""
        let parts = requestLine.split(separator: " ")
        guard parts.count == 3, parts[0] == "CONNECT", let colon = parts[1].lastIndex(of: ":"),
              let port = Int(parts[1][parts[1].index(after: colon)...])
        else {
            reply(context: context, "HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n", close: true)
            return
        }
        var host = String(parts[1][..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let target = String(parts[1])
        let tunnel = proxy.openTunnel()
        let proxy = self.proxy
        connecting = true
        let downstream = context.channel
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        ClientBootstrap(group: context.eventLoop)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { upstream in
                upstream.eventLoop.makeCompletedFuture {
                    try upstream.pipeline.syncOperations.addHandler(TunnelHandler(peer: downstream, proxy: proxy, tunnel: tunnel))
                }
            }
            .connect(host: host, port: port)
            .hop(to: context.eventLoop)
            .whenComplete { result in
                let (handler, context) = loopBound.value
                switch result {
                case .failure:
                    handler.reply(context: context, "HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n", close: true)
                case .success(let upstream):
                    handler.proxy.didConnect(to: target)
                    handler.reply(context: context, "HTTP/1.1 200 Connection Established\r\n\r\n", close: false)
                    let leftover = handler.buffer
                    handler.buffer = nil
                    if let leftover, leftover.readableBytes > 0 { upstream.writeAndFlush(leftover, promise: nil) }
                    let pipeline = context.pipeline
                    do {
                        try pipeline.syncOperations.addHandler(TunnelHandler(peer: upstream, proxy: handler.proxy, tunnel: tunnel))
                        pipeline.syncOperations.removeHandler(handler, promise: nil)
                    } catch {
                        context.close(promise: nil)
                        upstream.close(promise: nil)
                    }
                }
            }
    }

    private func reply(context: ChannelHandlerContext, _ text: String, close: Bool) {
        let out = context.channel.allocator.buffer(string: text)
        context.writeAndFlush(wrapOutboundOut(out), promise: nil)
        if close { context.close(promise: nil) }
    }
}

/// Forwards every byte read to `peer` and closes `peer` when this side closes.
final class TunnelHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let peer: any Channel
    private let proxy: ConnectProxy
    private let tunnel: Int

    init(peer: any Channel, proxy: ConnectProxy, tunnel: Int) {
        self.peer = peer
        self.proxy = proxy
        self.tunnel = tunnel
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if proxy.isStalled(tunnel) { return }
        peer.write(unwrapInboundIn(data), promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        peer.flush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        peer.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
