import NIOCore

/// Sits between the socket and TLS. When a read fails (a TCP reset: ECONNRESET), NIO reports the error and closes
/// the channel without a read-complete; NIOSSL hands decrypted bytes on only at read-complete (or on
/// CLOSE_NOTIFY), so the answers that arrived in the same read as the reset were dropped. This handler signals
/// read-complete before the error, so they reach the HTTP/2 handler and count.
///
/// What remains: bytes the kernel discarded (Linux keeps received data readable before reporting the reset, but
/// a reset that overtakes data still in flight loses it), and a TLS record cut in half by the reset.
final class HTTP2ReadFlushHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// A read since the last read-complete.
    private var readPending = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        readPending = true
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        readPending = false
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if readPending {
            readPending = false
            context.fireChannelReadComplete()
        }
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if readPending {
            readPending = false
            context.fireChannelReadComplete()
        }
        context.fireChannelInactive()
    }
}
