import NIOCore
import NIOHPACK

/// The client side of one HTTP/2 connection (RFC 9113) as APNs needs it, without I/O: it encodes requests (HEADERS
/// and CONTINUATION, then DATA within the peer's flow-control windows) and control frames into `outbound`, and
/// turns received bytes into the events the stream handler acts on. It answers SETTINGS and PING itself.
///
/// It keeps no per-stream state except for DATA that waits for window: the stream handler owns the streams. A
/// request body is sent right after its HEADERS when both windows allow, which for APNs-sized payloads (at most
/// 5 KB) against APNs' windows is always, so the common path is two frames appended to one buffer.
struct HTTP2ClientConnection {
    /// What the stream handler acts on.
    enum Event {
        /// A complete header block (response headers or trailers).
        case headers(streamID: Int32, HPACKHeaders, endStream: Bool)
        /// Response body bytes; `flowControlledLength` (padding included) counts against the receive windows.
        case data(streamID: Int32, ByteBuffer, endStream: Bool, flowControlledLength: Int)
        case reset(streamID: Int32, errorCode: UInt32)
        case goAway(lastStreamID: Int32, errorCode: UInt32, debugData: ByteBuffer)
        /// The peer's SETTINGS, applied and acknowledged.
        case settings(maxConcurrentStreams: Int?)
        case pingAck
    }

    /// A violation of the protocol by the peer: the connection cannot go on.
    struct ProtocolError: Error, CustomStringConvertible {
        var errorCode: UInt32
        var message: String
        var description: String { message }
    }

    enum FrameType {
        static let data: UInt8 = 0x0
        static let headers: UInt8 = 0x1
        static let priority: UInt8 = 0x2
        static let rstStream: UInt8 = 0x3
        static let settings: UInt8 = 0x4
        static let pushPromise: UInt8 = 0x5
        static let ping: UInt8 = 0x6
        static let goAway: UInt8 = 0x7
        static let windowUpdate: UInt8 = 0x8
        static let continuation: UInt8 = 0x9
    }

    enum Flags {
        static let endStream: UInt8 = 0x1
        static let ack: UInt8 = 0x1
        static let endHeaders: UInt8 = 0x4
        static let padded: UInt8 = 0x8
        static let priority: UInt8 = 0x20
    }

    enum ErrorCode {
        static let noError: UInt32 = 0x0
        static let protocolError: UInt32 = 0x1
        static let flowControlError: UInt32 = 0x3
        static let frameSizeError: UInt32 = 0x6
        static let refusedStream: UInt32 = 0x7
        static let cancel: UInt32 = 0x8
        static let compressionError: UInt32 = 0x9

        /// RFC 9113 7: the names of the codes, for logs and error messages.
        static let names = ["NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
                            "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR",
                            "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED"]

        /// `CANCEL (0x8)`; an unknown code as its hex value.
        static func name(_ code: UInt32) -> String {
            let hex = "0x" + String(code, radix: 16)
            return code < names.count ? "\(names[Int(code)]) (\(hex))" : hex
        }
    }

    static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    /// The largest frame this client accepts (the protocol's default; it never announces more).
    static let localMaxFrameSize = 16_384
    /// The receive window of each response stream, announced in the preface.
    static let localInitialWindowSize = 1 << 20
    static let maxWindow = Int(Int32.max)

    /// Bytes for the socket, in order.
    var outbound: ByteBuffer
    private var inbound: ByteBuffer
    private var encoder = HPACKRequestEncoder()
    private var decoder: HPACKDecoder
    /// A header block waiting for its CONTINUATION frames.
    private var partialBlock: (streamID: Int32, endStream: Bool, block: ByteBuffer)?

    private(set) var peerMaxFrameSize = 16_384
    private(set) var peerInitialWindowSize = 65_535
    private(set) var connectionSendWindow = 65_535

    /// Request bodies (or their rest) waiting for connection or stream window, oldest first.
    private var blocked: [BlockedData] = []
    private struct BlockedData {
        var streamID: Int32
        var body: ByteBuffer
        var streamWindow: Int
    }

    init(allocator: ByteBufferAllocator, maxHeaderListSize: Int = 16_384) {
        outbound = allocator.buffer(capacity: 16_384)
        inbound = allocator.buffer(capacity: 0)
        decoder = HPACKDecoder(allocator: allocator, maxDynamicTableSize: HPACKDecoder.maxDynamicTableSize,
                               maxHeaderListSize: maxHeaderListSize)
    }

    /// Request bodies still waiting for flow-control window.
    var blockedStreams: Int { blocked.count }

    // MARK: outbound

    /// The connection preface and this client's SETTINGS: no server push, a 1 MiB receive window per stream,
    /// 16 KB of response headers at most.
    mutating func writePreface(maxHeaderListSize: Int = 16_384) {
        outbound.writeBytes(Self.preface)
        let settings: [(UInt16, UInt32)] = [
            (0x2, 0),  // ENABLE_PUSH
            (0x3, 100),  // MAX_CONCURRENT_STREAMS (server-initiated: none, push is off)
            (0x4, UInt32(Self.localInitialWindowSize)),  // INITIAL_WINDOW_SIZE
            (0x6, UInt32(maxHeaderListSize)),  // MAX_HEADER_LIST_SIZE
        ]
        writeFrameHeader(length: settings.count * 6, type: FrameType.settings, flags: 0, streamID: 0)
        for (identifier, value) in settings {
            outbound.writeInteger(identifier)
            outbound.writeInteger(value)
        }
    }

    /// HEADERS (and CONTINUATION when the block exceeds the peer's frame size), then the body as DATA now or as
    /// soon as the windows allow. An empty body ends the stream with the HEADERS.
    mutating func writeRequest(streamID: Int32, headers: APNsRequestHead, body: ByteBuffer) {
        let endStream = body.readableBytes == 0
        let frameStart = outbound.writerIndex
        outbound.writeRepeatingByte(0, count: 9)
        let blockStart = outbound.writerIndex
        encoder.encode(headers, into: &outbound)
        let blockLength = outbound.writerIndex - blockStart
        if blockLength <= peerMaxFrameSize {
            setFrameHeader(at: frameStart, length: blockLength, type: FrameType.headers,
                           flags: Flags.endHeaders | (endStream ? Flags.endStream : 0), streamID: streamID)
        } else {
            var block = outbound.getSlice(at: blockStart, length: blockLength)!
            block = ByteBuffer(buffer: block)  // detached: the frames below overwrite these bytes
            outbound.moveWriterIndex(to: frameStart)
            var first = true
            while block.readableBytes > 0 {
                var chunk = block.readSlice(length: min(peerMaxFrameSize, block.readableBytes))!
                let last = block.readableBytes == 0
                let flags = (last ? Flags.endHeaders : 0) | (first && endStream ? Flags.endStream : 0)
                writeFrameHeader(length: chunk.readableBytes, type: first ? FrameType.headers : FrameType.continuation,
                                 flags: flags, streamID: streamID)
                outbound.writeBuffer(&chunk)
                first = false
            }
        }
        guard !endStream else { return }
        if blocked.isEmpty, body.readableBytes <= connectionSendWindow, body.readableBytes <= peerInitialWindowSize {
            var body = body
            writeData(streamID: streamID, body: &body, count: body.readableBytes, endStream: true)
        } else {
            blocked.append(BlockedData(streamID: streamID, body: body, streamWindow: peerInitialWindowSize))
            sendBlockedData()
        }
    }

    mutating func writeReset(streamID: Int32, errorCode: UInt32) {
        writeFrameHeader(length: 4, type: FrameType.rstStream, flags: 0, streamID: streamID)
        outbound.writeInteger(errorCode)
        forget(streamID: streamID)
    }

    mutating func writePing(_ data: UInt64, ack: Bool = false) {
        writeFrameHeader(length: 8, type: FrameType.ping, flags: ack ? Flags.ack : 0, streamID: 0)
        outbound.writeInteger(data)
    }

    /// Gives the peer `increment` more bytes of receive window on a stream, or on the connection (stream 0).
    mutating func writeWindowUpdate(streamID: Int32, increment: Int) {
        guard increment > 0 else { return }
        writeFrameHeader(length: 4, type: FrameType.windowUpdate, flags: 0, streamID: streamID)
        outbound.writeInteger(UInt32(min(increment, Self.maxWindow)))
    }

    mutating func writeGoAway(lastStreamID: Int32, errorCode: UInt32) {
        writeFrameHeader(length: 8, type: FrameType.goAway, flags: 0, streamID: 0)
        outbound.writeInteger(UInt32(lastStreamID))
        outbound.writeInteger(errorCode)
    }

    /// Drops what is still unsent of a stream that ended (reset, expired, refused by GOAWAY).
    mutating func forget(streamID: Int32) {
        guard !blocked.isEmpty else { return }
        blocked.removeAll { $0.streamID == streamID }
    }

    /// Sends what the windows allow of the waiting bodies, oldest first.
    private mutating func sendBlockedData() {
        var index = 0
        while index < blocked.count, connectionSendWindow > 0 {
            var entry = blocked[index]
            let count = min(entry.body.readableBytes, connectionSendWindow, entry.streamWindow)
            if count > 0 {
                let endStream = count == entry.body.readableBytes
                writeData(streamID: entry.streamID, body: &entry.body, count: count, endStream: endStream)
                if endStream {
                    blocked.remove(at: index)
                    continue
                }
                entry.streamWindow -= count
                blocked[index] = entry
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
            writeFrameHeader(length: length, type: FrameType.data,
                             flags: remaining == 0 && endStream ? Flags.endStream : 0, streamID: streamID)
            var chunk = body.readSlice(length: length)!
            outbound.writeBuffer(&chunk)
        } while remaining > 0
        connectionSendWindow -= count
    }

    private mutating func writeFrameHeader(length: Int, type: UInt8, flags: UInt8, streamID: Int32) {
        outbound.writeInteger(UInt8(truncatingIfNeeded: length >> 16))
        outbound.writeInteger(UInt16(truncatingIfNeeded: length))
        outbound.writeInteger(type)
        outbound.writeInteger(flags)
        outbound.writeInteger(UInt32(bitPattern: streamID))
    }

    private mutating func setFrameHeader(at index: Int, length: Int, type: UInt8, flags: UInt8, streamID: Int32) {
        outbound.setInteger(UInt8(truncatingIfNeeded: length >> 16), at: index)
        outbound.setInteger(UInt16(truncatingIfNeeded: length), at: index + 1)
        outbound.setInteger(type, at: index + 3)
        outbound.setInteger(flags, at: index + 4)
        outbound.setInteger(UInt32(bitPattern: streamID), at: index + 5)
    }

    // MARK: inbound

    /// Takes bytes received from the socket (after TLS).
    mutating func receive(_ buffer: inout ByteBuffer) {
        if inbound.readableBytes == 0 {
            inbound = buffer
        } else {
            inbound.writeBuffer(&buffer)
        }
    }

    /// The next event in the bytes received so far, or nil when a whole frame has not arrived yet. Frames the
    /// connection handles itself (SETTINGS and PING acknowledgements, WINDOW_UPDATE, PRIORITY, unknown types)
    /// produce no event.
    mutating func nextEvent() throws(ProtocolError) -> Event? {
        while inbound.readableBytes >= 9 {
            let start = inbound.readerIndex
            let length = Int(inbound.getInteger(at: start, as: UInt8.self)!) << 16
                | Int(inbound.getInteger(at: start + 1, as: UInt16.self)!)
            guard length <= Self.localMaxFrameSize else {
                throw ProtocolError(errorCode: ErrorCode.frameSizeError,
                                    message: "HTTP/2 frame of \(length) bytes exceeds the \(Self.localMaxFrameSize) allowed")
            }
            guard inbound.readableBytes >= 9 + length else { break }
            let type = inbound.getInteger(at: start + 3, as: UInt8.self)!
            let flags = inbound.getInteger(at: start + 4, as: UInt8.self)!
            let streamID = Int32(bitPattern: inbound.getInteger(at: start + 5, as: UInt32.self)! & 0x7fff_ffff)
            inbound.moveReaderIndex(forwardBy: 9)
            let payload = inbound.readSlice(length: length)!
            if let event = try handleFrame(type: type, flags: flags, streamID: streamID, payload: payload) {
                return event
            }
        }
        // Nothing to reset when all is read: the next `receive` takes the next buffer as it is. A partial frame
        // left far into a large buffer is moved to its front before more bytes are appended.
        if inbound.readableBytes > 0, inbound.readerIndex > 65_536 {
            inbound.discardReadBytes()
        }
        return nil
    }

    private mutating func handleFrame(type: UInt8, flags: UInt8, streamID: Int32,
                                      payload: ByteBuffer) throws(ProtocolError) -> Event? {
        if let partial = partialBlock {
            guard type == FrameType.continuation, streamID == partial.streamID else {
                throw ProtocolError(errorCode: ErrorCode.protocolError,
                                    message: "HTTP/2 header block of stream \(partial.streamID) interrupted by a frame of type \(type)")
            }
            var block = partial.block
            var fragment = payload
            block.writeBuffer(&fragment)
            guard flags & Flags.endHeaders != 0 else {
                partialBlock = (partial.streamID, partial.endStream, block)
                return nil
            }
            partialBlock = nil
            return .headers(streamID: streamID, try decode(&block), endStream: partial.endStream)
        }
        switch type {
        case FrameType.data:
            try requireStream(streamID, type: "DATA")
            var body = payload
            try removePadding(&body, flags: flags)
            return .data(streamID: streamID, body, endStream: flags & Flags.endStream != 0,
                         flowControlledLength: payload.readableBytes)
        case FrameType.headers:
            try requireStream(streamID, type: "HEADERS")
            var block = payload
            try removePadding(&block, flags: flags)
            if flags & Flags.priority != 0 {
                guard block.readableBytes >= 5 else { throw Self.frameSizeError("HEADERS priority") }
                block.moveReaderIndex(forwardBy: 5)
            }
            let endStream = flags & Flags.endStream != 0
            guard flags & Flags.endHeaders != 0 else {
                partialBlock = (streamID, endStream, ByteBuffer(buffer: block))
                return nil
            }
            return .headers(streamID: streamID, try decode(&block), endStream: endStream)
        case FrameType.continuation:
            throw ProtocolError(errorCode: ErrorCode.protocolError, message: "HTTP/2 CONTINUATION without a header block")
        case FrameType.rstStream:
            try requireStream(streamID, type: "RST_STREAM")
            guard payload.readableBytes == 4 else { throw Self.frameSizeError("RST_STREAM") }
            forget(streamID: streamID)
            return .reset(streamID: streamID, errorCode: payload.getInteger(at: payload.readerIndex, as: UInt32.self)!)
        case FrameType.settings:
            return try receiveSettings(flags: flags, streamID: streamID, payload: payload)
        case FrameType.ping:
            guard streamID == 0 else { throw Self.connectionFrameOnStream("PING") }
            guard payload.readableBytes == 8 else { throw Self.frameSizeError("PING") }
            if flags & Flags.ack != 0 { return .pingAck }
            writePing(payload.getInteger(at: payload.readerIndex, as: UInt64.self)!, ack: true)
            return nil
        case FrameType.goAway:
            guard streamID == 0 else { throw Self.connectionFrameOnStream("GOAWAY") }
            guard payload.readableBytes >= 8 else { throw Self.frameSizeError("GOAWAY") }
            var rest = payload
            let lastStreamID = Int32(bitPattern: rest.readInteger(as: UInt32.self)! & 0x7fff_ffff)
            let errorCode = rest.readInteger(as: UInt32.self)!
            blocked.removeAll { $0.streamID > lastStreamID }
            return .goAway(lastStreamID: lastStreamID, errorCode: errorCode, debugData: rest)
        case FrameType.windowUpdate:
            guard payload.readableBytes == 4 else { throw Self.frameSizeError("WINDOW_UPDATE") }
            let increment = Int(payload.getInteger(at: payload.readerIndex, as: UInt32.self)! & 0x7fff_ffff)
            try receiveWindowUpdate(streamID: streamID, increment: increment)
            return nil
        case FrameType.pushPromise:
            throw ProtocolError(errorCode: ErrorCode.protocolError, message: "HTTP/2 PUSH_PROMISE although push is disabled")
        default:
            return nil  // PRIORITY and unknown or extension frames are ignored (RFC 9113 4.1, 5.5)
        }
    }

    private mutating func receiveSettings(flags: UInt8, streamID: Int32,
                                          payload: ByteBuffer) throws(ProtocolError) -> Event? {
        guard streamID == 0 else { throw Self.connectionFrameOnStream("SETTINGS") }
        if flags & Flags.ack != 0 {
            guard payload.readableBytes == 0 else { throw Self.frameSizeError("SETTINGS acknowledgement") }
            return nil
        }
        guard payload.readableBytes % 6 == 0 else { throw Self.frameSizeError("SETTINGS") }
        var rest = payload
        var maxConcurrentStreams: Int?
        while let identifier = rest.readInteger(as: UInt16.self), let value = rest.readInteger(as: UInt32.self) {
            switch identifier {
            case 0x1:  // HEADER_TABLE_SIZE
                encoder.setPeerMaxTableSize(Int(value))
            case 0x3:  // MAX_CONCURRENT_STREAMS
                maxConcurrentStreams = Int(value)
            case 0x4:  // INITIAL_WINDOW_SIZE: changes the send window of every open stream (RFC 9113 6.9.2)
                guard value <= UInt32(Self.maxWindow) else {
                    throw ProtocolError(errorCode: ErrorCode.flowControlError,
                                        message: "HTTP/2 SETTINGS_INITIAL_WINDOW_SIZE of \(value) exceeds 2^31-1")
                }
                let delta = Int(value) - peerInitialWindowSize
                peerInitialWindowSize = Int(value)
                for index in blocked.indices { blocked[index].streamWindow += delta }
            case 0x5:  // MAX_FRAME_SIZE
                guard (16_384...16_777_215).contains(value) else {
                    throw ProtocolError(errorCode: ErrorCode.protocolError,
                                        message: "HTTP/2 SETTINGS_MAX_FRAME_SIZE of \(value) is out of range")
                }
                peerMaxFrameSize = Int(value)
            default:
                break  // ENABLE_PUSH, MAX_HEADER_LIST_SIZE and unknown settings need nothing from a client
            }
        }
        writeFrameHeader(length: 0, type: FrameType.settings, flags: Flags.ack, streamID: 0)
        sendBlockedData()
        return .settings(maxConcurrentStreams: maxConcurrentStreams)
    }

    private mutating func receiveWindowUpdate(streamID: Int32, increment: Int) throws(ProtocolError) {
        if streamID == 0 {
            guard increment > 0 else {
                throw ProtocolError(errorCode: ErrorCode.protocolError, message: "HTTP/2 WINDOW_UPDATE of 0 on the connection")
            }
            guard connectionSendWindow + increment <= Self.maxWindow else {
                throw ProtocolError(errorCode: ErrorCode.flowControlError, message: "HTTP/2 connection window exceeds 2^31-1")
            }
            connectionSendWindow += increment
        } else {
            // A stream whose body has all been sent needs no window; its update is ignored.
            guard let index = blocked.firstIndex(where: { $0.streamID == streamID }) else { return }
            blocked[index].streamWindow = min(blocked[index].streamWindow + increment, Self.maxWindow)
        }
        sendBlockedData()
    }

    private mutating func decode(_ block: inout ByteBuffer) throws(ProtocolError) -> HPACKHeaders {
        do {
            return try decoder.decodeHeaders(from: &block)
        } catch {
            throw ProtocolError(errorCode: ErrorCode.compressionError, message: "HPACK decoding failed: \(error)")
        }
    }

    private func removePadding(_ payload: inout ByteBuffer, flags: UInt8) throws(ProtocolError) {
        guard flags & Flags.padded != 0 else { return }
        guard let padLength = payload.readInteger(as: UInt8.self), Int(padLength) <= payload.readableBytes else {
            throw ProtocolError(errorCode: ErrorCode.protocolError, message: "HTTP/2 padding longer than its frame")
        }
        payload = payload.getSlice(at: payload.readerIndex, length: payload.readableBytes - Int(padLength))!
    }

    private func requireStream(_ streamID: Int32, type: String) throws(ProtocolError) {
        guard streamID != 0 else {
            throw ProtocolError(errorCode: ErrorCode.protocolError, message: "HTTP/2 \(type) frame on stream 0")
        }
    }

    private static func frameSizeError(_ type: String) -> ProtocolError {
        ProtocolError(errorCode: ErrorCode.frameSizeError, message: "HTTP/2 \(type) frame of a wrong size")
    }

    private static func connectionFrameOnStream(_ type: String) -> ProtocolError {
        ProtocolError(errorCode: ErrorCode.protocolError, message: "HTTP/2 \(type) frame on a stream")
    }
}
