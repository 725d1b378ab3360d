import NIOCore
import NIOHPACK
import NIOHTTP2

/// The connection-level half of the APNs emulator's handler and of ``EmulatorHTTP2Handler`` (FCM, Expo, the
/// benchmarks' Expo sink), which serve HTTP/2 on raw frames (no child channel per stream): the requests being
/// received, the GOAWAY and drop faults, the connection window handed back at the end of each read batch, and the
/// close once a GOAWAY's streams are all answered. A value: the handler feeds it frames and carries out what it
/// returns.
///
/// Bound: a request body above `maxBodyBytes` is not kept (the stream is marked `tooLarge`, to be answered 413),
/// so a client cannot grow the emulator's memory by sending one endless body.
struct EmulatorConnectionState {
    struct Stream {
        var headers: HPACKHeaders
        var body: ByteBuffer?
        /// The body passed `maxBodyBytes`: it was dropped.
        var tooLarge = false
    }

    /// What a received frame asks of the handler.
    enum Received {
        case nothing
        /// The request on this stream is complete (END_STREAM): answer it.
        case complete(HTTP2StreamID)
        /// The client reset a stream that was not answered yet.
        case reset(HTTP2StreamID, Stream)
        /// The drop fault: close the connection now (after flushing what is answered).
        case drop
    }

    /// Largest request body kept per stream by default (APNs and FCM bodies are a few KiB).
    static let defaultMaxBodyBytes = 64 * 1024
    /// Largest request body kept per stream (Expo's batches of 100 messages take more than the default).
    let maxBodyBytes: Int

    init(maxBodyBytes: Int = Self.defaultMaxBodyBytes) {
        self.maxBodyBytes = maxBodyBytes
    }

    private(set) var streams: [HTTP2StreamID: Stream] = [:]
    /// Answers scheduled for later (the latency fault): the connection closes after a GOAWAY only once they went.
    var delayedAnswers = 0
    /// Frames were written without a flush: flushed at the end of the read batch.
    var needsFlush = false
    private(set) var closed = false
    private var streamCount = 0
    private var goAwayLastStreamID: HTTP2StreamID?
    private var goAwayPending = false
    /// DATA bytes received since the last connection-level WINDOW_UPDATE. NIOHTTP2Handler only replenishes the
    /// connection window through its stream multiplexer, which the emulators do not use: without these updates a
    /// client stalls after 64 KiB of request bodies on a connection.
    private var unacknowledgedBytes = 0
    /// Whether the large connection window was granted (after the client's first frame).
    private var connectionWindowOpened = false
    private var sawFrame = false

    /// Takes one frame from the client.
    mutating func receive(_ frame: HTTP2Frame, faults: EmulatorStreamFaults) -> Received {
        if closed { return .nothing }
        sawFrame = true
        switch frame.payload {
        case .headers(let headers):
            // Above the GOAWAY's last-stream-id: not processed (the client retries it elsewhere).
            if let last = goAwayLastStreamID, frame.streamID > last { return .nothing }
            if streams[frame.streamID] != nil {
                // Trailers: their content is ignored, but they may end the stream.
                return headers.endStream ? .complete(frame.streamID) : .nothing
            }
            streams[frame.streamID] = Stream(headers: headers.headers, body: nil)
            streamCount += 1
            if let n = faults.dropConnectionAfterStreams, streamCount >= n {
                closed = true
                return .drop
            }
            if let n = faults.goAwayAfterStreams, streamCount == n, goAwayLastStreamID == nil {
                // Sent at the end of the read batch: written from inside NIOHTTP2Handler's read loop, the handler
                // rejects it.
                goAwayLastStreamID = frame.streamID
                goAwayPending = true
                needsFlush = true
            }
            return headers.endStream ? .complete(frame.streamID) : .nothing
        case .data(let data):
            // Counted whether the stream is known or not: the client used the window either way.
            unacknowledgedBytes += data.data.readableBytes + (data.paddingBytes ?? 0)
            guard var stream = streams[frame.streamID] else { return .nothing }
            if case .byteBuffer(var bytes) = data.data, !stream.tooLarge {
                if (stream.body?.readableBytes ?? 0) + bytes.readableBytes > maxBodyBytes {
                    stream.tooLarge = true
                    stream.body = nil
                } else if stream.body == nil {
                    stream.body = bytes
                } else {
                    stream.body!.writeBuffer(&bytes)
                }
                streams[frame.streamID] = stream
            }
            return data.endStream ? .complete(frame.streamID) : .nothing
        case .rstStream:
            guard let stream = streams.removeValue(forKey: frame.streamID) else { return .nothing }
            return .reset(frame.streamID, stream)
        default:
            return .nothing
        }
    }

    /// The stream's request (nil once answered or reset).
    func stream(_ id: HTTP2StreamID) -> Stream? { streams[id] }

    /// Takes the stream out: it is being answered.
    mutating func remove(_ id: HTTP2StreamID) {
        streams.removeValue(forKey: id)
    }

    /// The end of a read batch: the connection-level frames to write now (WINDOW_UPDATE, a pending GOAWAY).
    mutating func readComplete() -> [HTTP2Frame.FramePayload] {
        guard !closed else { return [] }
        var frames: [HTTP2Frame.FramePayload] = []
        if !connectionWindowOpened, sawFrame {
            // NIOHTTP2Handler drops DATA for streams above a GOAWAY's last-stream-id before the handler sees them,
            // yet they use up the connection window, which then never comes back: a client with streams still to
            // finish below the last id would stall. A 1 GiB connection window (as APNs-sized servers advertise)
            // makes that loss harmless; everything the handler reads is still handed back.
            connectionWindowOpened = true
            unacknowledgedBytes += 1 << 30
        }
        if unacknowledgedBytes > 0 {
            frames.append(.windowUpdate(windowSizeIncrement: unacknowledgedBytes))
            unacknowledgedBytes = 0
            needsFlush = true
        }
        if goAwayPending, let last = goAwayLastStreamID {
            goAwayPending = false
            frames.append(.goAway(lastStreamID: last, errorCode: .noError, opaqueData: nil))
        }
        return frames
    }

    /// Whether to flush now; clears the flag.
    mutating func takeFlush() -> Bool {
        defer { needsFlush = false }
        return needsFlush
    }

    /// After a GOAWAY, once every stream below it is answered (delayed answers included): true when the handler
    /// closes the connection now.
    mutating func closeIfDrained() -> Bool {
        guard goAwayLastStreamID != nil, streams.isEmpty, delayedAnswers == 0, !closed else { return false }
        closed = true
        return true
    }

    /// The connection closed: the requests received but never answered.
    mutating func closedByPeer() -> [(HTTP2StreamID, Stream)] {
        closed = true
        let unanswered = streams.map { ($0.key, $0.value) }
        streams.removeAll()
        return unanswered
    }
}

#if compiler(>=6.2)
/// A raw-frame emulator handler that answers some requests after a latency (the APNs handler and
/// ``EmulatorHTTP2Handler``): the delayed answer's bookkeeping, once. Its metatype is sendable: the delayed answer's
/// task on the event loop names the handler's type.
protocol EmulatorDelayedAnswering: AnyObject, SendableMetatype {
    var connection: EmulatorConnectionState { get set }
}
#else
/// As above, for Swift 6.1 (the package's oldest), which has no `SendableMetatype`.
protocol EmulatorDelayedAnswering: AnyObject {
    var connection: EmulatorConnectionState { get set }
}
#endif

extension EmulatorDelayedAnswering {
    /// Runs `write` on the connection's event loop after `latency`, and closes the connection after it when a GOAWAY
    /// was waiting for this answer; `unanswered` instead when the connection closed meanwhile.
    func answer(after latency: Duration, context: ChannelHandlerContext,
                write: @escaping (Self, ChannelHandlerContext) -> Void, unanswered: @escaping (Self) -> Void) {
        connection.delayedAnswers += 1
        let nanoseconds = latency.components.seconds * 1_000_000_000 + latency.components.attoseconds / 1_000_000_000
        let loopBound = NIOLoopBound((self, context, write, unanswered), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: .nanoseconds(nanoseconds)) {
            let (handler, context, write, unanswered) = loopBound.value
            handler.connection.delayedAnswers -= 1
            if handler.connection.closed {
                unanswered(handler)
            } else {
                write(handler, context)
                if handler.connection.closeIfDrained() { context.close(promise: nil) }
            }
        }
    }
}
