package import NIOCore

/// Flow control of one connection (RFC 9113 §5.2, §6.9) as data: both connection windows, what the server sent
/// since the last WINDOW_UPDATE, the server's initial stream window and the request bodies waiting for window,
/// oldest first. Each input says what follows (a WINDOW_UPDATE increment to write, a stream-window delta, a
/// connection error); the connection state machine writes the frames and keeps the per-stream send windows.
package struct HTTP2FlowControl {
    /// The connection's receive window this client keeps open (``HTTP2ConnectionStateMachine/Configuration/connectionWindowSize``).
    package let localWindowSize: Int
    /// What this client may still send on the connection.
    package private(set) var sendWindow = 65_535
    /// What the server may still send on the connection.
    package private(set) var receiveWindow = 65_535
    /// What the server sent since the last WINDOW_UPDATE on the connection.
    package private(set) var unacknowledgedBytes = 0
    /// SETTINGS_INITIAL_WINDOW_SIZE of the server: each new stream's send window.
    package private(set) var peerInitialWindowSize = 65_535
    /// Request bodies (or their rest) waiting for window, oldest first.
    var blocked: [(streamID: Int32, body: ByteBuffer)] = []

    package init(localWindowSize: Int) {
        self.localWindowSize = localWindowSize
    }

    package var blockedCount: Int { blocked.count }

    /// The preface opens the receive window from the protocol's 65,535 to ``localWindowSize``: the increment of
    /// its WINDOW_UPDATE.
    package mutating func openReceiveWindow() -> Int {
        let increment = localWindowSize - receiveWindow
        receiveWindow = localWindowSize
        return increment
    }

    /// DATA of `length` flow-controlled bytes arrived, on any stream (closed ones count too).
    package mutating func received(_ length: Int) throws(HTTP2ProtocolError) {
        receiveWindow -= length
        guard receiveWindow >= 0 else {
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.flowControlError, "the server overran the connection's receive window")
        }
        unacknowledgedBytes += length
    }

    /// The end of a read: the increment of the WINDOW_UPDATE that gives the server back what it used, once an
    /// eighth of the window (at least 16 KiB) is used; nil before (one WINDOW_UPDATE per read would be one frame
    /// per read).
    package mutating func windowUpdateAtEndOfRead() -> Int? {
        guard unacknowledgedBytes >= max(16_384, localWindowSize / 8) else { return nil }
        let increment = unacknowledgedBytes
        receiveWindow += increment
        unacknowledgedBytes = 0
        return increment
    }

    /// The server's WINDOW_UPDATE on the connection (stream 0).
    package mutating func connectionWindowUpdate(_ increment: Int) throws(HTTP2ProtocolError) {
        guard increment > 0 else {
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "HTTP/2 WINDOW_UPDATE of 0 on the connection")
        }
        guard sendWindow + increment <= HTTP2Wire.maxWindow else {
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.flowControlError, "HTTP/2 connection window exceeds 2^31-1")
        }
        sendWindow += increment
    }

    /// The server's SETTINGS_INITIAL_WINDOW_SIZE: the change to apply to every open stream's send window.
    package mutating func setPeerInitialWindowSize(_ value: UInt32) throws(HTTP2ProtocolError) -> Int {
        guard value <= UInt32(HTTP2Wire.maxWindow) else {
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.flowControlError,
                                     "SETTINGS_INITIAL_WINDOW_SIZE of \(value) exceeds 2^31-1")
        }
        let delta = Int(value) - peerInitialWindowSize
        peerInitialWindowSize = Int(value)
        return delta
    }

    /// Whether a body of `count` bytes goes out right after its HEADERS: no body waits before it, and both the
    /// connection's window and a new stream's hold it.
    package func sendsAtOnce(_ count: Int) -> Bool {
        blocked.isEmpty && count <= sendWindow && count <= peerInitialWindowSize
    }

    /// `count` body bytes were written.
    package mutating func spend(_ count: Int) {
        sendWindow -= count
    }

    /// A body (or its rest) waits for window, after those waiting already.
    package mutating func block(streamID: Int32, body: ByteBuffer) {
        blocked.append((streamID, body))
    }

    /// A stream ended (reset, refused, gone away): its waiting body is dropped.
    package mutating func forget(streamID: Int32) {
        guard !blocked.isEmpty, streamID != 0 else { return }
        blocked.removeAll { $0.streamID == streamID }
    }

    /// The connection closed: nothing waits any more.
    package mutating func forgetAll() {
        blocked.removeAll()
    }
}

/// Flow control in the connection state machine: the windows the tests and the handler read, the end-of-read
/// WINDOW_UPDATE, the server's WINDOW_UPDATE frames, and the bodies sent as windows open.
extension HTTP2ConnectionStateMachine {
    package var peerInitialWindowSize: Int { flow.peerInitialWindowSize }
    package var connectionSendWindow: Int { flow.sendWindow }
    package var connectionReceiveWindow: Int { flow.receiveWindow }
    /// Request bodies waiting for flow-control window.
    package var blockedStreams: Int { flow.blockedCount }

    /// The end of a read: gives the server back the connection window it used, in one WINDOW_UPDATE, once an
    /// eighth of the window (at least 16 KiB) is used.
    package mutating func readComplete() {
        guard !isClosed, let increment = flow.windowUpdateAtEndOfRead() else { return }
        writeWindowUpdate(streamID: 0, increment: increment)
    }

    mutating func receiveWindowUpdate(streamID id: Int32, increment: Int, now: NIODeadline) throws(HTTP2ProtocolError) {
        if id == 0 {
            try flow.connectionWindowUpdate(increment)
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

    /// The server's SETTINGS_INITIAL_WINDOW_SIZE changes the send window of every open stream (RFC 9113 6.9.2).
    mutating func receiveInitialWindowSize(_ value: UInt32) throws(HTTP2ProtocolError) {
        let delta = try flow.setPeerInitialWindowSize(value)
        guard delta != 0 else { return }
        for id in streams.keys {
            streams[id]!.sendWindow += delta
            guard streams[id]!.sendWindow <= HTTP2Wire.maxWindow else {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.flowControlError,
                                         "SETTINGS_INITIAL_WINDOW_SIZE makes stream \(id)'s window exceed 2^31-1")
            }
        }
    }

    /// Sends what the windows allow of the waiting bodies, oldest first.
    mutating func sendBlockedData() {
        var index = 0
        while index < flow.blocked.count, flow.sendWindow > 0 {
            let id = flow.blocked[index].streamID
            guard let streamWindow = streams[id]?.sendWindow else {
                flow.blocked.remove(at: index)
                continue
            }
            var body = flow.blocked[index].body
            let count = min(body.readableBytes, flow.sendWindow, streamWindow)
            if count > 0 {
                let endStream = count == body.readableBytes
                writeData(streamID: id, body: &body, count: count, endStream: endStream)
                flow.spend(count)
                streams[id]!.sendWindow -= count
                if endStream {
                    flow.blocked.remove(at: index)
                    continue
                }
                flow.blocked[index].body = body
            }
            index += 1
        }
    }
}
