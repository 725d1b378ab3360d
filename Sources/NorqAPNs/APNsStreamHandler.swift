import NorqCore
import Logging
import NIOCore
import NIOHPACK

/// Drives APNs requests as HTTP/2 streams on the connection's TLS channel, with its own client framing
/// (``HTTP2ClientConnection``) rather than a general HTTP/2 stack: opens streams for new ids within the server's
/// `SETTINGS_MAX_CONCURRENT_STREAMS`, matches responses by stream id, writes the frames of one event-loop tick as
/// one buffer, handles GOAWAY / REFUSED_STREAM by handing requests back to the pool, and PINGs an idle connection.
final class APNsStreamHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private struct Stream {
        var box: APNsRequestBox
        var status: Int?
        var headers: [HTTPHeader] = []
        var body: [UInt8] = []
        /// Response bytes not yet given back as stream window.
        var unacknowledgedBytes = 0
    }

    private let logger: Logger
    private let clientLimit: Int
    private let pingInterval: TimeAmount
    private var context: ChannelHandlerContext?
    private var http2: HTTP2ClientConnection
    /// A write of `http2.outbound` is scheduled for the end of this event-loop tick.
    private var writeScheduled = false
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
    /// Response DATA bytes received since the last connection-level WINDOW_UPDATE: without one, ~64 KiB of
    /// error bodies (about 1,500 JSON reasons) would stall the connection for good.
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
        self.http2 = HTTP2ClientConnection(allocator: ByteBufferAllocator())
    }

    private var limit: Int { warmingUp ? 1 : min(remoteLimit, clientLimit) }

    /// Requests queued or in flight on this connection.
    var load: Int { queue.count + streams.count }

    // MARK: lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        http2.writePreface()
        if context.channel.isActive { writeOutbound() }
        schedulePing(context: context)
    }

    func channelActive(context: ChannelHandlerContext) {
        writeOutbound()
        context.fireChannelActive()
    }

    // MARK: output

    /// Writes what the tick has encoded so far, as one buffer, and flushes.
    private func writeOutbound() {
        guard let context, http2.outbound.readableBytes > 0 else { return }
        context.writeAndFlush(wrapOutboundOut(http2.outbound), promise: nil)
        http2.outbound.clear()  // reuses the storage when TLS has taken the bytes (it encrypts on flush)
    }

    /// Writes at the end of this event-loop tick, so that the frames of many requests leave as one TLS record
    /// and one syscall; a full 16 KB record goes at once, so the server starts on the first requests of a long
    /// tick while the rest are prepared.
    private func scheduleWrite() {
        if http2.outbound.readableBytes >= 16_384 {
            writeOutbound()
            return
        }
        guard !writeScheduled, let context else { return }
        writeScheduled = true
        context.eventLoop.assumeIsolated().execute {
            self.writeScheduled = false
            self.writeOutbound()
        }
    }

    /// Sends what is encoded (a GOAWAY, a RST_STREAM) and closes.
    private func close(context: ChannelHandlerContext) {
        writeOutbound()
        context.close(promise: nil)
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
        close(context: context)
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
        guard context != nil, streams.removeValue(forKey: id) != nil else { return }
        http2.writeReset(streamID: id, errorCode: HTTP2ClientConnection.ErrorCode.cancel)
        scheduleWrite()
        startStreams()
        Metrics.streamsCancelled.increment()
    }

    private func startStreams() {
        guard context != nil, !closed, goAwayLastStreamID == nil else { return }
        defer {
            scheduleWrite()
            connection?.publishedLoad.store(load, ordering: .relaxed)
        }
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
            http2.writeRequest(streamID: id, headers: box.request.headers, body: box.request.body)
            // A full TLS record's worth goes out now: the server starts on it while the rest are encoded.
            if http2.outbound.readableBytes >= 16_384 { writeOutbound() }
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
        guard context != nil, !closed else { return }
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
            http2.writeReset(streamID: id, errorCode: HTTP2ClientConnection.ErrorCode.cancel)
            Metrics.streamsCancelled.increment()
        }
        guard !expired.isEmpty else { return }
        if !expiredStreams.isEmpty { scheduleWrite() }
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
        var bytes = unwrapInboundIn(data)
        lastActivity = .now()
        pingOutstanding = false
        http2.receive(&bytes)
        do {
            while !closed, let event = try http2.nextEvent() {
                handle(event)
            }
        } catch {
            logger.notice("APNs connection broke the HTTP/2 protocol; closing it", metadata: ["error": "\(error)"])
            http2.writeGoAway(lastStreamID: 0, errorCode: error.errorCode)
            connectionClosed(reason: "connection broke HTTP/2 (\(error.message))")
            close(context: context)
            return
        }
        scheduleWrite()  // SETTINGS and PING acknowledgements
    }

    private func handle(_ event: HTTP2ClientConnection.Event) {
        switch event {
        case .headers(let id, let headers, let endStream):
            // An answer without a body (a 200) ends its stream here: taken out of the map once, not read,
            // written back and removed.
            guard var stream = endStream ? streams.removeValue(forKey: id) : streams[id] else { return }
            stream.headers.reserveCapacity(stream.headers.count + headers.count)  // one allocation, not a growth per header
            for header in headers {
                if header.name == ":status" {
                    if stream.status == nil { stream.status = Int(header.value) }
                } else if !header.name.hasPrefix(":") {
                    stream.headers.append(HTTPHeader(header.name, header.value))
                }
            }
            if endStream {
                finish(stream)
            } else {
                streams[id] = stream
            }
        case .data(let id, let data, let endStream, let flowControlledLength):
            // Every DATA byte counts against the connection's receive window, also on streams already ended:
            // handed back at the end of the read.
            unacknowledgedBytes += flowControlledLength
            guard var stream = streams[id] else { return }
            if data.readableBytes > 0 { stream.body.append(contentsOf: data.readableBytesView) }
            if endStream {
                streams.removeValue(forKey: id)
                finish(stream)
                return
            }
            // A long answer (a channel list) gets stream window back before it runs out.
            stream.unacknowledgedBytes += flowControlledLength
            if stream.unacknowledgedBytes >= HTTP2ClientConnection.localInitialWindowSize / 2 {
                http2.writeWindowUpdate(streamID: id, increment: stream.unacknowledgedBytes)
                stream.unacknowledgedBytes = 0
            }
            streams[id] = stream
        case .reset(let id, let errorCode):
            guard let stream = streams.removeValue(forKey: id) else { return }
            // Closed without a complete answer.
            stream.box.unassign()
            if errorCode == HTTP2ClientConnection.ErrorCode.refusedStream || (goAwayLastStreamID.map { id > $0 } ?? false) {
                connection?.requeue([stream.box])
            } else {
                stream.box.complete(.failure(NorqError(.transportFailed,
                    "APNs reset the stream (\(HTTP2ClientConnection.ErrorCode.name(errorCode))) before the answer (token \(stream.box.request.logID))")))
            }
            startStreams()
            drainIfDone()
        case .settings(let maxConcurrentStreams):
            if let maxConcurrentStreams { remoteLimit = max(0, maxConcurrentStreams) }
            if !settingsSeen {
                settingsSeen = true
                settingsPromise.succeed()
            }
            startStreams()
        case .goAway(let lastStreamID, let errorCode, let debugData):
            logger.notice("APNs sent GOAWAY", metadata: [
                "lastStreamID": "\(lastStreamID)", "errorCode": "\(HTTP2ClientConnection.ErrorCode.name(errorCode))",
                "reason": "\(String(buffer: debugData))",
            ])
            beginDrain(lastStreamID: lastStreamID, reason: "GOAWAY")
        case .pingAck:
            pingOutstanding = false
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
            http2.writeWindowUpdate(streamID: 0, increment: unacknowledgedBytes)
            unacknowledgedBytes = 0
            scheduleWrite()
        }
        context.fireChannelReadComplete()
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
            http2.forget(streamID: id)
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
            close(context: context)
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
                self.http2.writePing(0x4e4f5251)
                self.writeOutbound()
            }
            self.schedulePing(context: context)
        }
    }
}
