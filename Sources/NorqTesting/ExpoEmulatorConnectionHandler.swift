import NIOCore
import NIOHPACK
import NIOHTTP2

/// Serves one HTTP/2 connection of the Expo emulator on raw frames (no child channel per stream), like the APNs
/// emulator's handler: the same connection-window bookkeeping, GOAWAY and drop faults, and latency.
/// Lives on the connection's event loop; only the shared state is locked.
final class ExpoEmulatorConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private let shared: ExpoEmulatorShared
    private var connectionID = 0

    private typealias PendingStream = EmulatorConnectionState.Stream
    /// Streams, faults, the connection window and the close after GOAWAY (shared with the APNs emulator).
    private var connection = EmulatorConnectionState()

    init(shared: ExpoEmulatorShared) {
        self.shared = shared
    }

    func handlerAdded(context: ChannelHandlerContext) {
        connectionID = shared.register(context.channel)
    }

    func channelInactive(context: ChannelHandlerContext) {
        for (_, stream) in connection.closedByPeer() { record(stream, answer: nil, message: nil) }
        shared.unregister(connectionID)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch connection.receive(frame, faults: shared.streamFaults) {
        case .nothing:
            break
        case .complete(let streamID):
            complete(context: context, streamID: streamID)
        case .reset(_, let stream):
            record(stream, answer: nil, message: nil)
        case .drop:
            context.flush()
            context.close(promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        for payload in connection.readComplete() {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: payload)), promise: nil)
        }
        if connection.takeFlush() { context.flush() }
        if connection.closeIfDrained() { context.close(promise: nil) }
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // NIOHTTP2Handler and NIOSSL close the connection themselves on connection-level errors.
    }

    private func complete(context: ChannelHandlerContext, streamID: HTTP2StreamID) {
        guard let stream = connection.stream(streamID) else { return }
        if stream.tooLarge {
            connection.remove(streamID)
            let answer = ExpoEmulatorRules.requestError(413, code: "PAYLOAD_TOO_LARGE", message: "Request entity too large")
            write(context: context, streamID: streamID, stream: stream, answer: answer, flush: false)
            return
        }
        var method = "", path = ""
        var authorization: String?
        var encoding: String?
        for (name, value, _) in stream.headers {
            switch name {
            case ":method": method = value
            case ":path": path = value
            case "authorization": authorization = value
            case "content-encoding": encoding = value
            default: break
            }
        }
        let body = stream.body.map { Array($0.readableBytesView) } ?? []
        let decision = shared.handle(method: method, path: path, authorization: authorization, encoding: encoding,
                                     body: body)
        switch decision {
        case .silent:
            break  // stays in `streams`, recorded with status 0 if the connection closes
        case .answer(let answer, let latency):
            connection.remove(streamID)
            if latency == .zero {
                write(context: context, streamID: streamID, stream: stream, answer: answer, flush: false)
                return
            }
            connection.delayedAnswers += 1
            let nanos = latency.components.seconds * 1_000_000_000 + latency.components.attoseconds / 1_000_000_000
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .nanoseconds(nanos)) {
                let (handler, context) = loopBound.value
                handler.connection.delayedAnswers -= 1
                if handler.connection.closed {
                    handler.record(stream, answer: nil, message: answer.detail)
                } else {
                    handler.write(context: context, streamID: streamID, stream: stream, answer: answer, flush: true)
                    if handler.connection.closeIfDrained() { context.close(promise: nil) }
                }
            }
        }
    }

    private func write(context: ChannelHandlerContext, streamID: HTTP2StreamID, stream: PendingStream,
                       answer: ExpoEmulatorAnswer, flush: Bool) {
        var headers = HPACKHeaders()
        headers.add(name: ":status", value: String(answer.status))
        for (name, value) in answer.headers { headers.add(name: name, value: value) }
        var body = context.channel.allocator.buffer(capacity: answer.body.count)
        body.writeBytes(answer.body)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))),
                      promise: nil)
        context.write(wrapOutboundOut(HTTP2Frame(
            streamID: streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
        if flush { context.flush() } else { connection.needsFlush = true }
        record(stream, answer: answer, message: answer.detail)
    }

    private func record(_ stream: PendingStream, answer: ExpoEmulatorAnswer?, message: ExpoEmulator.RecordedRequest.Detail?) {
        guard shared.configuration.recordRequests else { return }
        var method = "", path = ""
        var headers: [(name: String, value: String)] = []
        for (name, value, _) in stream.headers {
            switch name {
            case ":method": method = value
            case ":path": path = value
            default: if !name.hasPrefix(":") { headers.append((name, value)) }
            }
        }
        shared.record(ExpoEmulator.RecordedRequest(
            method: method, path: path, headers: headers, body: stream.body.map { Array($0.readableBytesView) } ?? [],
            detail: message ?? .init(), status: answer?.status ?? 0, errorCode: answer?.errorCode,
            connectionID: connectionID))
    }
}
