package import NIOCore

/// Splits received bytes (after TLS) into ``HTTP2Frame``s, without I/O and without connection state beyond an
/// unfinished header block.
///
/// Bounds: a frame payload of at most ``HTTP2Wire/localMaxFrameSize`` (16 KiB, what this client announces), else
/// FRAME_SIZE_ERROR; a header block (HEADERS and its CONTINUATION frames) of at most `maxHeaderBlockBytes`, else
/// ENHANCE_YOUR_CALM, with fragments appended in place (linear, not a copy of the block per CONTINUATION); bytes
/// held between calls: at most one unfinished frame plus the unread rest of the last read.
package struct HTTP2FrameDecoder {
    private var inbound: ByteBuffer
    /// The header block waiting for its CONTINUATION frames.
    private var partialBlock: ByteBuffer?
    private var partialStreamID: Int32 = 0
    private var partialEndStream = false
    package let maxHeaderBlockBytes: Int

    package init(maxHeaderBlockBytes: Int) {
        self.inbound = ByteBuffer()
        self.maxHeaderBlockBytes = maxHeaderBlockBytes
    }

    /// Bytes held: the unread input and an unfinished header block. After ``nextFrame()`` returned nil, at most
    /// one unfinished frame (9 + 16,384 bytes) plus `maxHeaderBlockBytes`.
    package var bufferedBytes: Int { inbound.readableBytes + (partialBlock?.readableBytes ?? 0) }

    /// Whether a header block is waiting for CONTINUATION.
    package var inHeaderBlock: Bool { partialBlock != nil }

    /// Takes bytes received from the socket.
    package mutating func receive(_ buffer: inout ByteBuffer) {
        if inbound.readableBytes == 0 {
            inbound = buffer
        } else {
            inbound.writeBuffer(&buffer)
        }
    }

    /// The next complete frame, nil when more bytes are needed, or the connection error the bytes make.
    package mutating func nextFrame() throws(HTTP2ProtocolError) -> HTTP2Frame? {
        while inbound.readableBytes >= 9 {
            let start = inbound.readerIndex
            let length = Int(inbound.getInteger(at: start, as: UInt8.self)!) << 16
                | Int(inbound.getInteger(at: start + 1, as: UInt16.self)!)
            guard length <= HTTP2Wire.localMaxFrameSize else {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.frameSizeError,
                                         "HTTP/2 frame of \(length) bytes exceeds the \(HTTP2Wire.localMaxFrameSize) allowed")
            }
            guard inbound.readableBytes >= 9 + length else { break }
            let type = inbound.getInteger(at: start + 3, as: UInt8.self)!
            let flags = inbound.getInteger(at: start + 4, as: UInt8.self)!
            let streamID = Int32(bitPattern: inbound.getInteger(at: start + 5, as: UInt32.self)! & 0x7fff_ffff)
            inbound.moveReaderIndex(forwardBy: 9)
            let payload = inbound.readSlice(length: length)!
            if let frame = try frame(type: type, flags: flags, streamID: streamID, payload: payload) {
                return frame
            }
        }
        // A partial frame left far into a large buffer moves to its front before more bytes are appended.
        if inbound.readableBytes > 0, inbound.readerIndex > 65_536 {
            inbound.discardReadBytes()
        }
        return nil
    }

    private mutating func frame(type: UInt8, flags: UInt8, streamID: Int32,
                                payload: ByteBuffer) throws(HTTP2ProtocolError) -> HTTP2Frame? {
        typealias T = HTTP2Wire.FrameType
        if partialBlock != nil {
            guard type == T.continuation, streamID == partialStreamID else {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError,
                                         "HTTP/2 header block of stream \(partialStreamID) interrupted by a frame of type \(type)")
            }
            var block = partialBlock.take()!  // unique: appended in place
            guard block.readableBytes + payload.readableBytes <= maxHeaderBlockBytes else {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.enhanceYourCalm,
                                         "HTTP/2 header block longer than \(maxHeaderBlockBytes) bytes")
            }
            var fragment = payload
            block.writeBuffer(&fragment)
            guard flags & HTTP2Wire.Flags.endHeaders != 0 else {
                partialBlock = block
                return nil
            }
            return .headers(streamID: streamID, block: block, endStream: partialEndStream)
        }
        switch type {
        case T.data:
            try Self.requireStream(streamID, "DATA")
            var body = payload
            try Self.removePadding(&body, flags: flags)
            return .data(streamID: streamID, payload: body, endStream: flags & HTTP2Wire.Flags.endStream != 0,
                         flowControlledLength: payload.readableBytes)
        case T.headers:
            try Self.requireStream(streamID, "HEADERS")
            var block = payload
            try Self.removePadding(&block, flags: flags)
            if flags & HTTP2Wire.Flags.priority != 0 {
                guard block.readableBytes >= 5 else { throw Self.frameSizeError("HEADERS priority") }
                block.moveReaderIndex(forwardBy: 5)
            }
            let endStream = flags & HTTP2Wire.Flags.endStream != 0
            guard flags & HTTP2Wire.Flags.endHeaders != 0 else {
                guard block.readableBytes <= maxHeaderBlockBytes else {
                    throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.enhanceYourCalm,
                                             "HTTP/2 header block longer than \(maxHeaderBlockBytes) bytes")
                }
                var copy = ByteBuffer()
                copy.reserveCapacity(min(maxHeaderBlockBytes, max(block.readableBytes * 2, 1_024)))
                copy.writeBuffer(&block)
                partialBlock = copy
                partialStreamID = streamID
                partialEndStream = endStream
                return nil
            }
            return .headers(streamID: streamID, block: block, endStream: endStream)
        case T.continuation:
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "HTTP/2 CONTINUATION without a header block")
        case T.priority:
            try Self.requireStream(streamID, "PRIORITY")
            return .priority(streamID: streamID, validLength: payload.readableBytes == 5)
        case T.rstStream:
            try Self.requireStream(streamID, "RST_STREAM")
            guard payload.readableBytes == 4 else { throw Self.frameSizeError("RST_STREAM") }
            return .rstStream(streamID: streamID, errorCode: payload.getInteger(at: payload.readerIndex, as: UInt32.self)!)
        case T.settings:
            guard streamID == 0 else { throw Self.connectionFrameOnStream("SETTINGS") }
            if flags & HTTP2Wire.Flags.ack != 0 {
                guard payload.readableBytes == 0 else { throw Self.frameSizeError("SETTINGS acknowledgement") }
                return .settingsAck
            }
            guard payload.readableBytes % 6 == 0 else { throw Self.frameSizeError("SETTINGS") }
            var rest = payload
            var settings: [(identifier: UInt16, value: UInt32)] = []
            settings.reserveCapacity(payload.readableBytes / 6)
            while let identifier = rest.readInteger(as: UInt16.self), let value = rest.readInteger(as: UInt32.self) {
                settings.append((identifier, value))
            }
            return .settings(settings)
        case T.ping:
            guard streamID == 0 else { throw Self.connectionFrameOnStream("PING") }
            guard payload.readableBytes == 8 else { throw Self.frameSizeError("PING") }
            return .ping(payload.getInteger(at: payload.readerIndex, as: UInt64.self)!,
                         ack: flags & HTTP2Wire.Flags.ack != 0)
        case T.goAway:
            guard streamID == 0 else { throw Self.connectionFrameOnStream("GOAWAY") }
            guard payload.readableBytes >= 8 else { throw Self.frameSizeError("GOAWAY") }
            var rest = payload
            let lastStreamID = Int32(bitPattern: rest.readInteger(as: UInt32.self)! & 0x7fff_ffff)
            let errorCode = rest.readInteger(as: UInt32.self)!
            return .goAway(lastStreamID: lastStreamID, errorCode: errorCode, debugData: rest)
        case T.windowUpdate:
            guard payload.readableBytes == 4 else { throw Self.frameSizeError("WINDOW_UPDATE") }
            let increment = Int(payload.getInteger(at: payload.readerIndex, as: UInt32.self)! & 0x7fff_ffff)
            return .windowUpdate(streamID: streamID, increment: increment)
        case T.pushPromise:
            return .pushPromise(streamID: streamID)
        default:
            return .unknown(type: type, streamID: streamID)
        }
    }

    private static func removePadding(_ payload: inout ByteBuffer, flags: UInt8) throws(HTTP2ProtocolError) {
        guard flags & HTTP2Wire.Flags.padded != 0 else { return }
        guard let padLength = payload.readInteger(as: UInt8.self), Int(padLength) <= payload.readableBytes else {
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "HTTP/2 padding longer than its frame")
        }
        payload = payload.getSlice(at: payload.readerIndex, length: payload.readableBytes - Int(padLength))!
    }

    private static func requireStream(_ streamID: Int32, _ type: String) throws(HTTP2ProtocolError) {
        guard streamID != 0 else {
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "HTTP/2 \(type) frame on stream 0")
        }
    }

    private static func frameSizeError(_ type: String) -> HTTP2ProtocolError {
        HTTP2ProtocolError(HTTP2Wire.ErrorCode.frameSizeError, "HTTP/2 \(type) frame of a wrong size")
    }

    private static func connectionFrameOnStream(_ type: String) -> HTTP2ProtocolError {
        HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "HTTP/2 \(type) frame on a stream")
    }
}
