package import NIOCore
import NIOHPACK

/// The client side of one HTTP/2 connection (RFC 9113) without I/O: a value type that owns the stream ids, the
/// concurrency limit, both directions of flow control, SETTINGS, GOAWAY, PING, the warm-up and every request's
/// deadline. Its inputs are the handler's events (bytes read, requests, timer ticks, the channel closing); its
/// outputs are the bytes in ``outbound`` (to write and flush) and the ``Action``s taken with ``popAction()``.
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

    private enum State {
        /// Preface sent; the server's SETTINGS (its first frame) not yet received.
        case awaitingSettings
        case active
        /// No new streams: streams up to the id finish.
        case goingAway(lastStreamID: Int32)
        case closed
    }

    private struct Stream {
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
    private let emptyBody: ByteBuffer
    private var actions = CircularBuffer<Action>(initialCapacity: 16)
    package var counts = Counts()
    /// Set by the handler: recorded in each request written, so its own deadline timer can cancel the stream.
    package var connection: HTTP2Connection?

    private let configuration: Configuration
    private var state = State.awaitingSettings
    private var decoder: HTTP2FrameDecoder
    private var hpackDecoder: HPACKResponseDecoder
    private var encoder = HPACKRequestEncoder()

    private var queue = CircularBuffer<HTTP2RequestContext>()
    /// No deadline of a request queued or in flight is earlier (a lower bound: lowered by each request taken,
    /// recomputed by each scan of ``expire(now:)``).
    private var earliestDeadline = NIODeadline.distantFuture
    private var streams: [Int32: Stream] = [:]
    private var nextStreamID: Int32 = 1
    /// The highest stream id opened: frames on higher (or even) ids are on idle streams.
    private var highestStreamID: Int32 = 0
    private var remoteMaxConcurrentStreams = Int.max {
        didSet { writeChunkBytes = Self.writeChunkBytes(streamLimit: streamLimit) }
    }
    private var warmingUp: Bool
    private var warmUpEnds: NIODeadline?

    /// How many encoded bytes go out in one write while more requests wait to be encoded: the server starts on
    /// them meanwhile. See ``writeChunkBytes(streamLimit:)``.
    private(set) package var writeChunkBytes: Int

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
    private var streamLimit: Int { min(remoteMaxConcurrentStreams, configuration.maxConcurrentStreams) }

    private(set) package var peerMaxFrameSize = 16_384
    private(set) package var peerInitialWindowSize = 65_535
    private(set) package var connectionSendWindow = 65_535
    /// What the peer may still send on the connection, and what it sent since the last WINDOW_UPDATE.
    private(set) package var connectionReceiveWindow = 65_535
    private var connectionUnacknowledgedBytes = 0
    /// Request bodies (or their rest) waiting for window, oldest first.
    private var blocked: [(streamID: Int32, body: ByteBuffer)] = []

    private var lastFrameReceived: NIODeadline
    private var pingSent: NIODeadline?
    private var lastStreamActivity: NIODeadline

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
        self.warmingUp = configuration.warmUp != nil
        self.lastFrameReceived = now
        self.lastStreamActivity = now
        writePreface()
    }

    /// Requests queued or in flight.
    package var load: Int { queue.count + streams.count }
    package var openStreams: Int { streams.count }
    package var isReady: Bool { if case .active = state { true } else { false } }
    /// Going away or closed: no request will be written any more.
    package var takesNoNewStreams: Bool {
        switch state {
        case .goingAway, .closed: true
        case .awaitingSettings, .active: false
        }
    }
    package var isClosed: Bool { if case .closed = state { true } else { false } }
    /// Request bodies waiting for flow-control window.
    package var blockedStreams: Int { blocked.count }
    package var isWarmingUp: Bool { warmingUp }

    package mutating func popAction() -> Action? { actions.popFirst() }

    // MARK: inputs

    /// Takes requests: they are written as the stream limit allows (none before the server's SETTINGS).
    package mutating func enqueue(_ request: HTTP2RequestContext, now: NIODeadline) {
        switch state {
        case .goingAway, .closed:
            actions.append(.requeue(request, Self.notProcessed(.connectionLost, "the connection was closing"), written: false))
        case .awaitingSettings, .active:
            queue.append(request)
            earliestDeadline = min(earliestDeadline, request.deadline)
            startStreams(now: now)
        }
    }

    /// Bytes read from the socket (after TLS).
    package mutating func receive(_ bytes: inout ByteBuffer, now: NIODeadline) {
        guard !isClosed else { return }
        lastFrameReceived = now
        pingSent = nil
        decoder.receive(&bytes)
        do {
            while !isClosed, let frame = try decoder.nextFrame() {
                try handle(frame, now: now)
            }
        } catch {
            connectionError(error)
        }
    }

    /// The end of a read: gives the peer back the connection window it used, in one WINDOW_UPDATE, once an eighth
    /// of the window (at least 16 KiB) is used.
    package mutating func readComplete() {
        guard !isClosed, connectionUnacknowledgedBytes >= max(16_384, configuration.connectionWindowSize / 8) else { return }
        writeWindowUpdate(streamID: 0, increment: connectionUnacknowledgedBytes)
        connectionReceiveWindow += connectionUnacknowledgedBytes
        connectionUnacknowledgedBytes = 0
    }

    /// The periodic check: expired requests, the warm-up's end, PING, the idle timeout.
    package mutating func tick(now: NIODeadline) {
        guard !isClosed else { return }
        expire(now: now)
        if warmingUp, let ends = warmUpEnds, ends <= now {
            warmingUp = false
            startStreams(now: now)
        }
        if let interval = configuration.pingInterval, interval > .zero, !isAwaitingSettings {
            if let sent = pingSent {
                if now - sent >= interval {
                    closeConnection(reason: "the connection did not answer PING", goAwayCode: nil)
                    return
                }
            } else if now - lastFrameReceived >= interval {
                writePing(0x4e4f_5251, ack: false)
                pingSent = now
            }
        }
        if let idle = configuration.idleTimeout, load == 0, !isAwaitingSettings, now - lastStreamActivity >= idle {
            closeConnection(reason: "idle for \(idle.nanoseconds / 1_000_000) ms", goAwayCode: HTTP2Wire.ErrorCode.noError)
        }
    }

    /// How long until the next ``tick(now:)`` is due.
    package var tickInterval: TimeAmount? {
        if load > 0 { return .milliseconds(10) }
        func quarter(_ candidate: TimeAmount?) -> TimeAmount? {
            guard let candidate, candidate > .zero else { return nil }
            return .nanoseconds(max(candidate.nanoseconds / 4, 1_000_000))
        }
        let interval: TimeAmount? = switch (quarter(configuration.pingInterval), quarter(configuration.idleTimeout)) {
        case (let ping?, let idle?): min(ping, idle)
        case (let ping?, nil): ping
        case (nil, let idle?): idle
        case (nil, nil): nil
        }
        return interval.map { min($0, .seconds(1)) }
    }

    /// Opens the streams a ``Action/writeAndResume`` paused.
    package mutating func resumeStreams(now: NIODeadline) {
        startStreams(now: now)
    }

    /// Cancels a stream whose request completed elsewhere (its own deadline timer).
    package mutating func cancel(streamID: Int32) {
        guard !isClosed, streams.removeValue(forKey: streamID) != nil else { return }
        writeReset(streamID: streamID, errorCode: HTTP2Wire.ErrorCode.cancel)
        counts.cancelled += 1
        lastStreamActivity = .now()
        startStreams(now: .now())
        closeIfDrained()
    }

    /// The channel closed (or failed): streams in flight may have been processed; queued requests were not.
    package mutating func channelClosed(reason: String) {
        guard !isClosed else { return }
        state = .closed
        actions.append(.goingAway(reason: reason))
        failEverything(Self.possiblyProcessed(.connectionLost, "\(reason) before the answer"))
    }

    // MARK: frames

    private var isAwaitingSettings: Bool { if case .awaitingSettings = state { true } else { false } }

    private func isIdle(_ streamID: Int32) -> Bool {
        streamID & 1 == 0 || streamID > highestStreamID
    }

    private mutating func handle(_ frame: HTTP2Frame, now: NIODeadline) throws(HTTP2ProtocolError) {
        if isAwaitingSettings {
            guard case .settings = frame else {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "the server's first HTTP/2 frame is not SETTINGS")
            }
        }
        switch frame {
        case .data(let id, let payload, let endStream, let flowControlledLength):
            connectionReceiveWindow -= flowControlledLength
            guard connectionReceiveWindow >= 0 else {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.flowControlError, "the server overran the connection's receive window")
            }
            // Counted against the connection window also on closed streams; handed back at the end of the read.
            connectionUnacknowledgedBytes += flowControlledLength
            if isIdle(id) {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "HTTP/2 DATA on idle stream \(id)")
            }
            receiveData(streamID: id, payload, endStream: endStream, flowControlledLength: flowControlledLength, now: now)
        case .headers(let id, var block, let endStream):
            // Decoded even for a stream already closed: the HPACK table must stay in step with the server's.
            let headers: HPACKResponseDecoder.Block
            do {
                headers = try hpackDecoder.decodeHeaders(from: &block)
            } catch {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.compressionError, "HPACK decoding failed: \(error)")
            }
            if isIdle(id) {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "HTTP/2 HEADERS on idle stream \(id)")
            }
            receiveHeaders(streamID: id, headers, endStream: endStream, now: now)
        case .priority(let id, let validLength):
            if !validLength {
                streamError(id, code: HTTP2Wire.ErrorCode.frameSizeError, kind: .protocolError,
                            "HTTP/2 PRIORITY frame of a wrong size", now: now)
            }
        case .rstStream(let id, let errorCode):
            if isIdle(id) {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "HTTP/2 RST_STREAM on idle stream \(id)")
            }
            receiveReset(streamID: id, errorCode: errorCode, now: now)
        case .settings(let settings):
            try receiveSettings(settings, now: now)
        case .settingsAck:
            break
        case .ping(let data, let ack):
            if !ack { writePing(data, ack: true) }
        case .goAway(let lastStreamID, let errorCode, let debugData):
            receiveGoAway(lastStreamID: lastStreamID, errorCode: errorCode, debugData: debugData)
        case .windowUpdate(let id, let increment):
            try receiveWindowUpdate(streamID: id, increment: increment, now: now)
        case .pushPromise:
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "HTTP/2 PUSH_PROMISE although push is disabled")
        case .unknown:
            break  // extension frames are ignored (RFC 9113 5.5)
        }
    }

    // The stream table is read and changed in place (``withStream(at:_:)``), and a stream leaves it (a move) only
    // when it ends: a stream taken out into a local and put back, or read through `streams.values[index]` (a
    // getter), was copied, each of its parts retained and released, per frame.

    private mutating func withStream<T>(at index: [Int32: Stream].Index, _ body: (inout Stream) -> T) -> T {
        body(&streams.values[index])
    }

    private enum DataVerdict {
        case overrun, beforeHeaders, tooLarge, end, more
        case giveBack(Int)
    }

    private mutating func receiveData(streamID id: Int32, _ payload: ByteBuffer, endStream: Bool,
                                      flowControlledLength: Int, now: NIODeadline) {
        guard let index = streams.index(forKey: id) else { return }  // closed (answered, reset, expired): ignored
        let maxBody = configuration.maxResponseBodyBytes
        let verdict = withStream(at: index) { stream -> DataVerdict in
            stream.receiveWindow -= flowControlledLength
            guard stream.receiveWindow >= 0 else { return .overrun }
            guard stream.status != nil else { return .beforeHeaders }
            if payload.readableBytes > 0 {
                let held = stream.body?.readableBytes ?? 0
                guard held + payload.readableBytes <= maxBody else { return .tooLarge }
                if held == 0 {
                    stream.body = payload
                } else {
                    var payload = payload
                    stream.body!.writeBuffer(&payload)
                }
            }
            if endStream { return .end }
            // A long answer gets stream window back before it runs out.
            stream.unacknowledgedBytes += flowControlledLength
            guard stream.unacknowledgedBytes >= Self.localInitialWindowSize / 2 else { return .more }
            let increment = stream.unacknowledgedBytes
            stream.receiveWindow += increment
            stream.unacknowledgedBytes = 0
            return .giveBack(increment)
        }
        switch verdict {
        case .overrun:
            streamError(id, code: HTTP2Wire.ErrorCode.flowControlError, kind: .protocolError,
                        "the server overran the stream's receive window", now: now)
        case .beforeHeaders:
            streamError(id, code: HTTP2Wire.ErrorCode.protocolError, kind: .protocolError,
                        "HTTP/2 DATA before the response headers", now: now)
        case .tooLarge:
            streamError(id, code: HTTP2Wire.ErrorCode.cancel, kind: .responseTooLarge,
                        "response body longer than \(configuration.maxResponseBodyBytes) bytes", now: now)
        case .end:
            finish(streams.remove(at: index).value, now: now)
        case .more:
            break
        case .giveBack(let increment):
            writeWindowUpdate(streamID: id, increment: increment)
        }
    }

    private mutating func receiveHeaders(streamID id: Int32, _ block: HPACKResponseDecoder.Block, endStream: Bool,
                                         now: NIODeadline) {
        guard let index = streams.index(forKey: id) else { return }
        let listSize = block.listSize
        guard listSize <= configuration.maxHeaderListSize else {
            // RFC 9113 10.5.1: this response is discarded; the connection and its other streams go on.
            streamError(id, code: HTTP2Wire.ErrorCode.cancel, kind: .responseTooLarge,
                        "response header list of \(listSize) bytes exceeds the \(configuration.maxHeaderListSize) announced",
                        now: now)
            return
        }
        if withStream(at: index, { $0.status == nil }) {
            guard let status = block.status, (100...999).contains(status) else {
                streamError(id, code: HTTP2Wire.ErrorCode.protocolError, kind: .protocolError,
                            "HTTP/2 response without a valid :status", now: now)
                return
            }
            if status < 200 {
                // 1xx: interim (RFC 9113 8.1); the final response follows. 101 is not allowed in HTTP/2, and an
                // interim response cannot end the stream.
                if status == 101 || endStream {
                    streamError(id, code: HTTP2Wire.ErrorCode.protocolError, kind: .protocolError,
                                "HTTP/2 interim response \(status)\(endStream ? " ending the stream" : "")", now: now)
                }
                return
            }
            withStream(at: index) { stream in
                stream.status = status
                stream.fields = block.fields  // kept as decoded: no copy
                stream.fieldsID = block.id
            }
        } else if !endStream {
            streamError(id, code: HTTP2Wire.ErrorCode.protocolError, kind: .protocolError,
                        "HTTP/2 trailers that do not end the stream", now: now)
            return
        } else {
            // Trailers: their regular fields join the response's.
            withStream(at: index) { stream in
                stream.fieldsID = 0
                for header in block.fields where !header.name.hasPrefix(":") {
                    stream.fields.add(name: header.name, value: header.value)
                }
            }
        }
        if endStream { finish(streams.remove(at: index).value, now: now) }
    }

    private mutating func receiveReset(streamID id: Int32, errorCode: UInt32, now: NIODeadline) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        forgetBlocked(streamID: id)
        stream.request.unassign()
        lastStreamActivity = now
        if errorCode == HTTP2Wire.ErrorCode.refusedStream {
            // Not processed, and not re-sent here: a server refusing every stream would be answered with a storm.
            // The caller re-queues it (`HTTP2ClientError.isUnprocessed`; the router: without spending the retry
            // budget, backing off when the same request is refused again, until its deadline).
            actions.append(.fail(stream.request, Self.notProcessed(.streamReset, "the server refused the stream (REFUSED_STREAM)")))
        } else {
            actions.append(.fail(stream.request, Self.possiblyProcessed(.streamReset,
                "the server reset the stream (\(HTTP2Wire.ErrorCode.name(errorCode))) before the answer")))
        }
        startStreams(now: now)
        closeIfDrained()
    }

    private mutating func receiveSettings(_ settings: [(identifier: UInt16, value: UInt32)],
                                          now: NIODeadline) throws(HTTP2ProtocolError) {
        for (identifier, value) in settings {
            switch identifier {
            case HTTP2Wire.Setting.headerTableSize:
                encoder.setPeerMaxTableSize(Int(value))
            case HTTP2Wire.Setting.enablePush:
                guard value == 0 else {
                    throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "SETTINGS_ENABLE_PUSH of \(value) from a server")
                }
            case HTTP2Wire.Setting.maxConcurrentStreams:
                remoteMaxConcurrentStreams = Int(value)
            case HTTP2Wire.Setting.initialWindowSize:
                // Changes the send window of every open stream (RFC 9113 6.9.2).
                guard value <= UInt32(HTTP2Wire.maxWindow) else {
                    throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.flowControlError,
                                             "SETTINGS_INITIAL_WINDOW_SIZE of \(value) exceeds 2^31-1")
                }
                let delta = Int(value) - peerInitialWindowSize
                peerInitialWindowSize = Int(value)
                if delta != 0 {
                    for id in streams.keys {
                        streams[id]!.sendWindow += delta
                        guard streams[id]!.sendWindow <= HTTP2Wire.maxWindow else {
                            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.flowControlError,
                                                     "SETTINGS_INITIAL_WINDOW_SIZE makes stream \(id)'s window exceed 2^31-1")
                        }
                    }
                }
            case HTTP2Wire.Setting.maxFrameSize:
                guard (16_384...16_777_215).contains(value) else {
                    throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "SETTINGS_MAX_FRAME_SIZE of \(value) is out of range")
                }
                peerMaxFrameSize = Int(value)
            default:
                break  // MAX_HEADER_LIST_SIZE (our blocks are small) and unknown settings
            }
        }
        HTTP2Wire.writeFrameHeader(length: 0, type: HTTP2Wire.FrameType.settings, flags: HTTP2Wire.Flags.ack,
                                   streamID: 0, into: &outbound)
        sendBlockedData()
        if isAwaitingSettings {
            state = .active
            actions.append(.ready)
        }
        startStreams(now: now)
    }

    private mutating func receiveGoAway(lastStreamID: Int32, errorCode: UInt32, debugData: ByteBuffer) {
        let debug = debugData.getString(at: debugData.readerIndex, length: min(debugData.readableBytes, 256)) ?? ""
        let reason = "GOAWAY \(HTTP2Wire.ErrorCode.name(errorCode)), last stream \(lastStreamID)"
            + (debug.isEmpty ? "" : ": \(debug.filter { !$0.isNewline })")
        let last: Int32
        switch state {
        case .goingAway(let previous):
            last = min(previous, lastStreamID)
        case .closed:
            return
        case .awaitingSettings, .active:
            last = lastStreamID
            actions.append(.goingAway(reason: reason))
        }
        state = .goingAway(lastStreamID: last)
        // Streams above the last id were not processed: they go back to the pool, as does the queue.
        let error = Self.notProcessed(.goAway, "the server went away (\(reason)) without processing the stream")
        for (id, stream) in streams where id > last {
            streams.removeValue(forKey: id)
            forgetBlocked(streamID: id)
            stream.request.unassign()
            counts.requeued += 1
            actions.append(.requeue(stream.request, error, written: true))
        }
        requeueQueue(Self.notProcessed(.goAway, "the server went away (\(reason)) before the request was written"))
        closeIfDrained()
    }

    private mutating func receiveWindowUpdate(streamID id: Int32, increment: Int,
                                              now: NIODeadline) throws(HTTP2ProtocolError) {
        if id == 0 {
            guard increment > 0 else {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "HTTP/2 WINDOW_UPDATE of 0 on the connection")
            }
            guard connectionSendWindow + increment <= HTTP2Wire.maxWindow else {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.flowControlError, "HTTP/2 connection window exceeds 2^31-1")
            }
            connectionSendWindow += increment
        } else {
            if isIdle(id) {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "HTTP/2 WINDOW_UPDATE on idle stream \(id)")
            }
            guard var stream = streams[id] else { return }  // closed: ignored
            guard increment > 0 else {
                streamError(id, code: HTTP2Wire.ErrorCode.protocolError, kind: .protocolError,
                            "HTTP/2 WINDOW_UPDATE of 0 on the stream", now: now)
                return
            }
            guard stream.sendWindow + increment <= HTTP2Wire.maxWindow else {
                streamError(id, code: HTTP2Wire.ErrorCode.flowControlError, kind: .protocolError,
                            "HTTP/2 stream window exceeds 2^31-1", now: now)
                return
            }
            stream.sendWindow += increment
            streams[id] = stream
        }
        sendBlockedData()
    }

    // MARK: streams

    private mutating func startStreams(now: NIODeadline) {
        guard case .active = state else { return }
        let limit = warmingUp ? 1 : streamLimit
        while streams.count < limit, let request = queue.popFirst() {
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
            if nextStreamID > Int32.max - 2 {
                queue.prepend(request)
                beginDrain(reason: "stream ids exhausted")
                return
            }
            let id = nextStreamID
            guard request.assign(connection: connection, streamID: id) else { continue }  // completed meanwhile
            nextStreamID += 2
            highestStreamID = id
            if warmingUp, warmUpEnds == nil, let warmUp = configuration.warmUp { warmUpEnds = now + warmUp }
            streams[id] = Stream(request: request, sendWindow: peerInitialWindowSize,
                                 receiveWindow: Self.localInitialWindowSize)
            let written = writeRequest(streamID: id, request)
            // In place: `streams[id]!.sendWindow -= written` copied the stream out and back.
            if written > 0, let index = streams.index(forKey: id) { withStream(at: index) { $0.sendWindow -= written } }
            counts.opened += 1
            lastStreamActivity = now
        }
    }

    /// Completes a stream taken out of the table; `consuming`: its parts move into the response (a borrowed stream
    /// was copied, each part retained, per answer).
    private mutating func finish(_ stream: consuming Stream, now: NIODeadline) {
        warmingUp = false  // any complete answer ends the warm-up
        counts.completed += 1
        lastStreamActivity = now
        var response = HTTP2Response(status: stream.status ?? 0, fields: stream.fields, body: stream.body ?? emptyBody)
        response.fieldsID = stream.fieldsID
        actions.append(.succeed(stream.request, response))
        startStreams(now: now)
        closeIfDrained()
    }

    /// A stream error (RFC 9113 5.4.2): RST_STREAM, and the request fails; the connection goes on.
    private mutating func streamError(_ id: Int32, code: UInt32, kind: HTTP2ClientError.Kind, _ message: String,
                                      now: NIODeadline) {
        writeReset(streamID: id, errorCode: code)
        guard let stream = streams.removeValue(forKey: id) else { return }
        stream.request.unassign()
        counts.cancelled += 1
        lastStreamActivity = now
        actions.append(.fail(stream.request, Self.possiblyProcessed(kind, message)))
        startStreams(now: now)
        closeIfDrained()
    }

    /// A connection error (RFC 9113 5.4.1): GOAWAY with the code, every request ends, the channel closes.
    private mutating func connectionError(_ error: HTTP2ProtocolError) {
        guard !isClosed else { return }
        writeGoAway(lastStreamID: 0, errorCode: error.errorCode)
        closeConnection(reason: "the server broke HTTP/2 (\(error))", goAwayCode: nil)
    }

    private mutating func closeConnection(reason: String, goAwayCode: UInt32?) {
        if let goAwayCode { writeGoAway(lastStreamID: 0, errorCode: goAwayCode) }
        if !isGoingAway { actions.append(.goingAway(reason: reason)) }
        state = .closed
        failEverything(Self.possiblyProcessed(.connectionLost, "\(reason) before the answer"))
        actions.append(.close)
    }

    private var isGoingAway: Bool { if case .goingAway = state { true } else { false } }

    private mutating func failEverything(_ error: HTTP2ClientError) {
        let inFlight = streams
        streams.removeAll()
        blocked.removeAll()
        for (_, stream) in inFlight {
            stream.request.unassign()
            actions.append(.fail(stream.request, error))
        }
        requeueQueue(Self.notProcessed(.connectionLost, "the connection closed before the request was written"))
    }

    private mutating func requeueQueue(_ error: HTTP2ClientError) {
        while let request = queue.popFirst() {
            actions.append(.requeue(request, error, written: false))
        }
    }

    /// Stops opening streams, as after a GOAWAY of our own.
    private mutating func beginDrain(reason: String) {
        if case .active = state {
            state = .goingAway(lastStreamID: highestStreamID)
            actions.append(.goingAway(reason: reason))
        }
        requeueQueue(Self.notProcessed(.connectionLost, "\(reason) before the request was written"))
        closeIfDrained()
    }

    private mutating func closeIfDrained() {
        guard isGoingAway, streams.isEmpty else { return }
        state = .closed
        actions.append(.close)
    }

    /// Fails the queued requests and cancels the streams whose deadline has passed. Scans only once the earliest
    /// deadline held may have passed: a scan every tick copied every stream (its request, fields and body
    /// retained and released) 100 times a second.
    private mutating func expire(now: NIODeadline) {
        guard earliestDeadline <= now else { return }
        var earliest = NIODeadline.distantFuture
        if queue.contains(where: { $0.deadline <= now }) {
            var kept = CircularBuffer<HTTP2RequestContext>(initialCapacity: queue.count)
            for request in queue {
                if request.deadline <= now {
                    actions.append(.fail(request, Self.notProcessed(.deadlineExceeded,
                                                                    "the deadline passed before the request was written")))
                } else {
                    kept.append(request)
                }
            }
            queue = kept
        }
        for request in queue { earliest = min(earliest, request.deadline) }
        var expired: [Int32] = []
        for (id, stream) in streams {
            let deadline = stream.request.deadline
            if deadline <= now { expired.append(id) } else { earliest = min(earliest, deadline) }
        }
        earliestDeadline = earliest
        guard !expired.isEmpty else { return }
        for id in expired {
            guard let stream = streams.removeValue(forKey: id) else { continue }
            stream.request.unassign()
            writeReset(streamID: id, errorCode: HTTP2Wire.ErrorCode.cancel)
            counts.cancelled += 1
            actions.append(.fail(stream.request, Self.possiblyProcessed(.deadlineExceeded, "no answer before the deadline")))
        }
        lastStreamActivity = now
        startStreams(now: now)
        closeIfDrained()
    }

    package static func notProcessed(_ kind: HTTP2ClientError.Kind, _ message: String) -> HTTP2ClientError {
        HTTP2ClientError(kind, possiblyProcessed: false, message)
    }

    package static func possiblyProcessed(_ kind: HTTP2ClientError.Kind, _ message: String) -> HTTP2ClientError {
        HTTP2ClientError(kind, possiblyProcessed: true, message)
    }

    // MARK: outbound

    /// The connection preface and this client's SETTINGS: no server push, a 1 MiB receive window per stream, the
    /// configured header list size; then a WINDOW_UPDATE opening the connection's receive window.
    private mutating func writePreface() {
        outbound.writeBytes(HTTP2Wire.preface)
        let settings: [(UInt16, UInt32)] = [
            (HTTP2Wire.Setting.enablePush, 0),
            (HTTP2Wire.Setting.maxConcurrentStreams, 0),  // server-initiated streams: none (push is off)
            (HTTP2Wire.Setting.initialWindowSize, UInt32(Self.localInitialWindowSize)),
            (HTTP2Wire.Setting.maxHeaderListSize, UInt32(configuration.maxHeaderListSize)),
        ]
        HTTP2Wire.writeFrameHeader(length: settings.count * 6, type: HTTP2Wire.FrameType.settings, flags: 0,
                                   streamID: 0, into: &outbound)
        for (identifier, value) in settings {
            outbound.writeInteger(identifier)
            outbound.writeInteger(value)
        }
        writeWindowUpdate(streamID: 0, increment: configuration.connectionWindowSize - connectionReceiveWindow)
        connectionReceiveWindow = configuration.connectionWindowSize
    }

    /// HEADERS (and CONTINUATION when the block exceeds the peer's frame size), then the body as DATA now or as
    /// soon as the windows allow. An empty body ends the stream with the HEADERS.
    /// Returns the body bytes written at once (the others are written by `sendBlockedData`, which takes them
    /// from the stream's window itself).
    private mutating func writeRequest(streamID: Int32, _ request: HTTP2RequestContext) -> Int {
        typealias F = HTTP2Wire.Flags
        let bodyCount = request.body.count
        let endStream = bodyCount == 0
        // Read in place from the request (a copy retained every field); one buffer access when the block fits.
        if let block = encoder.encodeFrame(request.head, flags: F.endHeaders | (endStream ? F.endStream : 0),
                                           streamID: streamID, maxFrameSize: peerMaxFrameSize, into: &outbound) {
            var rest = block[...]
            var first = true
            while !rest.isEmpty {
                let chunk = rest.prefix(peerMaxFrameSize)
                rest = rest.dropFirst(chunk.count)
                let flags = (rest.isEmpty ? F.endHeaders : 0) | (first && endStream ? F.endStream : 0)
                HTTP2Wire.writeFrameHeader(length: chunk.count,
                                           type: first ? HTTP2Wire.FrameType.headers : HTTP2Wire.FrameType.continuation,
                                           flags: flags, streamID: streamID, into: &outbound)
                outbound.writeBytes(chunk)
                first = false
            }
        }
        guard !endStream else { return 0 }
        if blocked.isEmpty, bodyCount <= connectionSendWindow, bodyCount <= peerInitialWindowSize {
            switch request.body {
            case .buffer(var body):
                writeData(streamID: streamID, body: &body, count: bodyCount, endStream: true)
            case .bytes(let bytes):
                writeData(streamID: streamID, bytes: bytes)
            case .spliced(let head, var middle, let tail):
                if bodyCount <= peerMaxFrameSize {
                    // Frame header and the three parts with one buffer access.
                    let header = HTTP2Wire.frameHeader(length: bodyCount, type: HTTP2Wire.FrameType.data,
                                                       flags: HTTP2Wire.Flags.endStream, streamID: streamID)
                    middle.withUTF8 { middleBytes in
                        outbound.writeWithUnsafeMutableBytes(minimumWritableBytes: 9 + bodyCount) { raw in
                            withUnsafeBytes(of: header) { raw.copyMemory(from: $0) }
                            var offset = 9
                            head.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: raw[offset...]).copyMemory(from: $0) }
                            offset += head.count
                            UnsafeMutableRawBufferPointer(rebasing: raw[offset...]).copyMemory(from: UnsafeRawBufferPointer(middleBytes))
                            offset += middleBytes.count
                            tail.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: raw[offset...]).copyMemory(from: $0) }
                            return offset + tail.count
                        }
                    }
                    connectionSendWindow -= bodyCount
                } else {
                    var body = request.body.buffer
                    writeData(streamID: streamID, body: &body, count: bodyCount, endStream: true)
                }
            }
            return bodyCount
        }
        blocked.append((streamID, request.body.buffer))
        sendBlockedData()
        return 0
    }

    /// A whole body of bytes as DATA frames of at most the peer's frame size, the last ending the stream, taken
    /// from the connection window (the caller checked both windows).
    private mutating func writeData(streamID: Int32, bytes: [UInt8]) {
        var start = 0
        repeat {
            let length = min(bytes.count - start, peerMaxFrameSize)
            let end = start + length
            HTTP2Wire.writeFrameHeader(length: length, type: HTTP2Wire.FrameType.data,
                                       flags: end == bytes.count ? HTTP2Wire.Flags.endStream : 0,
                                       streamID: streamID, into: &outbound)
            outbound.writeBytes(bytes[start..<end])
            start = end
        } while start < bytes.count
        connectionSendWindow -= bytes.count
    }

    private mutating func writeReset(streamID: Int32, errorCode: UInt32) {
        HTTP2Wire.writeFrameHeader(length: 4, type: HTTP2Wire.FrameType.rstStream, flags: 0, streamID: streamID,
                                   into: &outbound)
        outbound.writeInteger(errorCode)
        forgetBlocked(streamID: streamID)
    }

    private mutating func writePing(_ data: UInt64, ack: Bool) {
        HTTP2Wire.writeFrameHeader(length: 8, type: HTTP2Wire.FrameType.ping, flags: ack ? HTTP2Wire.Flags.ack : 0,
                                   streamID: 0, into: &outbound)
        outbound.writeInteger(data)
    }

    private mutating func writeWindowUpdate(streamID: Int32, increment: Int) {
        guard increment > 0 else { return }
        HTTP2Wire.writeFrameHeader(length: 4, type: HTTP2Wire.FrameType.windowUpdate, flags: 0, streamID: streamID,
                                   into: &outbound)
        outbound.writeInteger(UInt32(min(increment, HTTP2Wire.maxWindow)))
    }

    private mutating func writeGoAway(lastStreamID: Int32, errorCode: UInt32) {
        HTTP2Wire.writeFrameHeader(length: 8, type: HTTP2Wire.FrameType.goAway, flags: 0, streamID: 0, into: &outbound)
        outbound.writeInteger(UInt32(lastStreamID))
        outbound.writeInteger(errorCode)
    }

    private mutating func forgetBlocked(streamID: Int32) {
        guard !blocked.isEmpty, streamID != 0 else { return }
        blocked.removeAll { $0.streamID == streamID }
    }

    /// Sends what the windows allow of the waiting bodies, oldest first.
    private mutating func sendBlockedData() {
        var index = 0
        while index < blocked.count, connectionSendWindow > 0 {
            let id = blocked[index].streamID
            guard let streamWindow = streams[id]?.sendWindow else {
                blocked.remove(at: index)
                continue
            }
            var body = blocked[index].body
            let count = min(body.readableBytes, connectionSendWindow, streamWindow)
            if count > 0 {
                let endStream = count == body.readableBytes
                writeData(streamID: id, body: &body, count: count, endStream: endStream)
                streams[id]!.sendWindow -= count
                if endStream {
                    blocked.remove(at: index)
                    continue
                }
                blocked[index].body = body
            }
            index += 1
        }
    }

    /// `count` bytes of `body` as DATA frames of at most the peer's frame size, taken from the connection window.
    private mutating func writeData(streamID: Int32, body: inout ByteBuffer, count: Int, endStream: Bool) {
        var remaining = count
        repeat {
            let length = min(remaining, peerMaxFrameSize)
            remaining -= length
            HTTP2Wire.writeFrameHeader(length: length, type: HTTP2Wire.FrameType.data,
                                       flags: remaining == 0 && endStream ? HTTP2Wire.Flags.endStream : 0,
                                       streamID: streamID, into: &outbound)
            var chunk = body.readSlice(length: length)!
            outbound.writeBuffer(&chunk)
        } while remaining > 0
        connectionSendWindow -= count
    }
}
