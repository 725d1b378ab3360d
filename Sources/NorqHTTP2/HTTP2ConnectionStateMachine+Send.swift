import NIOCore

/// Sending: the preface, request HEADERS and DATA as the send windows allow (``HTTP2FlowControl``, `+FlowControl`),
/// RST_STREAM, PING, WINDOW_UPDATE and GOAWAY, all appended to ``outbound``.
extension HTTP2ConnectionStateMachine {
    // MARK: outbound

    /// The connection preface and this client's SETTINGS: no server push, a 1 MiB receive window per stream, the
    /// configured header list size; then a WINDOW_UPDATE opening the connection's receive window.
    mutating func writePreface() {
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
        writeWindowUpdate(streamID: 0, increment: flow.openReceiveWindow())
    }

    /// HEADERS (and CONTINUATION when the block exceeds the peer's frame size), then the body as DATA now or as
    /// soon as the windows allow. An empty body ends the stream with the HEADERS.
    /// `bodyAtOnce`: both windows hold the body and no body waits before it (``HTTP2FlowControl/sendsAtOnce(_:)``,
    /// asked as the stream opened, which took the stream window); else it waits, and `sendBlockedData` takes the
    /// windows as it sends it.
    mutating func writeRequest(streamID: Int32, _ request: HTTP2RequestContext, bodyAtOnce: Bool) {
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
        guard !endStream else { return }
        if bodyAtOnce {
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
                } else {
                    var body = request.body.buffer
                    writeData(streamID: streamID, body: &body, count: bodyCount, endStream: true)
                }
            }
            return
        }
        flow.block(streamID: streamID, body: request.body.buffer)
        sendBlockedData()
    }

    /// A whole body of bytes as DATA frames of at most the peer's frame size, the last ending the stream (the
    /// caller checked and spent both windows).
    mutating func writeData(streamID: Int32, bytes: [UInt8]) {
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
    }

    mutating func writeReset(streamID: Int32, errorCode: UInt32) {
        HTTP2Wire.writeFrameHeader(length: 4, type: HTTP2Wire.FrameType.rstStream, flags: 0, streamID: streamID,
                                   into: &outbound)
        outbound.writeInteger(errorCode)
        flow.forget(streamID: streamID)
    }

    mutating func writePing(_ data: UInt64, ack: Bool) {
        HTTP2Wire.writeFrameHeader(length: 8, type: HTTP2Wire.FrameType.ping, flags: ack ? HTTP2Wire.Flags.ack : 0,
                                   streamID: 0, into: &outbound)
        outbound.writeInteger(data)
    }

    mutating func writeWindowUpdate(streamID: Int32, increment: Int) {
        guard increment > 0 else { return }
        HTTP2Wire.writeFrameHeader(length: 4, type: HTTP2Wire.FrameType.windowUpdate, flags: 0, streamID: streamID,
                                   into: &outbound)
        outbound.writeInteger(UInt32(min(increment, HTTP2Wire.maxWindow)))
    }

    mutating func writeGoAway(lastStreamID: Int32, errorCode: UInt32) {
        HTTP2Wire.writeFrameHeader(length: 8, type: HTTP2Wire.FrameType.goAway, flags: 0, streamID: 0, into: &outbound)
        outbound.writeInteger(UInt32(lastStreamID))
        outbound.writeInteger(errorCode)
    }

    /// `count` bytes of `body` as DATA frames of at most the peer's frame size (the caller spends the windows).
    mutating func writeData(streamID: Int32, body: inout ByteBuffer, count: Int, endStream: Bool) {
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
    }
}
