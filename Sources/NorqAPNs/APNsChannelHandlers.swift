import NIOCore

/// Gathers every buffer written in one event-loop tick into one buffer and writes and flushes it once, at the
/// end of the tick: NIOSSL then makes one TLS record (up to 16 KB each) and one syscall per tick instead of one
/// per HTTP/2 frame, however often the handlers above flush. Once a flushed 16 KB (a full TLS record) has gathered,
/// it goes out at once: the server starts on the first requests of a long tick while the rest are prepared.
final class WriteCoalescingHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private var pending: ByteBuffer?
    private var promises: [EventLoopPromise<Void>] = []
    private var context: ChannelHandlerContext?
    private var flushScheduled = false

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .byteBuffer(var buffer):
            if pending == nil {
                pending = buffer
            } else {
                pending!.writeBuffer(&buffer)
            }
            if let promise { promises.append(promise) }
        case .fileRegion:
            flushPending(context: context)
            context.write(data, promise: promise)
        }
    }

    /// A full TLS record's worth of plaintext.
    static let recordSize = 16_384

    func flush(context: ChannelHandlerContext) {
        if let pending, pending.readableBytes >= Self.recordSize {
            flushPending(context: context)
            context.flush()
            return
        }
        guard !flushScheduled else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute {
            self.flushScheduled = false
            guard let context = self.context else { return }
            self.flushPending(context: context)
            context.flush()
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // What was written before the close (a GOAWAY, a RST_STREAM) still goes out.
        if pending != nil {
            flushPending(context: context)
            context.flush()
        }
        context.close(mode: mode, promise: promise)
    }

    private func flushPending(context: ChannelHandlerContext) {
        guard let buffer = pending else { return }
        pending = nil
        let waiting = promises
        promises = []
        if waiting.isEmpty {
            context.write(wrapOutboundOut(.byteBuffer(buffer)), promise: nil)
        } else if waiting.count == 1 {
            context.write(wrapOutboundOut(.byteBuffer(buffer)), promise: waiting[0])
        } else {
            let all = context.eventLoop.makePromise(of: Void.self)
            context.write(wrapOutboundOut(.byteBuffer(buffer)), promise: all)
            all.futureResult.whenComplete { result in
                for p in waiting { p.completeWith(result) }
            }
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        pending = nil
        let waiting = promises
        promises = []
        for p in waiting { p.fail(ChannelError.ioOnClosedChannel) }
    }
}

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
