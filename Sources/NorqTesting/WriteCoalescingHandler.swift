import NIOCore

/// Gathers every buffer written between two flushes into one buffer, so NIOSSL makes one TLS record
/// (up to 16 KB each) per flush instead of one tiny record per HTTP/2 frame.
final class WriteCoalescingHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private var pending: ByteBuffer?
    private var promises: [EventLoopPromise<Void>] = []

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

    func flush(context: ChannelHandlerContext) {
        flushPending(context: context)
        context.flush()
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
        pending = nil
        let waiting = promises
        promises = []
        for p in waiting { p.fail(ChannelError.ioOnClosedChannel) }
    }
}
