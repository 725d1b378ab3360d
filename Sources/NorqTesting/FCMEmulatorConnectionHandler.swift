import NIOCore
import NIOHPACK
import NIOHTTP2

/// Serves one HTTP/2 connection of the FCM emulator on raw frames (no child channel per stream), like the APNs
/// emulator's handler: the same connection-window bookkeeping, GOAWAY and drop faults, and latency.
/// Lives on the connection's event loop; only the shared state is locked.
final class FCMEmulatorConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// Largest request body kept per stream (FCM messages are at most a few KiB); larger ones are answered 413.
    static let maxBodyBytes = 64 * 1024

    private let shared: FCMEmulatorShared
    private var connectionID = 0

    private struct PendingStream {
        var headers: HPACKHeaders
        var body: ByteBuffer?
        var tooLarge = false
    }
    private var streams: [HTTP2StreamID: PendingStream] = [:]
    private var streamCount = 0
    private var goAwayLastStreamID: HTTP2StreamID?
    private var goAwayPending = false
    private var delayedAnswers = 0
    private var needsFlush = false
    private var closed = false
    private var unacknowledgedBytes = 0
    private var connectionWindowOpened = false
    private var sawFrame = false

    init(shared: FCMEmulatorShared) {
        self.shared = shared
    }

    func handlerAdded(context: ChannelHandlerContext) {
        connectionID = shared.register(context.channel)
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        for (_, stream) in streams { record(stream, answer: nil, message: nil) }
        streams.removeAll()
        shared.unregister(connectionID)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if closed { return }
        sawFrame = true
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let h):
            if let last = goAwayLastStreamID, frame.streamID > last { return }
            if streams[frame.streamID] != nil {
                if h.endStream { complete(context: context, streamID: frame.streamID) }
                return
            }
            streams[frame.streamID] = PendingStream(headers: h.headers, body: nil)
            streamCount += 1
            let faults = shared.streamFaults
            if let n = faults.dropConnectionAfterStreams, streamCount >= n {
                context.flush()
                closed = true
                context.close(promise: nil)
                return
            }
            if let n = faults.goAwayAfterStreams, streamCount == n, goAwayLastStreamID == nil {
                goAwayLastStreamID = frame.streamID
                goAwayPending = true
                needsFlush = true
            }
            if h.endStream { complete(context: context, streamID: frame.streamID) }
        case .data(let d):
            unacknowledgedBytes += d.data.readableBytes + (d.paddingBytes ?? 0)
            guard var stream = streams[frame.streamID] else { return }
            if case .byteBuffer(var bytes) = d.data, !stream.tooLarge {
                if (stream.body?.readableBytes ?? 0) + bytes.readableBytes > Self.maxBodyBytes {
                    stream.tooLarge = true
                    stream.body = nil
                } else if stream.body == nil {
                    stream.body = bytes
                } else {
                    stream.body!.writeBuffer(&bytes)
                }
                streams[frame.streamID] = stream
            }
            if d.endStream { complete(context: context, streamID: frame.streamID) }
        case .rstStream:
            if let stream = streams.removeValue(forKey: frame.streamID) { record(stream, answer: nil, message: nil) }
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if !connectionWindowOpened, sawFrame, !closed {
            // See EmulatorConnectionHandler: a large connection window keeps streams above a GOAWAY harmless.
            connectionWindowOpened = true
            unacknowledgedBytes += 1 << 30
        }
        if unacknowledgedBytes > 0, !closed {
            context.write(wrapOutboundOut(HTTP2Frame(
                streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unacknowledgedBytes))), promise: nil)
            unacknowledgedBytes = 0
            needsFlush = true
        }
        if goAwayPending, let last = goAwayLastStreamID {
            goAwayPending = false
            context.write(wrapOutboundOut(HTTP2Frame(
                streamID: .rootStream, payload: .goAway(lastStreamID: last, errorCode: .noError, opaqueData: nil))),
                promise: nil)
        }
        if needsFlush {
            needsFlush = false
            context.flush()
        }
        closeAfterGoAwayIfDone(context: context)
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // NIOHTTP2Handler and NIOSSL close the connection themselves on connection-level errors.
    }

    private func closeAfterGoAwayIfDone(context: ChannelHandlerContext) {
        if goAwayLastStreamID != nil, streams.isEmpty, delayedAnswers == 0, !closed {
            closed = true
            context.close(promise: nil)
        }
    }

    private func complete(context: ChannelHandlerContext, streamID: HTTP2StreamID) {
        guard let stream = streams[streamID] else { return }
        if stream.tooLarge {
            streams.removeValue(forKey: streamID)
            let answer = FCMEmulatorRules.error(413, errorCode: nil, message: "Request entity too large")
            write(context: context, streamID: streamID, stream: stream, answer: answer, message: nil, flush: false)
            return
        }
        var method = "", path = ""
        var authorization: String?
        for (name, value, _) in stream.headers {
            switch name {
            case ":method": method = value
            case ":path": path = value
            case "authorization": authorization = value
            default: break
            }
        }
        let body = stream.body.map { Array($0.readableBytesView) } ?? []
        let (decision, message) = shared.handle(method: method, path: path, authorization: authorization, body: body)
        switch decision {
        case .silent:
            break  // stays in `streams`, recorded with status 0 if the connection closes
        case .answer(let answer, let latency):
            streams.removeValue(forKey: streamID)
            if latency == .zero {
                write(context: context, streamID: streamID, stream: stream, answer: answer, message: message, flush: false)
                return
            }
            delayedAnswers += 1
            let nanos = latency.components.seconds * 1_000_000_000 + latency.components.attoseconds / 1_000_000_000
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .nanoseconds(nanos)) {
                let (handler, context) = loopBound.value
                handler.delayedAnswers -= 1
                if handler.closed {
                    handler.record(stream, answer: nil, message: message)
                } else {
                    handler.write(context: context, streamID: streamID, stream: stream, answer: answer, message: message,
                                  flush: true)
                    handler.closeAfterGoAwayIfDone(context: context)
                }
            }
        }
    }

    private func write(context: ChannelHandlerContext, streamID: HTTP2StreamID, stream: PendingStream,
                       answer: FCMEmulatorAnswer, message: FCMEmulatorRules.ValidMessage?, flush: Bool) {
        var headers = HPACKHeaders()
        headers.add(name: ":status", value: String(answer.status))
        for (name, value) in answer.headers { headers.add(name: name, value: value) }
        var body = context.channel.allocator.buffer(capacity: answer.body.count)
        body.writeBytes(answer.body)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))),
                      promise: nil)
        context.write(wrapOutboundOut(HTTP2Frame(
            streamID: streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
        if flush { context.flush() } else { needsFlush = true }
        record(stream, answer: answer, message: message)
    }

    private func record(_ stream: PendingStream, answer: FCMEmulatorAnswer?, message: FCMEmulatorRules.ValidMessage?) {
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
        shared.record(FCMEmulator.RecordedRequest(
            method: method, path: path, headers: headers, body: stream.body.map { Array($0.readableBytesView) } ?? [],
            target: message.map { ($0.targetKind, $0.target) }, blocks: message?.blocks ?? [],
            status: answer?.status ?? 0, errorCode: answer?.errorCode, messageName: answer?.messageName,
            connectionID: connectionID))
    }
}
