import NIOCore
import NIOHTTP1

/// Serves one HTTP/1.1 connection or one HTTP/2 stream (through NIOHTTP2's HTTP/1 codec) of the push-service
/// emulator. Request bodies are bounded (64 KiB kept; anything larger is answered 413 without being kept).
final class WebPushEmulatorHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static let maxKeptBody = 64 * 1024

    private let shared: WebPushEmulatorShared
    private let connection: WebPushEmulatorConnection
    private let httpVersion: String
    private let streamID: Int?
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false
    private var closed = false

    init(shared: WebPushEmulatorShared, connection: WebPushEmulatorConnection, httpVersion: String, streamID: Int?) {
        self.shared = shared
        self.connection = connection
        self.httpVersion = httpVersion
        self.streamID = streamID
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.removeAll(keepingCapacity: true)
            tooLarge = false
            if streamID == nil {
                // HTTP/1.1: one request at a time per connection; count requests for the drop fault.
                let number = connection.openedStream(id: 0)
                if let n = shared.streamFaults.dropConnectionAfterStreams, number >= n {
                    closed = true
                    context.close(promise: nil)
                }
            }
        case .body(var buffer):
            if body.count + buffer.readableBytes > Self.maxKeptBody {
                tooLarge = true
            } else if let bytes = buffer.readBytes(length: buffer.readableBytes) {
                body.append(contentsOf: bytes)
            }
        case .end:
            guard let head, !closed else { return }
            self.head = nil
            var headers = head.headers.map { (name: $0.name, value: $0.value) }
            if tooLarge { body = [UInt8](repeating: 0, count: 4097) }
            let (answer, record) = shared.handle(method: head.method.rawValue, path: head.uri, headers: headers,
                                                 body: body, httpVersion: httpVersion)
            headers.removeAll()
            if answer.silent {
                context.channel.closeFuture.whenComplete { [shared] _ in shared.record(record) }
                return
            }
            if answer.latency > .zero {
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                let nanos = answer.latency.components.seconds * 1_000_000_000 + answer.latency.components.attoseconds / 1_000_000_000
                context.eventLoop.scheduleTask(in: .nanoseconds(nanos)) {
                    let (handler, context) = loopBound.value
                    handler.respond(context: context, answer: answer, record: record, keepAlive: head.isKeepAlive)
                }
            } else {
                respond(context: context, answer: answer, record: record, keepAlive: head.isKeepAlive)
            }
        }
    }

    private func respond(context: ChannelHandlerContext, answer: WebPushEmulatorShared.Answer,
                         record: WebPushEmulator.Message, keepAlive: Bool) {
        var record = record
        guard context.channel.isActive else {
            record.status = 0
            shared.record(record)
            return
        }
        // Recorded before the answer is written: a client that has the answer finds the record.
        shared.record(record)
        var headers = HTTPHeaders()
        for (name, value) in answer.headers { headers.add(name: name, value: value) }
        headers.add(name: "content-length", value: String(answer.body.utf8.count))
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: answer.status),
                                                             headers: headers))), promise: nil)
        if !answer.body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: answer.body)))), promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        if streamID == nil, !keepAlive { context.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
