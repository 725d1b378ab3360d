import NIOCore
import NIOHPACK
import NorqCore
@testable import NorqAPNs
import Testing

/// The APNs client's HTTP/2 framing without I/O: what it writes, frame by frame, and what it makes of what it reads.
@Suite("HTTP2ClientConnection: frames written, flow control, frames read")
struct HTTP2ClientConnectionTests {
    typealias Connection = HTTP2ClientConnection
    typealias FrameType = HTTP2ClientConnection.FrameType

    struct Frame {
        var type: UInt8
        var flags: UInt8
        var streamID: Int32
        var payload: ByteBuffer
    }

    /// Takes every whole frame out of `buffer`.
    static func frames(_ buffer: inout ByteBuffer) -> [Frame] {
        var frames: [Frame] = []
        while buffer.readableBytes >= 9 {
            let length = Int(buffer.getInteger(at: buffer.readerIndex, as: UInt8.self)!) << 16
                | Int(buffer.getInteger(at: buffer.readerIndex + 1, as: UInt16.self)!)
            guard buffer.readableBytes >= 9 + length else { break }
            buffer.moveReaderIndex(forwardBy: 3)
            let type = buffer.readInteger(as: UInt8.self)!
            let flags = buffer.readInteger(as: UInt8.self)!
            let streamID = Int32(bitPattern: buffer.readInteger(as: UInt32.self)! & 0x7fff_ffff)
            frames.append(Frame(type: type, flags: flags, streamID: streamID, payload: buffer.readSlice(length: length)!))
        }
        return frames
    }

    static func written(_ connection: inout Connection) -> [Frame] {
        var out = connection.outbound
        connection.outbound.clear()
        return frames(&out)
    }

    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: Int32 = 0, _ payload: [UInt8] = []) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt8(payload.count >> 16))
        buffer.writeInteger(UInt16(truncatingIfNeeded: payload.count))
        buffer.writeInteger(type)
        buffer.writeInteger(flags)
        buffer.writeInteger(UInt32(stream))
        buffer.writeBytes(payload)
        return buffer
    }

    static func settings(_ pairs: [(UInt16, UInt32)]) -> ByteBuffer {
        var payload = ByteBuffer()
        for (id, value) in pairs {
            payload.writeInteger(id)
            payload.writeInteger(value)
        }
        return frame(FrameType.settings, Array(payload.readableBytesView))
    }

    static func windowUpdate(stream: Int32, _ increment: UInt32) -> ByteBuffer {
        var payload = ByteBuffer()
        payload.writeInteger(increment)
        return frame(FrameType.windowUpdate, stream: stream, Array(payload.readableBytesView))
    }

    static func responseBlock(_ encoder: inout HPACKEncoder, status: String, _ extra: [(String, String)] = []) throws -> [UInt8] {
        var headers = HPACKHeaders([(":status", status)])
        for (name, value) in extra { headers.add(name: name, value: value) }
        var block = ByteBuffer()
        try encoder.encode(headers: headers, to: &block)
        return Array(block.readableBytesView)
    }

    static func requestHeaders(_ n: Int) -> APNsRequestHead {
        HPACKRequestEncoderTests.request(path: "/3/device/\(n)", id: "id-\(n)")
    }

    static func events(_ connection: inout Connection, _ bytes: ByteBuffer) throws -> [Connection.Event] {
        var bytes = bytes
        connection.receive(&bytes)
        var events: [Connection.Event] = []
        while let event = try connection.nextEvent() { events.append(event) }
        return events
    }

    // MARK: writing

    @Test("the preface: the magic string, then SETTINGS without push and with a 1 MiB stream window")
    func preface() {
        var connection = Connection(allocator: ByteBufferAllocator())
        connection.writePreface()
        var out = connection.outbound
        #expect(out.readBytes(length: 24) == Connection.preface)
        let frames = Self.frames(&out)
        #expect(frames.count == 1)
        #expect(frames[0].type == FrameType.settings && frames[0].streamID == 0)
        var payload = frames[0].payload
        var settings: [UInt16: UInt32] = [:]
        while let id = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) { settings[id] = value }
        #expect(settings == [2: 0, 3: 100, 4: 1 << 20, 6: 16_384])
    }

    @Test("a request is HEADERS then one DATA ending the stream; a bodiless one ends with its HEADERS")
    func requestFrames() throws {
        var connection = Connection(allocator: ByteBufferAllocator())
        connection.writeRequest(streamID: 1, headers: Self.requestHeaders(1), body: ByteBuffer(repeating: 7, count: 1_000))
        connection.writeRequest(streamID: 3, headers: Self.requestHeaders(3), body: ByteBuffer())
        let frames = Self.written(&connection)
        #expect(frames.map(\.type) == [FrameType.headers, FrameType.data, FrameType.headers])
        #expect(frames.map(\.streamID) == [1, 1, 3])
        #expect(frames.map(\.flags) == [0x4, 0x1, 0x5])
        #expect(frames[1].payload.readableBytes == 1_000)
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        for (frame, n) in [(frames[0], 1), (frames[2], 3)] {
            var block = frame.payload
            #expect(HPACKRequestEncoderTests.pairs(try decoder.decodeHeaders(from: &block))
                    == HPACKRequestEncoderTests.pairs(Self.requestHeaders(n)))
        }
        #expect(connection.connectionSendWindow == 65_535 - 1_000)
    }

    @Test("bodies beyond the connection window wait, in order, for WINDOW_UPDATE; nothing is sent twice")
    func connectionFlowControl() throws {
        var connection = Connection(allocator: ByteBufferAllocator())
        for n in 0..<70 {
            connection.writeRequest(streamID: Int32(2 * n + 1), headers: Self.requestHeaders(n),
                                    body: ByteBuffer(repeating: UInt8(n), count: 1_000))
        }
        var sent: [Int32: Int] = [:]
        var ended: [Int32] = []
        func account(_ frames: [Frame]) {
            for frame in frames where frame.type == FrameType.data {
                sent[frame.streamID, default: 0] += frame.payload.readableBytes
                #expect(frame.payload.readableBytesView.allSatisfy { $0 == UInt8((frame.streamID - 1) / 2) })
                if frame.flags & 0x1 != 0 { ended.append(frame.streamID) }
            }
        }
        account(Self.written(&connection))
        #expect(sent.values.reduce(0, +) == 65_535)
        #expect(ended.count == 65)
        #expect(connection.blockedStreams == 5)
        #expect(connection.connectionSendWindow == 0)
        // A stream's own update does not open the exhausted connection window.
        #expect(try Self.events(&connection, Self.windowUpdate(stream: 133, 10_000)).isEmpty)
        #expect(Self.written(&connection).isEmpty)
        #expect(try Self.events(&connection, Self.windowUpdate(stream: 0, 3_000)).isEmpty)
        account(Self.written(&connection))
        #expect(ended.count == 68)
        _ = try Self.events(&connection, Self.windowUpdate(stream: 0, 1 << 20))
        account(Self.written(&connection))
        let allStreams: [Int32] = (0..<70).map { (n: Int) -> Int32 in Int32(2 * n + 1) }
        #expect(ended == allStreams)
        #expect(sent.values.allSatisfy { $0 == 1_000 } && sent.count == 70)
        #expect(connection.blockedStreams == 0)
    }

    @Test("a stream window smaller than the body: the rest follows the stream's WINDOW_UPDATE")
    func streamFlowControl() throws {
        var connection = Connection(allocator: ByteBufferAllocator())
        _ = try Self.events(&connection, Self.settings([(0x4, 400)]))
        _ = Self.written(&connection)  // SETTINGS ack
        connection.writeRequest(streamID: 1, headers: Self.requestHeaders(1), body: ByteBuffer(repeating: 1, count: 1_000))
        var frames = Self.written(&connection)
        #expect(frames.map(\.type) == [FrameType.headers, FrameType.data])
        #expect(frames[1].payload.readableBytes == 400 && frames[1].flags == 0)
        _ = try Self.events(&connection, Self.windowUpdate(stream: 1, 1_000))
        frames = Self.written(&connection)
        #expect(frames.count == 1 && frames[0].payload.readableBytes == 600 && frames[0].flags == 0x1)
    }

    @Test("a larger SETTINGS_INITIAL_WINDOW_SIZE releases waiting bodies; a reset stream's rest is dropped")
    func initialWindowChange() throws {
        var connection = Connection(allocator: ByteBufferAllocator())
        _ = try Self.events(&connection, Self.settings([(0x4, 0)]))
        _ = Self.written(&connection)
        connection.writeRequest(streamID: 1, headers: Self.requestHeaders(1), body: ByteBuffer(repeating: 1, count: 500))
        connection.writeRequest(streamID: 3, headers: Self.requestHeaders(3), body: ByteBuffer(repeating: 3, count: 500))
        #expect(Self.written(&connection).map(\.type) == [FrameType.headers, FrameType.headers])
        connection.writeReset(streamID: 1, errorCode: Connection.ErrorCode.cancel)
        _ = Self.written(&connection)
        _ = try Self.events(&connection, Self.settings([(0x4, 65_535)]))
        let frames = Self.written(&connection)
        #expect(frames.map(\.type) == [FrameType.settings, FrameType.data])
        #expect(frames[0].flags == 0x1)  // the ack, before the data it unblocked
        #expect(frames[1].streamID == 3 && frames[1].payload.readableBytes == 500)
    }

    @Test("frames respect the peer's SETTINGS_MAX_FRAME_SIZE: long bodies split, long header blocks continue")
    func frameSizes() throws {
        var connection = Connection(allocator: ByteBufferAllocator())
        _ = try Self.events(&connection, Self.settings([(0x4, 1 << 20)]))
        _ = try Self.events(&connection, Self.windowUpdate(stream: 0, 1 << 20))
        _ = Self.written(&connection)
        var headers = Self.requestHeaders(1)
        headers.fields.append(HTTPHeader("x-long", String(repeating: "h", count: 40_000)))
        connection.writeRequest(streamID: 1, headers: headers, body: ByteBuffer(repeating: 9, count: 40_000))
        let frames = Self.written(&connection)
        #expect(frames.map(\.type) == [FrameType.headers, FrameType.continuation, FrameType.continuation,
                                       FrameType.data, FrameType.data, FrameType.data])
        #expect(frames.allSatisfy { $0.payload.readableBytes <= 16_384 })
        #expect(frames.map(\.flags) == [0, 0, 0x4, 0, 0, 0x1])
        var block = ByteBuffer()
        for frame in frames.prefix(3) {
            var payload = frame.payload
            block.writeBuffer(&payload)
        }
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator(), maxDynamicTableSize: 4_096, maxHeaderListSize: 1 << 20)
        #expect(HPACKRequestEncoderTests.pairs(try decoder.decodeHeaders(from: &block)) == HPACKRequestEncoderTests.pairs(headers))
        #expect(frames.suffix(3).map(\.payload.readableBytes).reduce(0, +) == 40_000)
    }

    // MARK: reading

    @Test("SETTINGS, PING, response headers, padded DATA and trailers, read even one byte at a time")
    func readsFramesAcrossReads() throws {
        var connection = Connection(allocator: ByteBufferAllocator())
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        let block = try Self.responseBlock(&encoder, status: "400", [("apns-id", "abc")])
        var input = Self.settings([(0x3, 1_000), (0x1, 0)])
        input.writeImmutableBuffer(Self.frame(FrameType.ping, [1, 2, 3, 4, 5, 6, 7, 8]))
        input.writeImmutableBuffer(Self.frame(FrameType.headers, flags: 0, stream: 1, Array(block.prefix(3))))
        input.writeImmutableBuffer(Self.frame(FrameType.continuation, flags: 0x4, stream: 1, Array(block.dropFirst(3))))
        input.writeImmutableBuffer(Self.frame(FrameType.data, flags: 0x8, stream: 1, [2] + Array("{\"reason\":\"BadDeviceToken\"}".utf8) + [0, 0]))
        input.writeImmutableBuffer(Self.frame(FrameType.headers, flags: 0x5, stream: 1,
                                              try Self.responseBlock(&encoder, status: "200")))
        var events: [Connection.Event] = []
        for byte in input.readableBytesView {
            events += try Self.events(&connection, ByteBuffer(bytes: [byte]))
        }
        #expect(events.count == 4)  // the PING is answered, not reported
        guard case .settings(let limit) = events[0] else { Issue.record("not settings: \(events[0])"); return }
        #expect(limit == 1_000)
        guard case .headers(1, let headers, false) = events[1] else { Issue.record("not headers: \(events[1])"); return }
        #expect(HPACKRequestEncoderTests.pairs(headers) == [":status: 400", "apns-id: abc"])
        guard case .data(1, let body, false, let counted) = events[2] else { Issue.record("not data: \(events[2])"); return }
        #expect(String(buffer: body) == "{\"reason\":\"BadDeviceToken\"}")
        #expect(counted == 1 + 27 + 2)
        guard case .headers(1, let trailers, true) = events[3] else { Issue.record("not trailers: \(events[3])"); return }
        #expect(HPACKRequestEncoderTests.pairs(trailers) == [":status: 200"])
        let frames = Self.written(&connection)
        #expect(frames.map(\.type) == [FrameType.settings, FrameType.ping])
        #expect(frames.map(\.flags) == [0x1, 0x1])
        #expect(Array(frames[1].payload.readableBytesView) == [1, 2, 3, 4, 5, 6, 7, 8])
    }

    @Test("RST_STREAM, GOAWAY with debug data and PING acks become events; PRIORITY and unknown frames do not")
    func controlEvents() throws {
        var connection = Connection(allocator: ByteBufferAllocator())
        var input = Self.frame(FrameType.rstStream, stream: 5, [0, 0, 0, 7])
        input.writeImmutableBuffer(Self.frame(FrameType.priority, stream: 7, [0, 0, 0, 1, 16]))
        input.writeImmutableBuffer(Self.frame(0x42, stream: 0, [1, 2, 3]))
        input.writeImmutableBuffer(Self.frame(FrameType.ping, flags: 0x1, [0, 0, 0, 0, 0x4e, 0x4f, 0x52, 0x51]))
        input.writeImmutableBuffer(Self.frame(FrameType.goAway, [0, 0, 0, 9, 0, 0, 0, 0] + Array("bye".utf8)))
        let events = try Self.events(&connection, input)
        #expect(events.count == 3)
        guard case .reset(5, 7) = events[0], case .pingAck = events[1],
              case .goAway(9, 0, let debug) = events[2] else {
            Issue.record("unexpected events \(events)")
            return
        }
        #expect(String(buffer: debug) == "bye")
    }

    @Test("protocol violations end the connection with the right error code", arguments: [
        (frame(FrameType.data, stream: 1, Array(repeating: 0, count: 16_385)), Connection.ErrorCode.frameSizeError),
        (frame(FrameType.pushPromise, flags: 0x4, stream: 1, [0, 0, 0, 2]), Connection.ErrorCode.protocolError),
        (frame(FrameType.continuation, flags: 0x4, stream: 1, [0x88]), Connection.ErrorCode.protocolError),
        (frame(FrameType.headers, flags: 0x4, stream: 1, [0xff, 0xff, 0xff, 0x7f]), Connection.ErrorCode.compressionError),
        (frame(FrameType.settings, [0, 4, 0x80, 0, 0, 0]), Connection.ErrorCode.flowControlError),
        (frame(FrameType.settings, [0, 5, 0, 0, 0, 1]), Connection.ErrorCode.protocolError),
        (frame(FrameType.ping, [1, 2, 3]), Connection.ErrorCode.frameSizeError),
        (frame(FrameType.data, stream: 0, [1]), Connection.ErrorCode.protocolError),
        (frame(FrameType.windowUpdate, [0, 0, 0, 0]), Connection.ErrorCode.protocolError),
        (frame(FrameType.data, flags: 0x8, stream: 1, [5, 1]), Connection.ErrorCode.protocolError),
    ])
    func protocolErrors(frame: ByteBuffer, code: UInt32) {
        var connection = Connection(allocator: ByteBufferAllocator())
        #expect(throws: Connection.ProtocolError.self) { _ = try Self.events(&connection, frame) }
        do {
            var connection = Connection(allocator: ByteBufferAllocator())
            _ = try Self.events(&connection, frame)
        } catch let error as Connection.ProtocolError {
            #expect(error.errorCode == code)
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test("a header block interrupted by another frame is a protocol error")
    func interruptedHeaderBlock() throws {
        var connection = Connection(allocator: ByteBufferAllocator())
        var input = Self.frame(FrameType.headers, flags: 0, stream: 1, [0x88])
        input.writeImmutableBuffer(Self.frame(FrameType.data, stream: 1, [1]))
        #expect(throws: Connection.ProtocolError.self) { _ = try Self.events(&connection, input) }
    }

    @Test("a window growing past 2^31-1 is a flow-control error")
    func windowOverflow() throws {
        var connection = Connection(allocator: ByteBufferAllocator())
        #expect(throws: Connection.ProtocolError.self) {
            _ = try Self.events(&connection, Self.windowUpdate(stream: 0, 0x7fff_ffff))
        }
    }

    @Test("error codes are named in messages and logs; unknown ones by their value")
    func errorCodeNames() {
        #expect(Connection.ErrorCode.name(0x8) == "CANCEL (0x8)")
        #expect(Connection.ErrorCode.name(0x7) == "REFUSED_STREAM (0x7)")
        #expect(Connection.ErrorCode.name(0xd) == "HTTP_1_1_REQUIRED (0xd)")
        #expect(Connection.ErrorCode.name(0x42) == "0x42")
    }
}
