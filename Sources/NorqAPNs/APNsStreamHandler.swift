import NorqCore
import Logging
import NIOCore
import NIOHTTP2
import NIOHPACK


/// Drives APNs requests directly as HTTP/2 frames on the connection channel (no child channel per request):
/// opens streams for new ids within the server's `SETTINGS_MAX_CONCURRENT_STREAMS`, matches responses by
/// stream id, flushes once per batch, handles GOAWAY / REFUSED_STREAM by handing requests back to the pool,
/// and PINGs an idle connection.
final class APNsStreamHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Stream {
        var box: APNsRequestBox
        var status: Int?
        var headers: [HTTPHeader] = []
        var body: [UInt8] = []
    }

    private let logger: Logger
    private let clientLimit: Int
    private let pingInterval: TimeAmount
    private var context: ChannelHandlerContext?
    /// Strong on purpose: after GOAWAY the pool forgets the connection, and the handler must still hand its
    /// unanswered requests back through it. The cycle (connection -> channel -> handler) is broken in
    /// `handlerRemoved`, when the channel has closed.
    var connection: APNsConnection?

    private var queue = CircularBuffer<APNsRequestBox>()
    private var streams: [Int32: Stream] = [:]
    private var nextStreamID: Int32 = 1
    private var remoteLimit = 1
    /// Token auth: one stream until the first 200.
    private var warmingUp: Bool
    private var goAwayLastStreamID: Int32?
    private var closed = false
    /// A `CompletionBatch` is open for the current read.
    private var inReadBatch = false
    /// Response DATA bytes received since the last connection-level WINDOW_UPDATE. Without a stream
    /// multiplexer NIOHTTP2Handler does not replenish the connection's receive window, so ~64 KiB of error
    /// bodies (about 1,500 JSON reasons) would otherwise stall the connection for good.
    private var unacknowledgedBytes = 0
    private var lastActivity = NIODeadline.now()
    private var pingOutstanding = false
    /// Whether the deadline sweep is scheduled (it runs while requests are queued or in flight).
    private var sweepScheduled = false
    private let settingsPromise: EventLoopPromise<Void>
    private var settingsSeen = false

    /// Completes when the server's first SETTINGS arrive (the TLS handshake and preface are done).
    var ready: EventLoopFuture<Void> { settingsPromise.futureResult }

    init(eventLoop: any EventLoop, logger: Logger, clientLimit: Int, tokenAuth: Bool, pingInterval: Duration) {
        self.logger = logger
        self.clientLimit = max(1, clientLimit)
        self.warmingUp = tokenAuth
        self.pingInterval = .nanoseconds(Int64(pingInterval.components.seconds) * 1_000_000_000
                                         + pingInterval.components.attoseconds / 1_000_000_000)
        self.settingsPromise = eventLoop.makePromise()
    }

    private var limit: Int { warmingUp ? 1 : min(remoteLimit, clientLimit) }

    /// Requests queued or in flight on this connection.
    var load: Int { queue.count + streams.count }

    // MARK: lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        schedulePing(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        endReadBatch()
        self.context = nil
        self.connection = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        CompletionBatch.run { connectionClosed(reason: "connection closed") }
        endReadBatch()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("APNs connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    private func connectionClosed(reason: String) {
        guard !closed else { return }
        closed = true
        if settingsSeen { Metrics.connectionClosed() }
        if !settingsSeen {
            settingsSeen = true
            settingsPromise.fail(NorqError(.transportFailed, "APNs \(reason) before SETTINGS"))
        }
        let inFlight = streams
        streams.removeAll()
        for (_, stream) in inFlight {
            stream.box.unassign()
            stream.box.complete(.failure(NorqError(.transportFailed, "APNs \(reason) before the answer (token \(stream.box.request.logID))")))
        }
        let unsent = Array(queue)
        queue.removeAll()
        connection?.closed(requeue: unsent)
    }

    // MARK: requests

    func enqueue(_ box: APNsRequestBox) {
        enqueue(CollectionOfOne(box))
    }

    /// Takes a batch of requests: arms their deadlines, opens what the stream limit allows, one flush.
    func enqueue(_ boxes: some Collection<APNsRequestBox>) {
        guard !boxes.isEmpty else { return }
        guard !closed, goAwayLastStreamID == nil else {
            connection?.requeue(Array(boxes))
            return
        }
        queue.append(contentsOf: boxes)
        startStreams()
        scheduleSweep()
    }

    func cancelStream(_ id: Int32) {
        guard let context, streams.removeValue(forKey: id) != nil else { return }
        context.write(wrapOutboundOut(HTTP2Frame(streamID: HTTP2StreamID(id), payload: .rstStream(.cancel))), promise: nil)
        context.flush()
        startStreams()
        Metrics.streamsCancelled.increment()
    }

    private func startStreams() {
        guard let context, !closed, goAwayLastStreamID == nil else { return }
        while streams.count < limit, let box = queue.popFirst() {
            if nextStreamID > Int32.max - 2 {
                // Stream ids exhausted: drain this connection like a GOAWAY.
                queue.prepend(box)
                beginDrain(lastStreamID: nextStreamID - 2, reason: "stream ids exhausted")
                return
            }
            let id = nextStreamID
            guard let connection else {
                queue.prepend(box)
                return
            }
            guard box.assign(connection: connection, streamID: id) else { continue }
            nextStreamID += 2
            streams[id] = Stream(box: box)
            let streamID = HTTP2StreamID(id)
            let body = box.request.body
            context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(
                .init(headers: box.request.headers, endStream: body.readableBytes == 0)))), promise: nil)
            if body.readableBytes > 0 {
                context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(
                    .init(data: .byteBuffer(body), endStream: true)))), promise: nil)
            }
            // A flush per request: NIOHTTP2 holds DATA frames until a flush and then sends the held ones in
            // hash order, so one flush per batch would reach the server in random stream order (and make
            // NIOHTTP2's sorted per-stream state close from the middle: O(open streams) per request).
            // WriteCoalescingHandler turns these flushes into one write per event-loop tick.
            context.flush()
            Metrics.streamsOpened.increment()
        }
    }

    // MARK: deadlines

    /// Every request's deadline, checked by one timer per connection rather than one timer per request (a
    /// timer each cost a heap insertion and a cancellation per request on the event loop). Expired queued
    /// requests are dropped, expired streams reset with CANCEL.
    private static let sweepInterval = TimeAmount.milliseconds(10)

    private func scheduleSweep() {
        guard !sweepScheduled, !closed, load > 0, let context else { return }
        sweepScheduled = true
        context.eventLoop.assumeIsolated().scheduleTask(in: Self.sweepInterval) {
            self.sweepScheduled = false
            self.sweepDeadlines()
            self.scheduleSweep()
        }
    }

    /// Takes the expired requests out of the queue and the stream map first and completes them after: a
    /// completion may enqueue new requests on this handler right away.
    private func sweepDeadlines() {
        guard let context, !closed else { return }
        let now = NIODeadline.now()
        var expired: [APNsRequestBox] = []
        if queue.contains(where: { $0.deadline <= now }) {
            var kept = CircularBuffer<APNsRequestBox>(initialCapacity: queue.count)
            for box in queue {
                if box.deadline <= now {
                    expired.append(box)
                } else {
                    kept.append(box)  // one completed meanwhile is skipped when its turn comes
                }
            }
            queue = kept
        }
        var expiredStreams: [Int32] = []
        for (id, stream) in streams where stream.box.deadline <= now {
            expiredStreams.append(id)
        }
        for id in expiredStreams {
            guard let stream = streams.removeValue(forKey: id) else { continue }
            stream.box.unassign()
            expired.append(stream.box)
            context.write(wrapOutboundOut(HTTP2Frame(streamID: HTTP2StreamID(id), payload: .rstStream(.cancel))),
                          promise: nil)
            Metrics.streamsCancelled.increment()
        }
        guard !expired.isEmpty else { return }
        if !expiredStreams.isEmpty { context.flush() }
        CompletionBatch.run {
            for box in expired { box.completeAsExpired() }
        }
        startStreams()
        drainIfDone()
    }

    // MARK: inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The answers of one read complete as one batch (ended in channelReadComplete): what the completions
        // wake (a streaming send's consumer) is woken once per read.
        if !inReadBatch {
            inReadBatch = true
            CompletionBatch.begin()
        }
        let frame = unwrapInboundIn(data)
        lastActivity = .now()
        pingOutstanding = false
        let id = Int32(frame.streamID)
        switch frame.payload {
        case .headers(let headers):
            // An answer without a body (a 200) ends its stream here: taken out of the map once, not read,
            // written back and removed.
            guard var stream = headers.endStream ? streams.removeValue(forKey: id) : streams[id] else { return }
            stream.headers.reserveCapacity(stream.headers.count + headers.headers.count)  // one allocation, not a growth per header
            for header in headers.headers {
                if header.name == ":status" {
                    if stream.status == nil { stream.status = Int(header.value) }
                } else if !header.name.hasPrefix(":") {
                    stream.headers.append(HTTPHeader(header.name, header.value))
                }
            }
            if headers.endStream {
                finish(stream)
            } else {
                streams[id] = stream
            }
        case .data(let data):
            // No stream multiplexer replenishes the connection-level receive window: count every DATA byte
            // and hand it back at the end of the read batch, or error bodies stall the connection after 64 KB.
            unacknowledgedBytes += data.data.readableBytes + (data.paddingBytes ?? 0)
            guard streams[id] != nil else { return }
            if case .byteBuffer(let buffer) = data.data, buffer.readableBytes > 0 {
                streams[id]?.body.append(contentsOf: buffer.readableBytesView)
            }
            if data.endStream { finish(id) }
        case .settings(.settings(let settings)):
            for setting in settings where setting.parameter == .maxConcurrentStreams {
                remoteLimit = max(0, setting.value)
            }
            if !settingsSeen {
                settingsSeen = true
                settingsPromise.succeed()
            }
            startStreams()
        case .goAway(let lastStreamID, let errorCode, let opaqueData):
            var reason = ""
            if let opaqueData { reason = String(buffer: opaqueData) }
            logger.notice("APNs sent GOAWAY", metadata: [
                "lastStreamID": "\(lastStreamID)", "errorCode": "\(errorCode)", "reason": "\(reason)",
            ])
            beginDrain(lastStreamID: Int32(lastStreamID), reason: "GOAWAY")
        case .ping(_, ack: true):
            pingOutstanding = false
        default:
            break
        }
    }

    private func endReadBatch() {
        guard inReadBatch else { return }
        inReadBatch = false
        CompletionBatch.end()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        defer { endReadBatch() }
        if unacknowledgedBytes >= 16_384, !closed {
            context.write(wrapOutboundOut(HTTP2Frame(
                streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unacknowledgedBytes))), promise: nil)
            unacknowledgedBytes = 0
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closedEvent = event as? StreamClosedEvent {
            let id = Int32(closedEvent.streamID)
            if let stream = streams.removeValue(forKey: id) {
                // Closed without a complete answer.
                if closedEvent.reason == .refusedStream || (goAwayLastStreamID.map { id > $0 } ?? false) {
                    stream.box.unassign()
                    connection?.requeue([stream.box])
                } else {
                    stream.box.unassign()
                    stream.box.complete(.failure(NorqError(.transportFailed,
                        "APNs reset the stream (\(closedEvent.reason.map { "\($0)" } ?? "no code")) before the answer (token \(stream.box.request.logID))")))
                }
                startStreams()
                drainIfDone()
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func finish(_ id: Int32) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        finish(stream)
    }

    /// Completes a stream already taken out of `streams`.
    private func finish(_ stream: Stream) {
        let status = stream.status ?? 0
        if (200..<300).contains(status) { warmingUp = false }
        stream.box.complete(.success(APNsWireResponse(status: status, headers: stream.headers, body: stream.body)))
        Metrics.streamsCompleted.increment()
        startStreams()
        drainIfDone()
    }

    private func beginDrain(lastStreamID: Int32, reason: String) {
        if goAwayLastStreamID == nil { goAwayLastStreamID = lastStreamID }
        var requeue: [APNsRequestBox] = Array(queue)
        queue.removeAll()
        for (id, stream) in streams where id > lastStreamID {
            streams.removeValue(forKey: id)
            stream.box.unassign()
            requeue.append(stream.box)
        }
        connection?.draining()
        if !requeue.isEmpty {
            Metrics.streamsRequeued.increment(by: requeue.count)
            connection?.requeue(requeue)
        }
        drainIfDone()
    }

    private func drainIfDone() {
        if goAwayLastStreamID != nil, streams.isEmpty, let context {
            context.close(promise: nil)
        }
    }

    // MARK: ping

    private func schedulePing(context: ChannelHandlerContext) {
        guard pingInterval > .zero else { return }
        context.eventLoop.assumeIsolated().scheduleTask(in: pingInterval) {
            guard let context = self.context, !self.closed else { return }
            // Not before the server's SETTINGS: a slow TLS handshake is the connect timeout's business.
            if self.settingsSeen, NIODeadline.now() - self.lastActivity >= self.pingInterval {
                if self.pingOutstanding {
                    self.logger.notice("APNs connection did not answer PING; replacing it")
                    // Hand the connection back now: closing TLS waits (up to 5 s) for a close_notify that a
                    // dead peer never sends, and until channelInactive the pool would keep using it.
                    self.connectionClosed(reason: "connection did not answer PING")
                    context.close(promise: nil)
                    return
                }
                self.pingOutstanding = true
                context.writeAndFlush(self.wrapOutboundOut(HTTP2Frame(streamID: .rootStream,
                    payload: .ping(HTTP2PingData(withInteger: 0x4e4f5251), ack: false))), promise: nil)
            }
            self.schedulePing(context: context)
        }
    }
}
