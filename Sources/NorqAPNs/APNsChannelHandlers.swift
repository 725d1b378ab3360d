import NIOCore

/// Opens an HTTP CONNECT tunnel through a proxy, then gets out of the way.
final class HTTPConnectProxyHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let target: APNsEndpoint
    private let promise: EventLoopPromise<Void>
    private var received: [UInt8] = []
    private var done = false

    var established: EventLoopFuture<Void> { promise.futureResult }

    init(target: APNsEndpoint, eventLoop: any EventLoop) {
        self.target = target
        self.promise = eventLoop.makePromise()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let authority = "\(target.host):\(target.port)"
        let request = "CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n\r\n"
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: request)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else {
            context.fireChannelRead(data)
            return
        }
        let buffer = unwrapInboundIn(data)
        received.append(contentsOf: buffer.readableBytesView)
        guard let end = headerEnd() else {
            if received.count > 16 * 1024 { fail(context: context, "proxy response too long") }
            return
        }
        let head = String(decoding: received[..<end], as: UTF8.self)
        let statusLine = head.split(separator: "\r\n", maxSplits: 1).first ?? ""
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, parts[1] == "200" else {
            fail(context: context, "proxy refused CONNECT: \(statusLine)")
            return
        }
        done = true
        promise.succeed()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !done { fail(context: context, "proxy closed the connection") }
        context.fireChannelInactive()
    }

    private func headerEnd() -> Int? {
        guard received.count >= 4 else { return nil }
        for i in 0...(received.count - 4)
        where received[i] == 13 && received[i + 1] == 10 && received[i + 2] == 13 && received[i + 3] == 10 {
            return i + 4
        }
        return nil
    }

    private func fail(context: ChannelHandlerContext, _ message: String) {
        guard !done else { return }
        done = true
        promise.fail(ProxyError(message: message))
        context.close(promise: nil)
    }

    struct ProxyError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}
