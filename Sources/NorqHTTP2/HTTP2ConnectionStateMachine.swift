package import NIOCore
import NIOHPACK

/// The client side of one HTTP/2 connection (RFC 9113) without I/O: a value type that owns the stream ids, the
/// concurrency limit, both directions of flow control, SETTINGS, GOAWAY, PING, the warm-up and every request's
/// deadline. Its inputs are the handler's events (bytes read, requests, timer ticks, the channel closing); its
/// outputs are the bytes in ``outbound`` (to write and flush) and the ``Action``s taken with ``popAction()``. It
/// holds no I/O object: a request knows the stream it is on, not the connection.
///
/// By concern, one file each: this one (state, inputs, streams), `+Receive` (frames read), `+Send` (frames
/// written), `+FlowControl` (both directions' windows and the bodies waiting for them: ``HTTP2FlowControl``) and
/// `+Timers` (deadlines, PING, idle: ``HTTP2KeepAlive``), and `+States`: the states with their small facts (the
/// warm-up, the last stream id) and the sub-machines by concern stored beside them (the queue, the streams, the
/// windows and blocked bodies), changed in place.
///
/// A request body is sent right after its HEADERS when both send windows allow (the common path: two frames
/// appended to one buffer), else as the windows open, oldest first.
package struct HTTP2ConnectionStateMachine {
    package struct Configuration: Sendable {
        package var maxConcurrentStreams: Int
        package var maxHeaderListSize: Int
        package var maxResponseBodyBytes: Int
        package var pingInterval: TimeAmount?
        package var idleTimeout: TimeAmount?
        package var warmUp: TimeAmount?
        /// What the server may send on the connection before this client gives window back (RFC 9113 6.9): at
        /// least the protocol's 65,535. A small one throttles a server answering many streams with bodies at once
        /// (1,000 FCM answers of 85 bytes exceed 65,535); what is kept of each body stays bounded per stream.
        package var connectionWindowSize: Int

        package init(maxConcurrentStreams: Int = 1000, maxHeaderListSize: Int = 16_384,
                     maxResponseBodyBytes: Int = 65_536, pingInterval: TimeAmount? = nil,
                     idleTimeout: TimeAmount? = nil, warmUp: TimeAmount? = nil,
                     connectionWindowSize: Int = HTTP2ConnectionStateMachine.localConnectionWindowSize) {
            self.maxConcurrentStreams = max(1, maxConcurrentStreams)
            self.connectionWindowSize = min(max(65_535, connectionWindowSize), HTTP2Wire.maxWindow)
            self.maxHeaderListSize = max(1_024, maxHeaderListSize)
            self.maxResponseBodyBytes = max(0, maxResponseBodyBytes)
            self.pingInterval = pingInterval
            self.idleTimeout = idleTimeout
            self.warmUp = warmUp
        }

        package init(_ client: HTTP2ClientConfiguration) {
            self.init(maxConcurrentStreams: client.maxConcurrentStreams, maxHeaderListSize: client.maxHeaderListSize,
                      maxResponseBodyBytes: client.maxResponseBodyBytes,
                      pingInterval: client.pingInterval.map(\.timeAmount),
                      idleTimeout: client.idleTimeout.map(\.timeAmount), warmUp: client.warmUp.map(\.timeAmount))
        }

        /// The longest header block (HEADERS + CONTINUATION) accepted before the connection is closed: 16 times
        /// the announced list size (256 KiB by default), so that one oversized answer (up to that) fails its own
        /// stream only, while a CONTINUATION flood is cut short.
        package var maxHeaderBlockBytes: Int { 16 * maxHeaderListSize }
    }

    package enum Action {
        case succeed(HTTP2RequestContext, HTTP2Response)
        case fail(HTTP2RequestContext, HTTP2ClientError)
        /// Not processed by the server: the pool sends it again, else fails it with this error. `written`: the
        /// server refused it (REFUSED_STREAM, above GOAWAY), re-sent at most once; else it was never written
        /// (queued on a connection that closed or went away), re-sent a few times.
        case requeue(HTTP2RequestContext, HTTP2ClientError, written: Bool)
        /// The server's first SETTINGS arrived: the connection can take requests.
        case ready
        /// The connection takes no new requests (GOAWAY, a protocol error, stream ids exhausted, idle, dead).
        case goingAway(reason: String)
        /// Write ``outbound``, then close the channel.
        case close
        /// ``writeChunkBytes`` are encoded and more requests wait: write ``outbound`` now (the server starts on
        /// them while the rest are encoded), then call ``resumeStreams(now:)``.
        case writeAndResume
    }

    /// Stream counts since the handler last took them (for metrics).
    package struct Counts {
        package var opened = 0
        package var completed = 0
        package var requeued = 0
        package var cancelled = 0
        package var isZero: Bool { opened == 0 && completed == 0 && requeued == 0 && cancelled == 0 }
    }

    /// The warm-up of an active connection (``Configuration/warmUp``): one stream until the first complete answer
    /// or until the warm-up time after the first stream opened.
    enum WarmUp: Equatable {
        /// No warm-up (none configured, or it ended).
        case off
        /// Configured; no stream opened yet.
        case pending
        /// The first stream opened; one stream at a time until an answer completes or `until` passes.
        case running(until: NIODeadline)
    }

    struct Stream {
        var request: HTTP2RequestContext
        /// The final status, once its HEADERS arrived.
        var status: Int?
        /// The final response's header block as decoded, trailers appended.
        var fields = HPACKHeaders()
        /// The decoded block's id (`HPACKResponseDecoder.Block.id`); 0 once trailers were appended.
        var fieldsID: UInt64 = 0
        /// Nil until DATA arrives (most push answers have none).
        var body: ByteBuffer?
        var sendWindow: Int
        /// What the peer may still send on this stream.
        var receiveWindow: Int
        var unacknowledgedBytes = 0
    }

    /// The receive window of each response stream, announced in the preface.
    package static let localInitialWindowSize = 1 << 20
    /// The connection's receive window, opened by a WINDOW_UPDATE right after the preface's SETTINGS.
    package static let localConnectionWindowSize = 4 << 20

    /// Bytes for the socket, in order.
    package var outbound: ByteBuffer
    /// The body of answers without DATA: this connection's own empty buffer. `ByteBuffer()` is one storage
    /// shared by the whole process, so every answer retained and released it from every event loop.
    let emptyBody: ByteBuffer
    var actions = CircularBuffer<Action>(initialCapacity: 16)
    package var counts = Counts()

    let configuration: Configuration
    /// The state (`+States`): the small per-state facts.
    var state = State.awaitingSettings
    /// Sending: the requests waiting for a stream (`+States`; empty once draining or closed).
    var queue = CircularBuffer<HTTP2RequestContext>()
    /// The streams, their ids and both directions' flow control (`+States`).
    var open: OpenStreams
    var decoder: HTTP2FrameDecoder
    var hpackDecoder: HPACKResponseDecoder
    var encoder = HPACKRequestEncoder()

    var remoteMaxConcurrentStreams = Int.max {
        didSet { writeChunkBytes = Self.writeChunkBytes(streamLimit: streamLimit) }
    }

    /// How many encoded bytes go out in one write while more requests wait to be encoded: the server starts on
    /// them meanwhile. See ``writeChunkBytes(streamLimit:)``.
    package internal(set) var writeChunkBytes: Int

    /// The write chunk for a connection that may open `streamLimit` streams: 256 bytes per stream (about a fifth of
    /// what that many ~1 KB requests hold), at least 32 KiB and at most 256 KiB (the bound of what waits in
    /// `outbound` before it is written). 16 KiB woke an idle server twice as often for the same bytes once requests
    /// were started as answers arrived; 64 KiB at 100 streams waited for more bytes than the requests in flight
    /// held (`Benchmarks/README.md`, "Refilling a slot at once, stop 26"). At 1,000 streams each doubling from
    /// 64 KiB to 256 KiB gave FCM 4-5% more throughput at 3-5% less CPU, with no later p50 or p99; 512 KiB gave
    /// nothing more. Against a server slower per request than the client (APNs's benchmark sink opens a file per
    /// token) 256 KiB cost ~8% at 1,000 streams; keeping a read's first write small did not win that back and lost
    /// FCM's gain ("FCM at 0.8 x h2load, stop 28").
    package static func writeChunkBytes(streamLimit: Int) -> Int {
        min(262_144, max(32_768, min(streamLimit, 1_024) * 256))
    }

    /// The most streams open at once: the server's limit and ours.
    var streamLimit: Int { min(remoteMaxConcurrentStreams, configuration.maxConcurrentStreams) }

    package internal(set) var peerMaxFrameSize = 16_384

    /// PING and idle timing (see ``HTTP2KeepAlive``).
    var keepAlive: HTTP2KeepAlive

    package init(configuration: Configuration, now: NIODeadline, allocator: ByteBufferAllocator = ByteBufferAllocator()) {
        self.configuration = configuration
        self.writeChunkBytes = Self.writeChunkBytes(streamLimit: configuration.maxConcurrentStreams)
        self.outbound = allocator.buffer(capacity: 16_384)
        var empty = allocator.buffer(capacity: 1)  // capacity 0 would be the shared one
        empty.clear()
        self.emptyBody = empty
        self.decoder = HTTP2FrameDecoder(maxHeaderBlockBytes: configuration.maxHeaderBlockBytes)
        self.hpackDecoder = HPACKResponseDecoder(allocator: allocator, maxDynamicTableSize: HPACKDecoder.maxDynamicTableSize,
                                         maxHeaderListSize: configuration.maxHeaderBlockBytes)
        self.keepAlive = HTTP2KeepAlive(now: now)
        self.open = OpenStreams(flow: HTTP2FlowControl(localWindowSize: configuration.connectionWindowSize))
        writePreface()
    }

    /// Requests queued or in flight.
    package var load: Int { queue.count + open.table.count }
    package var openStreams: Int { open.table.count }
    package var isReady: Bool { if case .active = state { true } else { false } }
    /// Going away or closed: no request will be written any more.
    package var takesNoNewStreams: Bool {
        switch state {
        case .draining, .closed: true
        case .awaitingSettings, .active: false
        }
    }
    package var isClosed: Bool { if case .closed = state { true } else { false } }
    /// Streams are held to one: the warm-up has not ended (or, before SETTINGS, one is configured).
    package var isWarmingUp: Bool {
        switch state {
        case .awaitingSettings: configuration.warmUp != nil
        case .active: warmUp != .off
        case .draining, .closed: false
        }
    }

    package mutating func popAction() -> Action? { actions.popFirst() }

    // MARK: inputs

    /// Takes requests: they are written as the stream limit allows (none before the server's SETTINGS).
    package mutating func enqueue(_ request: HTTP2RequestContext, now: NIODeadline) {
        switch state {
        case .draining, .closed:
            actions.append(.requeue(request, Self.notProcessed(.connectionLost, "the connection was closing"), written: false))
        case .awaitingSettings:
            queue.append(request)
            open.earliestDeadline = min(open.earliestDeadline, request.deadline)
        case .active:
            queue.append(request)
            open.earliestDeadline = min(open.earliestDeadline, request.deadline)
            startStreams(now: now)
        }
    }

    /// Bytes read from the socket (after TLS).
    package mutating func receive(_ bytes: inout ByteBuffer, now: NIODeadline) {
        guard !isClosed else { return }
        keepAlive.frameReceived(now: now)
        decoder.receive(&bytes)
        do {
            while !isClosed, let frame = try decoder.nextFrame() {
                try handle(frame, now: now)
            }
        } catch {
            connectionError(error)
        }
    }

    /// Opens the streams a ``Action/writeAndResume`` paused.
    package mutating func resumeStreams(now: NIODeadline) {
        startStreams(now: now)
    }

    /// The channel closed (or failed): streams in flight may have been processed; queued requests were not.
    package mutating func channelClosed(reason: String) {
        guard !isClosed else { return }
        if !isGoingAway { actions.append(.goingAway(reason: reason)) }
        failEverything(Self.possiblyProcessed(.connectionLost, "\(reason) before the answer"))
    }

    // MARK: streams

    /// Opens streams for the queued requests while the limit allows, in one loop over the stored queue, table,
    /// ids and windows (a function per request returning what it decided cost ~3% router CPU at 1,000 streams).
    /// `answerCompleted`: a complete answer just arrived, which ends the warm-up.
    mutating func startStreams(now: NIODeadline, answerCompleted: Bool = false) {
        guard case .active(var warmUp) = state else { return }
        if answerCompleted, warmUp != .off {
            warmUp = .off
            state = .active(.off)
        }
        let limit = warmUp == .off ? streamLimit : 1
        while open.table.count < limit, let request = queue.popFirst() {
            if outbound.readableBytes >= writeChunkBytes {
                queue.prepend(request)
                actions.append(.writeAndResume)
                return
            }
            if request.deadline <= now {
                // Never written once its deadline has passed.
                actions.append(.fail(request, Self.notProcessed(.deadlineExceeded, "the deadline passed before the request was written")))
                continue
            }
            let id = open.nextStreamID
            if id > Int32.max - 2 {
                queue.prepend(request)
                beginDrain(reason: "stream ids exhausted")
                return
            }
            guard request.assign(streamID: id) else { continue }  // completed meanwhile
            open.nextStreamID = id + 2
            open.highestStreamID = id
            if warmUp == .pending, let time = configuration.warmUp {
                warmUp = .running(until: now + time)
                state = .active(warmUp)
            }
            // The body goes out with its HEADERS when both windows hold it: both are spent here. A body that waits
            // takes them as it is sent (`sendBlockedData`).
            let bodyCount = request.body.count
            let atOnce = open.flow.sendsAtOnce(bodyCount)
            if atOnce, bodyCount > 0 { open.flow.spend(bodyCount) }
            open.table[id] = Stream(request: request, sendWindow: open.flow.peerInitialWindowSize - (atOnce ? bodyCount : 0),
                                    receiveWindow: Self.localInitialWindowSize)
            writeRequest(streamID: id, request, bodyAtOnce: atOnce)
            counts.opened += 1
            keepAlive.streamActivity(now: now)
        }
    }

    /// Completes a stream taken out of the table; `consuming`: its parts move into the response (a borrowed stream
    /// was copied, each part retained, per answer).
    mutating func finish(_ stream: consuming Stream, now: NIODeadline) {
        counts.completed += 1
        keepAlive.streamActivity(now: now)
        var response = HTTP2Response(status: stream.status ?? 0, fields: stream.fields, body: stream.body ?? emptyBody)
        response.fieldsID = stream.fieldsID
        actions.append(.succeed(stream.request, response))
        startStreams(now: now, answerCompleted: true)  // any complete answer ends the warm-up
        closeIfDrained()
    }

    /// A stream error (RFC 9113 5.4.2): RST_STREAM, and the request fails; the connection goes on.
    mutating func streamError(_ id: Int32, code: UInt32, kind: HTTP2ClientError.Kind, _ message: String,
                                      now: NIODeadline) {
        writeReset(streamID: id, errorCode: code)
        guard let stream = streams.removeValue(forKey: id) else { return }
        stream.request.unassign()
        counts.cancelled += 1
        keepAlive.streamActivity(now: now)
        actions.append(.fail(stream.request, Self.possiblyProcessed(kind, message)))
        startStreams(now: now)
        closeIfDrained()
    }

    /// A connection error (RFC 9113 5.4.1): GOAWAY with the code, every request ends, the channel closes.
    mutating func connectionError(_ error: HTTP2ProtocolError) {
        guard !isClosed else { return }
        writeGoAway(lastStreamID: 0, errorCode: error.errorCode)
        closeConnection(reason: "the server broke HTTP/2 (\(error))", goAwayCode: nil)
    }

    mutating func closeConnection(reason: String, goAwayCode: UInt32?) {
        if let goAwayCode { writeGoAway(lastStreamID: 0, errorCode: goAwayCode) }
        if !isGoingAway { actions.append(.goingAway(reason: reason)) }
        failEverything(Self.possiblyProcessed(.connectionLost, "\(reason) before the answer"))
        actions.append(.close)
    }

    /// Closed: the streams in flight fail with `error`, the queue is handed back (never written).
    mutating func failEverything(_ error: HTTP2ClientError) {
        let (inFlight, queue) = becomeClosed()
        for (_, stream) in inFlight {
            stream.request.unassign()
            actions.append(.fail(stream.request, error))
        }
        if let queue {
            requeue(queue, Self.notProcessed(.connectionLost, "the connection closed before the request was written"))
        }
    }

    mutating func requeue(_ queue: CircularBuffer<HTTP2RequestContext>, _ error: HTTP2ClientError) {
        for request in queue {
            actions.append(.requeue(request, error, written: false))
        }
    }

    /// Stops opening streams, as after a GOAWAY of our own.
    mutating func beginDrain(reason: String) {
        let wasActive = isReady
        let queue = beginDraining(lastStreamID: highestStreamID)
        if wasActive { actions.append(.goingAway(reason: reason)) }
        if let queue { requeue(queue, Self.notProcessed(.connectionLost, "\(reason) before the request was written")) }
        closeIfDrained()
    }

    /// Draining with no stream left: closed.
    mutating func closeIfDrained() {
        guard case .draining = state, open.table.isEmpty else { return }
        state = .closed
        actions.append(.close)
    }

    package static func notProcessed(_ kind: HTTP2ClientError.Kind, _ message: String) -> HTTP2ClientError {
        HTTP2ClientError(kind, possiblyProcessed: false, message)
    }

    package static func possiblyProcessed(_ kind: HTTP2ClientError.Kind, _ message: String) -> HTTP2ClientError {
        HTTP2ClientError(kind, possiblyProcessed: true, message)
    }
}
