import NIOCore
import NIOHPACK

/// Receiving: the frames the server sends, each changing streams, windows, SETTINGS or the state (RFC 9113 §6).
extension HTTP2ConnectionStateMachine {
    // MARK: frames

    func isIdle(_ streamID: Int32) -> Bool {
        streamID & 1 == 0 || streamID > highestStreamID
    }

    mutating func handle(_ frame: HTTP2Frame, now: NIODeadline) throws(HTTP2ProtocolError) {
        if isAwaitingSettings {
            guard case .settings = frame else {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "the server's first HTTP/2 frame is not SETTINGS")
            }
        }
        switch frame {
        case .data(let id, let payload, let endStream, let flowControlledLength):
            // Counted against the connection window also on closed streams; handed back at the end of the read.
            try flow.received(flowControlledLength)
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

    // DATA and HEADERS change their stream in one access to the open streams (``withOpenStreams(_:)``), through
    // `table.values[index]`, and a stream leaves the table (a move) only when it ends: a stream taken out into a
    // local and put back was copied, per frame.

    /// Runs `body` on a stream of the table in place (one inout access, no copy of the stream).
    static func inPlace<T>(_ stream: inout Stream, _ body: (inout Stream) -> T) -> T { body(&stream) }

    enum DataVerdict {
        case none, overrun, beforeHeaders, tooLarge
        /// The stream ended: taken out of the table.
        case end(Stream)
        case giveBack(Int)
    }

    /// DATA on a stream, decided in one access to the stream table.
    mutating func receiveData(streamID id: Int32, _ payload: ByteBuffer, endStream: Bool,
                                      flowControlledLength: Int, now: NIODeadline) {
        let maxBody = configuration.maxResponseBodyBytes
        let verdict = withOpenStreams { open -> DataVerdict in
            guard let index = open.table.index(forKey: id) else { return .none }  // closed (answered, reset, expired): ignored
            // Read and changed through one inout access: a read of `values[index]` copied the stream.
            let verdict = Self.inPlace(&open.table.values[index]) { stream -> DataVerdict in
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
                if endStream { return .none }
                // A long answer gets stream window back before it runs out.
                stream.unacknowledgedBytes += flowControlledLength
                guard stream.unacknowledgedBytes >= Self.localInitialWindowSize / 2 else { return .none }
                let increment = stream.unacknowledgedBytes
                stream.receiveWindow += increment
                stream.unacknowledgedBytes = 0
                return .giveBack(increment)
            }
            if case .none = verdict, endStream { return .end(open.table.remove(at: index).value) }
            return verdict
        } ?? .none
        switch verdict {
        case .none:
            break
        case .overrun:
            streamError(id, code: HTTP2Wire.ErrorCode.flowControlError, kind: .protocolError,
                        "the server overran the stream's receive window", now: now)
        case .beforeHeaders:
            streamError(id, code: HTTP2Wire.ErrorCode.protocolError, kind: .protocolError,
                        "HTTP/2 DATA before the response headers", now: now)
        case .tooLarge:
            streamError(id, code: HTTP2Wire.ErrorCode.cancel, kind: .responseTooLarge,
                        "response body longer than \(configuration.maxResponseBodyBytes) bytes", now: now)
        case .end(let stream):
            finish(stream, now: now)
        case .giveBack(let increment):
            writeWindowUpdate(streamID: id, increment: increment)
        }
    }

    /// What a HEADERS frame did to its stream (decided in one access to the stream table).
    enum HeadersVerdict {
        /// Unknown (closed) stream, or headers that do not end it: nothing more.
        case none
        /// A 1xx response: the final one follows.
        case interim
        case tooLarge(Int)
        case noStatus
        /// 101, or an interim response ending the stream.
        case badInterim(Int)
        case trailersWithoutEnd
        /// The stream ended: taken out of the table.
        case end(Stream)
    }

    mutating func receiveHeaders(streamID id: Int32, _ block: HPACKResponseDecoder.Block, endStream: Bool,
                                         now: NIODeadline) {
        let maxHeaderListSize = configuration.maxHeaderListSize
        let verdict = withOpenStreams { open -> HeadersVerdict in
            guard let index = open.table.index(forKey: id) else { return .none }
            let listSize = block.listSize
            // RFC 9113 10.5.1: an oversized response is discarded; the connection and its other streams go on.
            guard listSize <= maxHeaderListSize else { return .tooLarge(listSize) }
            let verdict = Self.inPlace(&open.table.values[index]) { stream -> HeadersVerdict in
                if stream.status == nil {
                    guard let status = block.status, (100...999).contains(status) else { return .noStatus }
                    if status < 200 {
                        // 1xx: interim (RFC 9113 8.1); the final response follows. 101 is not allowed in HTTP/2, and
                        // an interim response cannot end the stream.
                        return status == 101 || endStream ? .badInterim(status) : .interim
                    }
                    stream.status = status
                    stream.fields = block.fields  // kept as decoded: no copy
                    stream.fieldsID = block.id
                } else if !endStream {
                    return .trailersWithoutEnd
                } else {
                    // Trailers: their regular fields join the response's.
                    stream.fieldsID = 0
                    for header in block.fields where !header.name.hasPrefix(":") {
                        stream.fields.add(name: header.name, value: header.value)
                    }
                }
                return .none
            }
            guard case .none = verdict else { return verdict }
            return endStream ? .end(open.table.remove(at: index).value) : .none
        } ?? .none
        switch verdict {
        case .none, .interim:
            break
        case .tooLarge(let listSize):
            streamError(id, code: HTTP2Wire.ErrorCode.cancel, kind: .responseTooLarge,
                        "response header list of \(listSize) bytes exceeds the \(maxHeaderListSize) announced", now: now)
        case .noStatus:
            streamError(id, code: HTTP2Wire.ErrorCode.protocolError, kind: .protocolError,
                        "HTTP/2 response without a valid :status", now: now)
        case .badInterim(let status):
            streamError(id, code: HTTP2Wire.ErrorCode.protocolError, kind: .protocolError,
                        "HTTP/2 interim response \(status)\(endStream ? " ending the stream" : "")", now: now)
        case .trailersWithoutEnd:
            streamError(id, code: HTTP2Wire.ErrorCode.protocolError, kind: .protocolError,
                        "HTTP/2 trailers that do not end the stream", now: now)
        case .end(let stream):
            finish(stream, now: now)
        }
    }

    mutating func receiveReset(streamID id: Int32, errorCode: UInt32, now: NIODeadline) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        flow.forget(streamID: id)
        stream.request.unassign()
        keepAlive.streamActivity(now: now)
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

    mutating func receiveSettings(_ settings: [(identifier: UInt16, value: UInt32)],
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
                try receiveInitialWindowSize(value)
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
            becomeActive()
            actions.append(.ready)
        }
        startStreams(now: now)
    }

    mutating func receiveGoAway(lastStreamID: Int32, errorCode: UInt32, debugData: ByteBuffer) {
        let debug = debugData.getString(at: debugData.readerIndex, length: min(debugData.readableBytes, 256)) ?? ""
        let reason = "GOAWAY \(HTTP2Wire.ErrorCode.name(errorCode)), last stream \(lastStreamID)"
            + (debug.isEmpty ? "" : ": \(debug.filter { !$0.isNewline })")
        switch state {
        case .draining, .closed, .awaitingSettings:
            break  // (before SETTINGS a GOAWAY is a protocol error: `handle` never gets here)
        case .active:
            actions.append(.goingAway(reason: reason))
        }
        guard !isClosed else { return }
        let queue = beginDraining(lastStreamID: lastStreamID)
        // Streams above the last id were not processed: they go back to the pool, as does the queue.
        let error = Self.notProcessed(.goAway, "the server went away (\(reason)) without processing the stream")
        let last: Int32 = if case .draining(let last) = state { last } else { .max }
        let refused = withOpenStreams { open -> [(Int32, Stream)] in
            guard open.table.keys.contains(where: { $0 > last }) else { return [] }
            var refused: [(Int32, Stream)] = []
            open.table = open.table.filter { id, stream in
                if id > last { refused.append((id, stream)) }
                return id <= last
            }
            for (id, _) in refused { open.flow.forget(streamID: id) }
            return refused
        } ?? []
        for (_, stream) in refused {
            stream.request.unassign()
            counts.requeued += 1
            actions.append(.requeue(stream.request, error, written: true))
        }
        if let queue {
            requeue(queue, Self.notProcessed(.goAway, "the server went away (\(reason)) before the request was written"))
        }
        closeIfDrained()
    }
}
