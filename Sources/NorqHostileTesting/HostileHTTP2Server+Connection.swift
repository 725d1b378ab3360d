import NIOCore
import NIOHPACK

/// One connection of ``HostileHTTP2Server``: parses the client's preface and frames itself and answers per fault.
/// Runs on its channel's event loop only.
final class HostileConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    /// Unparsed input kept at most (plus one frame); more closes the connection.
    static let maxInput = 1 << 20
    /// The largest frame accepted (the default SETTINGS_MAX_FRAME_SIZE the server keeps).
    static let maxFrame = 16_384
    /// A request header block accumulated at most.
    static let maxHeaderBlock = 64 * 1024
    /// Open streams per connection at most.
    static let maxStreams = 10_000
    /// An overrun of the client's receive window writes at most this many bytes.
    static let maxOverrun = 16 << 20
    /// The stream window the server grants (SETTINGS_INITIAL_WINDOW_SIZE), and the connection window it adds.
    static let receiveWindow = 1 << 20
    /// How long requests are held by `resetConnection(holding:)` when fewer than its count arrive.
    static let holdTime = TimeAmount.milliseconds(50)

    struct Request {
        var stream: UInt32
        var token: String
        var apnsID: String?
    }

    private struct PendingBlock {
        var stream: UInt32
        var endStream: Bool
        var fragment: ByteBuffer
    }

    private let shared: HostileShared
    private let fault: HostileHTTP2Server.Fault
    private let reset: RawResetHandler
    private var input: ByteBuffer?
    private var prefaceSeen = false
    private var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    /// Streams whose request headers arrived and that are not answered yet.
    private var streams: [UInt32: Request] = [:]
    /// A header block waiting for its CONTINUATION frames.
    private var pendingBlock: PendingBlock?
    private var highestStream: UInt32 = 0
    private var requestsOnConnection = 0
    private var held: [Request] = []
    private var holdTimer: Scheduled<Void>?
    /// `doubleGoAway`: the first GOAWAY (last-stream-id 2^31-1) is sent; held requests wait for the second.
    private var firstGoAwaySent = false
    private var clientInitialWindow = 65_535
    private var clientMaxFrameSize = 16_384
    /// The server's send window on the connection (the client's grants).
    private var sendWindow = 65_535
    /// The server closed or reset the connection itself.
    private var closing = false
    /// The server broke the protocol on this connection: later answers may rightly be discarded by the client.
    private var violated = false
    private let connectionIndex: Int
    /// DATA bytes received and not yet given back with a connection WINDOW_UPDATE.
    private var unacknowledgedData = 0
    /// When set, frames are gathered here instead of written (one flight, one TLS record).
    private var flight: ByteBuffer?
    /// Wire sizes of the flight before a reset, one per connection in turn. A client reading with SwiftNIO's adaptive
    /// buffer (2048 bytes at first, a power of two that doubles after a full read, four reads per loop) fills its
    /// buffer exactly at the end of the flight when the flight is its buffer size (the small ones), or, when the
    /// padding comes first, the sum of its doubling reads (the large ones): its next read is then the reset.
    /// (Seen with strace on today's client: 2048-byte reads, and the reset read right after the flight.)
    static let flightSizes = [2048, 65_536, 2048, 1024, 4096, 2048, 65_408, 128]
    /// TLS 1.3 record overhead with an AEAD of 16-byte tags: 5 bytes of header, 1 of content type, 16 of tag.
    static let recordOverhead = 22

    init(shared: HostileShared, fault: HostileHTTP2Server.Fault, reset: RawResetHandler, connectionIndex: Int) {
        self.shared = shared
        self.fault = fault
        self.reset = reset
        self.connectionIndex = connectionIndex
    }

    func channelInactive(context: ChannelHandlerContext) {
        holdTimer?.cancel()
        holdTimer = nil
        shared.connectionClosed(context.channel, byClient: !closing)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        close(context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        guard !closing else { return }
        if input == nil { input = bytes } else { input!.writeBuffer(&bytes) }
        process(context)
        context.flush()
    }

    // MARK: Reading

    private func process(_ context: ChannelHandlerContext) {
        guard var buffer = input else { return }
        input = nil
        if !prefaceSeen {
            guard buffer.readableBytes >= Self.preface.count else {
                input = buffer
                return
            }
            guard buffer.readBytes(length: Self.preface.count) == Self.preface else { return close(context) }
            prefaceSeen = true
            if case .delayedSettings(let milliseconds) = fault.kind {
                context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(milliseconds))) { [self] in
                    sendPreface(context)
                    context.flush()
                }
            } else {
                sendPreface(context)
            }
        }
        while !closing, buffer.readableBytes >= 9 {
            let start = buffer.readerIndex
            let length = Int(buffer.getInteger(at: start, as: UInt32.self)! >> 8)
            guard length <= Self.maxFrame else { return close(context) }
            guard buffer.readableBytes >= 9 + length else { break }
            let type = buffer.getInteger(at: start + 3, as: UInt8.self)!
            let flags = buffer.getInteger(at: start + 4, as: UInt8.self)!
            let stream = buffer.getInteger(at: start + 5, as: UInt32.self)! & 0x7fff_ffff
            buffer.moveReaderIndex(forwardBy: 9)
            let payload = buffer.readSlice(length: length)!
            handleFrame(context, type: type, flags: flags, stream: stream, payload: payload)
        }
        guard !closing else { return }
        if buffer.readableBytes > Self.maxInput { return close(context) }
        if buffer.readableBytes > 0 { input = buffer }
    }

    private func handleFrame(_ context: ChannelHandlerContext, type: UInt8, flags: UInt8, stream: UInt32,
                             payload: ByteBuffer) {
        var payload = payload
        switch type {
        case HostileFrames.settings where flags & HostileFrames.ack == 0:
            while let id = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) {
                if id == 0x4 { clientInitialWindow = Int(value) }
                if id == 0x5 { clientMaxFrameSize = Int(min(max(value, 16_384), 1 << 24 - 1)) }
            }
            write(context, HostileFrames.frame(HostileFrames.settings, flags: HostileFrames.ack, stream: 0))
        case HostileFrames.ping where flags & HostileFrames.ack == 0:
            write(context, HostileFrames.frame(HostileFrames.ping, flags: HostileFrames.ack, stream: 0) { $0.writeImmutableBuffer(payload) })
        case HostileFrames.goAway:
            let code = payload.getInteger(at: payload.readerIndex + 4, as: UInt32.self) ?? 0
            shared.update { $0.statistics.goAwayCodesReceived.append(code) }
        case HostileFrames.rstStream:
            let code = payload.readInteger(as: UInt32.self) ?? 0
            shared.update { $0.statistics.resetCodesReceived.append(code) }
            streams[stream] = nil
            held.removeAll { $0.stream == stream }
        case HostileFrames.windowUpdate:
            if stream == 0 { sendWindow += Int(payload.readInteger(as: UInt32.self) ?? 0) & 0x7fff_ffff }
        case HostileFrames.headers:
            guard pendingBlock == nil, stream & 1 == 1, streams.count < Self.maxStreams else { return close(context) }
            var fragment = payload
            var padding = 0
            if flags & HostileFrames.padded != 0 { padding = Int(fragment.readInteger(as: UInt8.self) ?? 0) }
            if flags & HostileFrames.priorityFlag != 0 { fragment.moveReaderIndex(forwardBy: min(5, fragment.readableBytes)) }
            guard padding <= fragment.readableBytes else { return close(context) }
            fragment = fragment.readSlice(length: fragment.readableBytes - padding)!
            highestStream = max(highestStream, stream)
            let block = PendingBlock(stream: stream, endStream: flags & HostileFrames.endStream != 0, fragment: fragment)
            if flags & HostileFrames.endHeaders != 0 { headersComplete(context, block) } else { pendingBlock = block }
        case HostileFrames.continuation:
            guard var block = pendingBlock, block.stream == stream,
                  block.fragment.readableBytes + payload.readableBytes <= Self.maxHeaderBlock else { return close(context) }
            pendingBlock = nil
            block.fragment.writeImmutableBuffer(payload)
            if flags & HostileFrames.endHeaders != 0 { headersComplete(context, block) } else { pendingBlock = block }
        case HostileFrames.data:
            // The connection window is given back in halves of it, not per frame: small WINDOW_UPDATE writes would
            // join (and change the size of) the flight before a reset.
            unacknowledgedData += payload.readableBytes
            if unacknowledgedData >= Self.receiveWindow / 2 {
                write(context, HostileFrames.windowUpdateFrame(stream: 0, increment: UInt32(unacknowledgedData)))
                unacknowledgedData = 0
            }
            if flags & HostileFrames.endStream != 0 { requestComplete(context, stream: stream) }
        default:
            break
        }
    }

    private func headersComplete(_ context: ChannelHandlerContext, _ block: PendingBlock) {
        var fragment = block.fragment
        guard let headers = try? decoder.decodeHeaders(from: &fragment) else { return close(context) }
        let path = headers.first(name: ":path") ?? ""
        let token = path.split(separator: "/").last.map(String.init) ?? path
        streams[block.stream] = Request(stream: block.stream, token: token, apnsID: headers.first(name: "apns-id"))
        if block.endStream { requestComplete(context, stream: block.stream) }
    }

    // MARK: Answering

    private func requestComplete(_ context: ChannelHandlerContext, stream: UInt32) {
        guard let request = streams[stream] else { return }
        requestsOnConnection += 1
        shared.update { $0.statistics.requestsByToken[request.token, default: 0] += 1 }
        let first = requestsOnConnection == 1
        switch fault.kind {
        case .none, .goAwayAfterSettings, .closeAfterSettings, .firstFrameNotSettings, .delayedSettings,
             .delayedHandshake:
            answer(context, request)
        case .goAwayBelowSent(let answered, let holding), .doubleGoAway(let answered, let holding):
            if requestsOnConnection <= answered { return answer(context, request) }
            held.append(request)
            if held.count >= holding { return drain(context) }
            if holdTimer == nil {
                holdTimer = context.eventLoop.assumeIsolated().scheduleTask(in: Self.holdTime) { [self] in
                    holdTimer = nil
                    drain(context)
                    context.flush()
                }
            }
        case .refuseEvery(let nth):
            guard requestsOnConnection % nth == 0 else { return answer(context, request) }
            streams[stream] = nil
            write(context, HostileFrames.rstStreamFrame(stream: stream, code: 0x7))
        case .resetConnection(let holding):
            if first { return answer(context, request) }
            held.append(request)
            if held.count >= holding { return answerHeldAndReset(context) }
            if holdTimer == nil {
                holdTimer = context.eventLoop.assumeIsolated().scheduleTask(in: Self.holdTime) { [self] in
                    holdTimer = nil
                    answerHeldAndReset(context)
                }
            }
        case .resetStreams(let code):
            streams[stream] = nil
            write(context, HostileFrames.rstStreamFrame(stream: stream, code: code))
        case .oversizedResponseHeaders(let token, let bytes):
            answer(context, request, padding: request.token == token ? bytes : 0)
        case .continuationFlood(let bytes):
            if first { flood(context, request, bytes: bytes) } else { answer(context, request) }
        case .interimResponse:
            var block = ByteBuffer()
            HostileFrames.literal(":status", "103", into: &block)
            HostileFrames.literal("link", "</style.css>; rel=preload", into: &block)
            writeHeaders(context, stream: stream, block: block, endStream: false)
            answer(context, request)
        case .silentFirstRequest:
            if !shared.takeFirstRequest() { answer(context, request) }
        case .rejectAll(let status, let reason):
            let open = streams.count
            shared.update { $0.statistics.maxOpenStreams = max($0.statistics.maxOpenStreams, open) }
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(20)) { [self] in
                guard !closing, streams[stream] != nil else { return }
                streams[stream] = nil
                var block = ByteBuffer()
                HostileFrames.literal(":status", String(status), into: &block)
                if let id = request.apnsID { HostileFrames.literal("apns-id", id, into: &block) }
                HostileFrames.literal("content-type", "application/json", into: &block)
                writeHeaders(context, stream: stream, block: block, endStream: false)
                let body = ByteBuffer(string: #"{"reason":""# + reason + #""}"#)
                write(context, HostileFrames.frame(HostileFrames.data, flags: HostileFrames.endStream, stream: stream) {
                    $0.writeImmutableBuffer(body)
                })
                context.flush()
            }
        case .missingStatus:
            guard first else { return answer(context, request) }
            streams[stream] = nil
            violated = true
            var block = ByteBuffer()
            HostileFrames.literal("apns-id", request.apnsID ?? "", into: &block)
            writeHeaders(context, stream: stream, block: block, endStream: true)
        case .overrunReceiveWindow:
            if first { overrun(context, request) } else { answer(context, request) }
        case .dataOnIdleStream, .zeroWindowUpdateOnConnection, .zeroWindowUpdateOnStream, .connectionWindowOverflow,
             .streamWindowOverflow, .initialWindowSizeTooLarge, .initialWindowSizeOverflowsStream, .enablePush,
             .badPriorityFrameSize:
            if first {
                write(context, offendingFrame(stream: stream))
                violated = true
            }
            answer(context, request)
        }
    }

    /// The protocol violation of a defect-9 fault, on or beside `stream`.
    private func offendingFrame(stream: UInt32) -> ByteBuffer {
        switch fault.kind {
        case .dataOnIdleStream:
            return HostileFrames.frame(HostileFrames.data, flags: 0, stream: highestStream + 2) { $0.writeInteger(UInt8(0)) }
        case .zeroWindowUpdateOnConnection: return HostileFrames.windowUpdateFrame(stream: 0, increment: 0)
        case .zeroWindowUpdateOnStream: return HostileFrames.windowUpdateFrame(stream: stream, increment: 0)
        case .connectionWindowOverflow: return HostileFrames.windowUpdateFrame(stream: 0, increment: 0x7fff_ffff)
        case .streamWindowOverflow: return HostileFrames.windowUpdateFrame(stream: stream, increment: 0x7fff_ffff)
        case .initialWindowSizeTooLarge: return HostileFrames.settingsFrame([(0x4, 0x8000_0000)])
        case .initialWindowSizeOverflowsStream:
            // The stream's send window at the client is at most the initial 1 MiB; after this update it is close
            // to 2^31-1, and the SETTINGS delta (2^31-1 - 1 MiB) takes it far past the maximum.
            var frames = HostileFrames.windowUpdateFrame(stream: stream, increment: UInt32(0x7fff_ffff - Self.receiveWindow))
            var settings = HostileFrames.settingsFrame([(0x4, 0x7fff_ffff)])
            frames.writeBuffer(&settings)
            return frames
        case .enablePush: return HostileFrames.settingsFrame([(0x2, 1)])
        case .badPriorityFrameSize:
            return HostileFrames.frame(HostileFrames.priority, flags: 0, stream: stream) { $0.writeInteger(UInt32(0)) }
        default: return ByteBuffer()
        }
    }

    /// The drains of `goAwayBelowSent` and `doubleGoAway` (see those faults), once the held requests are there.
    private func drain(_ context: ChannelHandlerContext) {
        holdTimer?.cancel()
        holdTimer = nil
        guard !closing, !firstGoAwaySent else { return }
        if case .doubleGoAway = fault.kind {
            firstGoAwaySent = true
            write(context, HostileFrames.goAwayFrame(lastStream: 0x7fff_ffff, code: 0))
            context.flush()
            // The median of the streams held before the first GOAWAY: those that arrive after it are never processed.
            let heldBefore = held.count
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(20)) { [self] in
                guard !closing else { return }
                let ids = held.prefix(heldBefore).map(\.stream).sorted()
                let median = ids.isEmpty ? highestStream : ids[(ids.count - 1) / 2]
                goAwayAndClose(context, last: min(median, Self.below(lowestUnfinished(sparing: median))))
            }
            return
        }
        goAwayAndClose(context, last: Self.below(lowestUnfinished(sparing: 0)))
    }

    /// The lowest stream id that is open and not answered, held ones with an id up to `sparing` aside (they are
    /// answered before the GOAWAY); the next stream id when there is none.
    private func lowestUnfinished(sparing: UInt32) -> UInt32 {
        let spared = Set(held.filter { $0.stream <= sparing }.map(\.stream))
        let open = streams.keys.filter { !spared.contains($0) }.min()
        return open ?? (pendingBlock?.stream ?? highestStream + 2)
    }

    /// The client stream id before `id` (0 when none).
    static func below(_ id: UInt32) -> UInt32 { id > 2 ? id - 2 : 0 }

    /// Processes (answers) the held requests up to `last`, sends GOAWAY(`last`, NO_ERROR) and closes the connection
    /// (TLS close_notify, then FIN). The held requests above `last` are left unprocessed.
    private func goAwayAndClose(_ context: ChannelHandlerContext, last: UInt32) {
        let last = min(last, highestStream)
        for request in held where request.stream <= last { answer(context, request) }
        held = []
        write(context, HostileFrames.goAwayFrame(lastStream: last, code: 0))
        context.flush()
        closing = true
        context.close(promise: nil)
    }

    /// A `200` with the request's `apns-id` (and a `x-padding` field of `padding` bytes), counted as a 200.
    private func answer(_ context: ChannelHandlerContext, _ request: Request, padding: Int = 0) {
        streams[request.stream] = nil
        var block = ByteBuffer()
        HostileFrames.literal(":status", "200", into: &block)
        if let id = request.apnsID { HostileFrames.literal("apns-id", id, into: &block) }
        if padding > 0 { HostileFrames.literal("x-padding", String(repeating: "a", count: padding), into: &block) }
        writeHeaders(context, stream: request.stream, block: block, endStream: true)
        countOK(request)
    }

    private func countOK(_ request: Request) {
        let violated = self.violated
        shared.update { state in
            state.statistics.okByToken[request.token, default: 0] += 1
            state.statistics.processedByToken[request.token, default: 0] += 1
            if violated { state.statistics.answeredAfterViolation.insert(request.token) }
        }
    }

    /// Answers every held request but the last in one flight, then resets the TCP connection.
    private func answerHeldAndReset(_ context: ChannelHandlerContext) {
        holdTimer?.cancel()
        holdTimer = nil
        guard !closing else { return }
        flight = ByteBuffer()
        for request in held.dropLast() { answer(context, request) }
        held = []
        var answers = flight ?? ByteBuffer()
        flight = nil
        write(context, Self.padded(&answers, connectionIndex: connectionIndex))
        context.flush()
        closing = true
        reset.reset()
    }

    /// `answers` padded with frames of an unknown type (which a client must ignore) so that the flight is one of
    /// `flightSizes` on the wire (TLS records of at most 16 KiB of plaintext, 22 bytes of overhead each): small
    /// flights end with the padding, large ones start with it.
    static func padded(_ answers: inout ByteBuffer, connectionIndex: Int) -> ByteBuffer {
        let sizes = flightSizes.indices.map { flightSizes[($0 + connectionIndex) % flightSizes.count] }
        for wire in sizes {
            let records = (wire + 16_384 + recordOverhead - 1) / (16_384 + recordOverhead)
            var padding = wire - records * recordOverhead - answers.readableBytes
            let frames = (padding + 16_384 + 9 - 1) / (16_384 + 9)
            guard frames >= 1, padding - 9 * frames >= 0 else { continue }
            var pad = ByteBuffer()
            for index in 0..<frames {
                let payload = index == frames - 1 ? padding - 9 : min(16_384, padding - 9)
                pad.writeImmutableBuffer(HostileFrames.frame(0xfa, flags: 0, stream: 0) { $0.writeRepeatingByte(0, count: payload) })
                padding -= payload + 9
            }
            if wire <= 16_384 {
                answers.writeBuffer(&pad)
                return answers
            }
            pad.writeBuffer(&answers)
            return pad
        }
        return answers
    }

    /// HEADERS then CONTINUATION frames of the client's max frame size at most.
    private func writeHeaders(_ context: ChannelHandlerContext, stream: UInt32, block: ByteBuffer, endStream: Bool) {
        var block = block
        var first = true
        repeat {
            let chunk = block.readSlice(length: min(block.readableBytes, clientMaxFrameSize))!
            var flags: UInt8 = block.readableBytes == 0 ? HostileFrames.endHeaders : 0
            if first, endStream { flags |= HostileFrames.endStream }
            let type = first ? HostileFrames.headers : HostileFrames.continuation
            write(context, HostileFrames.frame(type, flags: flags, stream: stream) { $0.writeImmutableBuffer(chunk) })
            first = false
        } while block.readableBytes > 0
    }

    /// A HEADERS frame without END_HEADERS, then CONTINUATION frames until `bytes` are written or the connection
    /// closes, a chunk of 64 frames at a time after the previous chunk was written (back-pressure).
    private func flood(_ context: ChannelHandlerContext, _ request: Request, bytes: Int) {
        var block = ByteBuffer()
        HostileFrames.literal(":status", "200", into: &block)
        write(context, HostileFrames.frame(HostileFrames.headers, flags: 0, stream: request.stream) { $0.writeImmutableBuffer(block) })
        var fragment = ByteBuffer()
        while fragment.readableBytes + 5 <= clientMaxFrameSize {
            HostileFrames.literal("a", "b", into: &fragment)
        }
        floodChunk(context, stream: request.stream, fragment: fragment, remaining: bytes)
    }

    private func floodChunk(_ context: ChannelHandlerContext, stream: UInt32, fragment: ByteBuffer, remaining: Int) {
        guard !closing, context.channel.isActive else { return }
        var left = remaining
        var chunk = context.channel.allocator.buffer(capacity: 64 * (fragment.readableBytes + 9))
        for _ in 0..<64 where left > 0 {
            let part = fragment.getSlice(at: fragment.readerIndex, length: min(left, fragment.readableBytes))!
            chunk.writeImmutableBuffer(HostileFrames.frame(HostileFrames.continuation, flags: 0, stream: stream) {
                $0.writeImmutableBuffer(part)
            })
            left -= part.readableBytes
        }
        let written = remaining - left
        context.writeAndFlush(wrapOutboundOut(chunk)).assumeIsolated().whenComplete { [self] result in
            guard case .success = result else { return }
            shared.update { state in
                state.statistics.floodBytesWritten += written
                if left == 0 { state.statistics.floodsCompleted += 1 }
            }
            if left > 0 { floodChunk(context, stream: stream, fragment: fragment, remaining: left) }
        }
    }

    /// A `200` whose DATA is one byte more than the client's receive window (the smaller of the stream's and the
    /// connection's as the server knows them), at most `maxOverrun` bytes.
    private func overrun(_ context: ChannelHandlerContext, _ request: Request) {
        streams[request.stream] = nil
        violated = true
        var block = ByteBuffer()
        HostileFrames.literal(":status", "200", into: &block)
        if let id = request.apnsID { HostileFrames.literal("apns-id", id, into: &block) }
        writeHeaders(context, stream: request.stream, block: block, endStream: false)
        var left = min(min(clientInitialWindow, sendWindow) + 1, Self.maxOverrun)
        let filler = ByteBuffer(repeating: UInt8(ascii: "x"), count: clientMaxFrameSize)
        while left > 0 {
            let size = min(left, clientMaxFrameSize)
            left -= size
            let part = filler.getSlice(at: 0, length: size)!
            write(context, HostileFrames.frame(HostileFrames.data, flags: left == 0 ? HostileFrames.endStream : 0,
                                               stream: request.stream) { $0.writeImmutableBuffer(part) })
        }
        countOK(request)
    }

    // MARK: Connection

    private func sendPreface(_ context: ChannelHandlerContext) {
        if fault.kind == .firstFrameNotSettings {
            violated = true
            write(context, HostileFrames.frame(HostileFrames.ping, flags: 0, stream: 0) { $0.writeInteger(UInt64(0)) })
        }
        let maxStreams = UInt32(shared.configuration.maxConcurrentStreams)
        write(context, HostileFrames.settingsFrame([(0x3, maxStreams), (0x4, UInt32(Self.receiveWindow))]))
        write(context, HostileFrames.windowUpdateFrame(stream: 0, increment: UInt32(Self.receiveWindow - 65_535)))
        switch fault.kind {
        case .goAwayAfterSettings:
            write(context, HostileFrames.goAwayFrame(lastStream: 0, code: 0))
            context.flush()
            closing = true
            reset.closeNow()
        case .closeAfterSettings:
            context.flush()
            closing = true
            reset.closeNow()
        default:
            break
        }
    }

    private func write(_ context: ChannelHandlerContext, _ frame: ByteBuffer) {
        guard !closing, frame.readableBytes > 0 else { return }
        if flight != nil {
            var frame = frame
            flight!.writeBuffer(&frame)
            return
        }
        context.write(wrapOutboundOut(frame), promise: nil)
    }

    private func close(_ context: ChannelHandlerContext) {
        guard !closing else { return }
        closing = true
        context.close(promise: nil)
    }
}

/// Raw HTTP/2 frames and literal HPACK fields (RFC 9113 §4, RFC 7541 §6.2.2: literal without indexing, new name,
/// no Huffman coding, so the server keeps no HPACK state for what it sends).
enum HostileFrames {
    static let data: UInt8 = 0x0
    static let headers: UInt8 = 0x1
    static let priority: UInt8 = 0x2
    static let rstStream: UInt8 = 0x3
    static let settings: UInt8 = 0x4
    static let ping: UInt8 = 0x6
    static let goAway: UInt8 = 0x7
    static let windowUpdate: UInt8 = 0x8
    static let continuation: UInt8 = 0x9

    static let endStream: UInt8 = 0x1
    static let ack: UInt8 = 0x1
    static let endHeaders: UInt8 = 0x4
    static let padded: UInt8 = 0x8
    static let priorityFlag: UInt8 = 0x20

    /// One frame: the 9-byte header, then what `payload` writes.
    static func frame(_ type: UInt8, flags: UInt8, stream: UInt32,
                      payload: (inout ByteBuffer) -> Void = { _ in }) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeBytes([0, 0, 0, type, flags])
        buffer.writeInteger(stream & 0x7fff_ffff)
        payload(&buffer)
        let length = buffer.readableBytes - 9
        buffer.setBytes([UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8),
                         UInt8(truncatingIfNeeded: length)], at: buffer.readerIndex)
        return buffer
    }

    static func settingsFrame(_ parameters: [(UInt16, UInt32)]) -> ByteBuffer {
        frame(settings, flags: 0, stream: 0) { buffer in
            for (id, value) in parameters {
                buffer.writeInteger(id)
                buffer.writeInteger(value)
            }
        }
    }

    static func windowUpdateFrame(stream: UInt32, increment: UInt32) -> ByteBuffer {
        frame(windowUpdate, flags: 0, stream: stream) { $0.writeInteger(increment) }
    }

    static func rstStreamFrame(stream: UInt32, code: UInt32) -> ByteBuffer {
        frame(rstStream, flags: 0, stream: stream) { $0.writeInteger(code) }
    }

    static func goAwayFrame(lastStream: UInt32, code: UInt32) -> ByteBuffer {
        frame(goAway, flags: 0, stream: 0) { buffer in
            buffer.writeInteger(lastStream)
            buffer.writeInteger(code)
        }
    }

    /// A literal header field without indexing, with a new (literal) name.
    static func literal(_ name: String, _ value: String, into block: inout ByteBuffer) {
        block.writeInteger(UInt8(0))
        string(name, into: &block)
        string(value, into: &block)
    }

    static func string(_ text: String, into block: inout ByteBuffer) {
        integer(text.utf8.count, prefixBits: 7, into: &block)
        block.writeString(text)
    }

    /// An HPACK integer with an N-bit prefix (RFC 7541 §5.1), the prefix's high bits 0.
    static func integer(_ value: Int, prefixBits: Int, into block: inout ByteBuffer) {
        let limit = (1 << prefixBits) - 1
        guard value >= limit else {
            block.writeInteger(UInt8(value))
            return
        }
        block.writeInteger(UInt8(limit))
        var rest = value - limit
        while rest >= 128 {
            block.writeInteger(UInt8(rest & 0x7f) | 0x80)
            rest >>= 7
        }
        block.writeInteger(UInt8(rest))
    }
}
