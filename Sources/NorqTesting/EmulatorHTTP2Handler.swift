public import NIOCore
import NIOHPACK
public import NIOHTTP2

/// Serves one HTTP/2 connection of an emulator on raw frames (no child channel per stream) for an
/// ``EmulatorHTTP2Service``: the connection-window bookkeeping, GOAWAY and drop faults and the close after GOAWAY
/// (``EmulatorConnectionState``), answers written at once or after the service's latency, requests handed to the
/// service's records. The FCM and Expo emulators and the benchmarks' Expo sink are services of it. Lives on the
/// connection's event loop; the service locks its own state.
public final class EmulatorHTTP2Handler<Service: EmulatorHTTP2Service>: ChannelDuplexHandler, EmulatorDelayedAnswering {
    public typealias InboundIn = HTTP2Frame
    public typealias OutboundIn = HTTP2Frame
    public typealias OutboundOut = HTTP2Frame

    private let service: Service
    private var connectionID = 0
    var connection: EmulatorConnectionState

    public init(service: Service) {
        self.service = service
        self.connection = EmulatorConnectionState(maxBodyBytes: service.maxRequestBodyBytes)
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        connectionID = service.connectionOpened(context.channel)
    }

    public func channelInactive(context: ChannelHandlerContext) {
        for (_, stream) in connection.closedByPeer() { recordUnanswered(stream, answer: nil) }
        service.connectionClosed(connectionID)
        context.fireChannelInactive()
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch connection.receive(frame, faults: service.streamFaults) {
        case .nothing:
            break
        case .complete(let streamID):
            complete(context: context, streamID: streamID)
        case .reset(_, let stream):
            recordUnanswered(stream, answer: nil)
        case .drop:
            context.flush()
            context.close(promise: nil)
        }
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        for payload in connection.readComplete() {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: payload)), promise: nil)
        }
        if connection.takeFlush() { context.flush() }
        if connection.closeIfDrained() { context.close(promise: nil) }
        context.fireChannelReadComplete()
    }

    public func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // NIOHTTP2Handler and NIOSSL close the connection themselves on connection-level errors.
    }

    private func complete(context: ChannelHandlerContext, streamID: HTTP2StreamID) {
        guard let stream = connection.stream(streamID) else { return }
        let request = Self.request(stream)
        if stream.tooLarge {
            connection.remove(streamID)
            write(context: context, streamID: streamID, request: request, answer: service.payloadTooLarge(), flush: false)
            return
        }
        switch service.handle(request) {
        case .silent:
            break  // stays in the connection's streams, recorded unanswered if the connection closes
        case .answer(let answer, let latency):
            connection.remove(streamID)
            if latency == .zero {
                write(context: context, streamID: streamID, request: request, answer: answer, flush: false)
                return
            }
            self.answer(after: latency, context: context,
                        write: { $0.write(context: $1, streamID: streamID, request: request, answer: answer, flush: true) },
                        unanswered: { $0.record(request, answer: answer, answered: false) })
        }
    }

    private func write(context: ChannelHandlerContext, streamID: HTTP2StreamID, request: EmulatorHTTP2Request,
                       answer: Service.Answer, flush: Bool) {
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
        record(request, answer: answer, answered: true)
    }

    private func recordUnanswered(_ stream: EmulatorConnectionState.Stream, answer: Service.Answer?) {
        guard service.recordsRequests else { return }
        record(Self.request(stream), answer: answer, answered: false)
    }

    private func record(_ request: EmulatorHTTP2Request, answer: Service.Answer?, answered: Bool) {
        guard service.recordsRequests else { return }
        service.record(request, answer: answer, answered: answered, connectionID: connectionID)
    }

    /// The stream's request: its method, path, regular headers and body.
    private static func request(_ stream: EmulatorConnectionState.Stream) -> EmulatorHTTP2Request {
        var method = "", path = ""
        var headers: [(name: String, value: String)] = []
        for (name, value, _) in stream.headers {
            switch name {
            case ":method": method = value
            case ":path": path = value
            default: if !name.hasPrefix(":") { headers.append((name, value)) }
            }
        }
        return EmulatorHTTP2Request(method: method, path: path, headers: headers,
                                    body: stream.body ?? ByteBuffer())
    }
}
