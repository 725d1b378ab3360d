import NIOCore
import NIOHPACK
import NorqHTTP2
import Testing

/// The connection state machine without I/O: what it writes, what it makes of what it reads, every transition.
@Suite("HTTP2ConnectionStateMachine")
struct HTTP2ConnectionStateMachineTests {
    typealias T = HTTP2Wire.FrameType
    typealias Code = HTTP2Wire.ErrorCode

    // MARK: writing

    @Test("the preface: the magic string, SETTINGS without push, with a 1 MiB stream window and the header list size, then a WINDOW_UPDATE opening the connection window to 4 MiB")
    func preface() {
        let machine = HTTP2ConnectionStateMachine(configuration: .init(maxHeaderListSize: 20_000), now: .now())
        var out = machine.outbound
        #expect(out.readBytes(length: 24) == HTTP2Wire.preface)
        let frames = Wire.frames(&out)
        #expect(frames.count == 2)
        #expect(frames[0].type == T.settings && frames[0].streamID == 0)
        var payload = frames[0].payload
        var settings: [UInt16: UInt32] = [:]
        while let id = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) { settings[id] = value }
        #expect(settings == [2: 0, 3: 0, 4: 1 << 20, 6: 20_000])
        #expect(frames[1].type == T.windowUpdate && frames[1].streamID == 0)
        #expect(frames[1].payload.getInteger(at: frames[1].payload.readerIndex, as: UInt32.self) == UInt32((4 << 20) - 65_535))
        #expect(machine.connectionReceiveWindow == 4 << 20)
    }

    @Test("the write chunk follows the stream limit: 32 KiB up to 128 streams, 256 bytes a stream above, at most 256 KiB; a server's lower limit lowers it")
    func writeChunkFollowsTheStreamLimit() {
        typealias M = HTTP2ConnectionStateMachine
        #expect(M.writeChunkBytes(streamLimit: 1) == 32_768)
        #expect(M.writeChunkBytes(streamLimit: 100) == 32_768)
        #expect(M.writeChunkBytes(streamLimit: 128) == 32_768)
        #expect(M.writeChunkBytes(streamLimit: 512) == 131_072)
        #expect(M.writeChunkBytes(streamLimit: 1_000) == 256_000)
        #expect(M.writeChunkBytes(streamLimit: Int.max) == 262_144)
        // 300 requests of ~1 KB (~312 KB encoded, the connection window opened by the server): written in chunks as
        // they are encoded; the rest, less than a chunk and a request, waits for the end of the tick.
        var wide = MachineHarness(.init(maxConcurrentStreams: 1_000))
        wide.receive(Wire.windowUpdate(stream: 0, 1 << 20))
        #expect(wide.machine.writeChunkBytes == 256_000)
        for _ in 0..<300 { wide.send(body: 1_000) }
        #expect(wide.flushed.readableBytes >= 256_000 && wide.flushed.readableBytes < 256_000 + 1_100)
        #expect(wide.machine.outbound.readableBytes > 32_768)
        var narrow = MachineHarness(.init(maxConcurrentStreams: 1_000), settings: [(3, 100)])  // the server's limit
        narrow.receive(Wire.windowUpdate(stream: 0, 1 << 20))
        #expect(narrow.machine.writeChunkBytes == 32_768)
        for _ in 0..<100 { narrow.send(body: 1_000) }
        #expect(narrow.flushed.readableBytes >= 3 * 32_768)
        #expect(narrow.machine.outbound.readableBytes < 32_768 + 1_100)
    }

    @Test("answers with bodies: 1,000 of them at once fit the connection window; it is given back after an eighth is used, not per read")
    func connectionWindowGivenBack() {
        var h = MachineHarness(.init(maxConcurrentStreams: 1_000))
        for _ in 0..<1_000 { h.send(body: 10) }
        _ = h.written()
        var answers = ByteBuffer()
        for i in 0..<1_000 {
            answers.writeImmutableBuffer(Wire.headers(&h.encoder, stream: Int32(2 * i + 1), status: "200", endStream: false))
            answers.writeImmutableBuffer(Wire.data(stream: Int32(2 * i + 1), Array(repeating: 0x41, count: 600), endStream: true))
        }
        h.receive(answers)  // 600,000 bytes: more than 65,535, less than the 4 MiB window
        #expect(h.outcomes.completedCount == 1_000 && !h.closed)
        #expect((0..<1_000).allSatisfy { h.outcomes.status($0) == 200 })
        h.readComplete()  // 600,000 bytes used: past an eighth (524,288), given back in one WINDOW_UPDATE
        let updates = h.written().filter { $0.type == T.windowUpdate }
        #expect(updates.count == 1 && updates.first?.streamID == 0)
        #expect(updates.first.map { $0.payload.getInteger(at: $0.payload.readerIndex, as: UInt32.self) } == 600_000)
        #expect(h.machine.connectionReceiveWindow == 4 << 20)
        h.receive(Wire.concat(Wire.headers(&h.encoder, stream: 1_999, status: "200", endStream: false)))
        h.readComplete()  // nothing used since: no WINDOW_UPDATE
        #expect(h.written().allSatisfy { $0.type != T.windowUpdate })
    }

    @Test("no stream before the server's SETTINGS; then HEADERS + DATA, or HEADERS alone for an empty body; answers complete")
    func requestsAndAnswers() throws {
        var h = MachineHarness(settings: nil)
        h.send(body: 1_000)
        h.send(body: 0)
        #expect(h.written().isEmpty && !h.ready)
        h.receive(Wire.settings([(3, 100)]))
        #expect(h.ready)
        let frames = h.written()
        #expect(frames.map(\.type) == [T.settings, T.headers, T.data, T.headers])
        #expect(frames.map(\.streamID) == [0, 1, 1, 3])
        #expect(frames.map(\.flags) == [0x1, 0x4, 0x1, 0x5])
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var block = frames[1].payload
        let decoded = try decoder.decodeHeaders(from: &block).map { "\($0.name): \($0.value)" }
        #expect(decoded == [":method: POST", ":scheme: https", ":path: /send/0", ":authority: push.example.com", "x-id: 0"])
        #expect(h.machine.connectionSendWindow == 65_535 - 1_000)
        h.receive(Wire.concat(Wire.headers(&h.encoder, stream: 3, status: "200", [("x-answer", "3")]),
                              Wire.headers(&h.encoder, stream: 1, status: "400", endStream: false),
                              Wire.data(stream: 1, Array("{\"reason\":\"Bad\"}".utf8))))
        #expect(h.outcomes.status(1) == 200)
        guard case .success(let response)? = h.outcomes[0] else { Issue.record("no answer"); return }
        #expect(response.status == 400 && String(buffer: response.body) == "{\"reason\":\"Bad\"}")
        guard case .success(let other)? = h.outcomes[1] else { Issue.record("no answer"); return }
        #expect(other.header("x-answer") == "3")
        #expect(h.machine.load == 0)
    }

    @Test("bodies beyond the connection window wait, in order, for WINDOW_UPDATE; nothing is sent twice")
    func connectionFlowControl() {
        var h = MachineHarness()
        for _ in 0..<70 { h.send(body: 1_000) }
        var sent: [Int32: Int] = [:]
        var ended: [Int32] = []
        func account(_ frames: [Wire.Frame]) {
            for frame in frames where frame.type == T.data {
                sent[frame.streamID, default: 0] += frame.payload.readableBytes
                if frame.flags & 0x1 != 0 { ended.append(frame.streamID) }
            }
        }
        account(h.written())
        #expect(sent.values.reduce(0, +) == 65_535)
        #expect(ended.count == 65)
        #expect(h.machine.blockedStreams == 5)
        // A stream's own update does not open the exhausted connection window.
        h.receive(Wire.windowUpdate(stream: 133, 10_000))
        #expect(h.written().isEmpty)
        h.receive(Wire.windowUpdate(stream: 0, 3_000))
        account(h.written())
        #expect(ended.count == 68)
        h.receive(Wire.windowUpdate(stream: 0, 1 << 20))
        account(h.written())
        let expected: [Int32] = (0..<70).map { (n: Int) -> Int32 in Int32(2 * n + 1) }
        #expect(ended == expected)
        #expect(sent.values.allSatisfy { $0 == 1_000 } && sent.count == 70)
        #expect(h.machine.blockedStreams == 0)
    }

    @Test("a stream window smaller than the body: the rest follows the stream's WINDOW_UPDATE; a larger initial window releases it")
    func streamFlowControl() {
        var h = MachineHarness(settings: [(4, 400)])
        h.send(body: 1_000)
        var frames = h.written()
        #expect(frames.map(\.type) == [T.headers, T.data])
        #expect(frames[1].payload.readableBytes == 400 && frames[1].flags == 0)
        h.receive(Wire.windowUpdate(stream: 1, 100))
        frames = h.written()
        #expect(frames.count == 1 && frames[0].payload.readableBytes == 100 && frames[0].flags == 0)
        h.receive(Wire.settings([(4, 2_000)]))  // +1,600 on the open stream
        frames = h.written()
        #expect(frames.map(\.type) == [T.settings, T.data])
        #expect(frames[1].payload.readableBytes == 500 && frames[1].flags == 0x1)
    }

    @Test("frames respect the peer's SETTINGS_MAX_FRAME_SIZE: long bodies split, long header blocks continue")
    func frameSizes() throws {
        var h = MachineHarness(settings: [(4, 1 << 20)])
        h.receive(Wire.windowUpdate(stream: 0, 1 << 20))
        let outcomes = h.outcomes
        var head = MachineHarness.head(0)
        head.fields.append(HTTP2HeaderField("x-long", String(repeating: "h", count: 40_000), indexing: .notIndexed))
        let request = HTTP2RequestContext(head: head, body: ByteBuffer(repeating: 9, count: 40_000),
                                          deadline: h.now + .seconds(5)) { outcomes.record(0, $0) }
        h.requests.append(request)
        h.machine.enqueue(request, now: h.now)
        h.run()
        let frames = h.written()
        #expect(frames.map(\.type) == [T.headers, T.continuation, T.continuation, T.data, T.data, T.data])
        #expect(frames.allSatisfy { $0.payload.readableBytes <= 16_384 })
        #expect(frames.map(\.flags) == [0, 0, 0x4, 0, 0, 0x1])
        #expect(frames.suffix(3).map(\.payload.readableBytes).reduce(0, +) == 40_000)
    }

    @Test("a body given as bytes is written as a buffer body is: split at the frame size, and, beyond the window, sent as it opens")
    func bytesBodies() {
        var h = MachineHarness(settings: [(4, 1 << 20)])
        h.receive(Wire.windowUpdate(stream: 0, 1 << 20))
        let outcomes = h.outcomes
        let bytes = (0..<40_000).map { UInt8(truncatingIfNeeded: $0) }
        let request = HTTP2RequestContext(head: MachineHarness.head(0), body: .bytes(bytes),
                                          deadline: h.now + .seconds(5)) { outcomes.record(0, $0) }
        h.requests.append(request)
        h.machine.enqueue(request, now: h.now)
        h.run()
        var frames = h.written()
        #expect(frames.map(\.type) == [T.headers, T.data, T.data, T.data])
        #expect(frames.map(\.flags) == [0x4, 0, 0, 0x1])
        #expect(frames.dropFirst().flatMap { Array($0.payload.readableBytesView) } == bytes)
        // A stream window of 400: 400 bytes now, the rest as the window opens, in order.
        var small = MachineHarness(settings: [(4, 400)])
        let second = HTTP2RequestContext(head: MachineHarness.head(1), body: .bytes(Array(bytes.prefix(1_000))),
                                         deadline: small.now + .seconds(5)) { _ in }
        small.requests.append(second)
        small.machine.enqueue(second, now: small.now)
        small.run()
        frames = small.written()
        #expect(frames.map(\.type) == [T.headers, T.data] && frames[1].payload.readableBytes == 400)
        small.receive(Wire.windowUpdate(stream: 1, 1_000))
        let rest = small.written()
        #expect(rest.count == 1 && rest[0].flags == 0x1)
        #expect((frames[1...] + rest).flatMap { Array($0.payload.readableBytesView) } == Array(bytes.prefix(1_000)))
    }

    @Test("a spliced body goes on the wire as its joined bytes: one DATA frame, split at the frame size, or sent as the window opens")
    func splicedBodies() {
        let head = Array(#"{"message":{"token":""#.utf8)
        let tail = Array(#"","data":{"k":"v"}}}"#.utf8)
        let token = "fcm-token:" + String(repeating: "é", count: 3)  // UTF-8 of more than one byte per character
        let joined = head + Array(token.utf8) + tail
        func send(_ harness: inout MachineHarness, _ body: HTTP2RequestBody, id: Int) -> [Wire.Frame] {
            let request = HTTP2RequestContext(head: MachineHarness.head(id), body: body,
                                              deadline: harness.now + .seconds(5)) { _ in }
            harness.requests.append(request)
            harness.machine.enqueue(request, now: harness.now)
            harness.run()
            return harness.written()
        }
        // Small: one DATA frame ending the stream, holding head, token and tail in order.
        var h = MachineHarness()
        var frames = send(&h, .spliced(head: head, middle: token, tail: tail), id: 0)
        #expect(frames.map(\.type) == [T.headers, T.data] && frames[1].flags == 0x1)
        #expect(Array(frames[1].payload.readableBytesView) == joined)
        // Larger than a frame: split at the frame size like any body.
        var big = MachineHarness(settings: [(4, 1 << 20)])
        big.receive(Wire.windowUpdate(stream: 0, 1 << 20))
        let longTail = [UInt8](repeating: UInt8(ascii: "x"), count: 40_000)
        frames = send(&big, .spliced(head: head, middle: token, tail: longTail), id: 1)
        #expect(frames.map(\.type) == [T.headers, T.data, T.data, T.data])
        #expect(frames.dropFirst().flatMap { Array($0.payload.readableBytesView) } == head + Array(token.utf8) + longTail)
        // Beyond the stream window: what fits now, the rest as the window opens.
        var small = MachineHarness(settings: [(4, 10)])
        frames = send(&small, .spliced(head: head, middle: token, tail: tail), id: 2)
        #expect(frames.map(\.type) == [T.headers, T.data] && frames[1].payload.readableBytes == 10)
        small.receive(Wire.windowUpdate(stream: 1, 1_000))
        let rest = small.written()
        #expect(rest.count == 1 && rest[0].flags == 0x1)
        #expect((frames[1...] + rest).flatMap { Array($0.payload.readableBytesView) } == joined)
        #expect(HTTP2RequestBody.spliced(head: head, middle: token, tail: tail).count == joined.count)
    }

    @Test("PING is answered; SETTINGS are acknowledged; RST_STREAM, GOAWAY with debug data, PRIORITY, unknown frames")
    func controlFrames() {
        var h = MachineHarness()
        h.send()
        h.send()
        h.send()
        _ = h.written()
        h.receive(Wire.concat(Wire.frame(T.ping, [1, 2, 3, 4, 5, 6, 7, 8]),
                              Wire.frame(T.priority, stream: 7, [0, 0, 0, 1, 16]),
                              Wire.frame(0x42, stream: 0, [1, 2, 3]),
                              Wire.rst(stream: 1, Code.internalError),
                              Wire.goAway(last: 3, debug: "bye")))
        let frames = h.written()
        #expect(frames.map(\.type) == [T.ping])
        #expect(frames[0].flags == 0x1 && Array(frames[0].payload.readableBytesView) == [1, 2, 3, 4, 5, 6, 7, 8])
        #expect(h.outcomes.error(0)?.kind == .streamReset && h.outcomes.error(0)?.possiblyProcessed == true)
        #expect(h.goingAway.count == 1 && h.goingAway[0].contains("bye"))
        #expect(h.requeued.map(\.index) == [2])  // stream 5 > last stream 3: not processed
        #expect(h.requeued[0].error.possiblyProcessed == false && h.requeued[0].error.kind == .goAway)
        #expect(!h.closed)  // stream 3 may still be answered
        h.receive(Wire.headers(&h.encoder, stream: 3, status: "200"))
        #expect(h.outcomes.status(1) == 200)
        #expect(h.closed)
    }

    @Test("error codes are named in messages and logs; unknown ones by their value")
    func errorCodeNames() {
        #expect(Code.name(0x8) == "CANCEL (0x8)")
        #expect(Code.name(0x7) == "REFUSED_STREAM (0x7)")
        #expect(Code.name(0xd) == "HTTP_1_1_REQUIRED (0xd)")
        #expect(Code.name(0x42) == "0x42")
    }

    // MARK: defect 1: a connection closing right after its SETTINGS

    @Test("GOAWAY in the same read as the first SETTINGS: ready, then going away; later requests are handed back, never written")
    func goAwayRightAfterSettings() {
        var h = MachineHarness(settings: nil)
        h.receive(Wire.concat(Wire.settings(), Wire.goAway(last: 0)))
        #expect(h.ready && h.goingAway.count == 1 && h.closed)
        h.send()
        #expect(h.requeued.map(\.index) == [0] && h.requeued[0].error.possiblyProcessed == false)
        #expect(!h.written().contains { $0.type == T.headers })
    }

    @Test("the channel closing fails streams in flight as possibly processed and hands queued requests back")
    func channelClosed() {
        var h = MachineHarness(settings: [(3, 1)])
        h.send()
        h.send()
        h.machine.channelClosed(reason: "the connection closed")
        h.run()
        #expect(h.outcomes.error(0)?.kind == .connectionLost && h.outcomes.error(0)?.possiblyProcessed == true)
        #expect(h.requeued.map(\.index) == [1] && h.requeued[0].error.possiblyProcessed == false)
        h.send()
        #expect(h.requeued.map(\.index) == [1, 2])
    }

    @Test("a request the server refused is sent again at most once; one never written, at most 3 times in all")
    func requeueBound() {
        let refused = HTTP2RequestContext(head: MachineHarness.head(0), body: ByteBuffer(), deadline: .now() + .seconds(1)) { _ in }
        #expect(refused.takeRequeue(written: true))
        #expect(!refused.takeRequeue(written: true))
        #expect(refused.takeRequeue(written: false))
        let queued = HTTP2RequestContext(head: MachineHarness.head(1), body: ByteBuffer(), deadline: .now() + .seconds(1)) { _ in }
        #expect(queued.takeRequeue(written: false) && queued.takeRequeue(written: false) && queued.takeRequeue(written: false))
        #expect(!queued.takeRequeue(written: false))
    }

    // MARK: defect 4: one oversized header list

    @Test("a response header list beyond the announced size fails that stream only; the connection goes on")
    func oversizedHeaderList() {
        var h = MachineHarness(.init(maxHeaderListSize: 16_384))
        h.send()
        h.send()
        _ = h.written()
        let big = String(repeating: "x", count: 20_000)
        var block = Wire.block(&h.encoder, [(":status", "200"), ("x-big", big)])
        var bytes = Wire.frame(T.headers, flags: 0x1, stream: 1, Array(block.prefix(16_000)))
        block.removeFirst(16_000)
        bytes.writeImmutableBuffer(Wire.frame(T.continuation, flags: 0x4, stream: 1, block))
        bytes.writeImmutableBuffer(Wire.headers(&h.encoder, stream: 3, status: "200"))
        h.receive(bytes)
        #expect(h.outcomes.error(0)?.kind == .responseTooLarge)
        #expect(h.outcomes.status(1) == 200)
        #expect(!h.closed && h.goingAway.isEmpty)
        #expect(h.written().map { "\($0.type):\($0.streamID):\($0.errorCode ?? 99)" } == ["3:1:8"])
    }

    // MARK: defect 5: CONTINUATION flood

    @Test("a header block beyond 16x the announced list size closes the connection with ENHANCE_YOUR_CALM, bounded")
    func continuationFlood() {
        var h = MachineHarness(.init(maxHeaderListSize: 16_384))
        h.send()
        _ = h.written()
        h.receive(Wire.frame(T.headers, flags: 0, stream: 1, [0x88]))
        var frames = 0
        while !h.closed, frames < 10_000 {
            h.receive(Wire.frame(T.continuation, flags: 0, stream: 1, Array(repeating: 0x40, count: 1_000)))
            frames += 1
        }
        #expect(h.closed)
        #expect(frames <= 263)  // 256 KiB of block at most
        #expect(h.goAwayCode() == Code.enhanceYourCalm)
        #expect(h.outcomes.error(0)?.kind == .connectionLost)
    }

    // MARK: defect 6: 1xx

    @Test("1xx interim responses are skipped: a 103 then 200 is a 200; 101 or an interim response ending the stream is a stream error")
    func interimResponses() {
        var h = MachineHarness()
        h.send()
        h.send()
        h.send()
        _ = h.written()
        h.receive(Wire.concat(Wire.headers(&h.encoder, stream: 1, status: "103", [("link", "</a>")], endStream: false),
                              Wire.headers(&h.encoder, stream: 1, status: "100", endStream: false),
                              Wire.headers(&h.encoder, stream: 1, status: "200"),
                              Wire.headers(&h.encoder, stream: 3, status: "101", endStream: false),
                              Wire.headers(&h.encoder, stream: 5, status: "103", endStream: true)))
        #expect(h.outcomes.status(0) == 200)
        #expect(h.outcomes.error(1)?.kind == .protocolError)
        #expect(h.outcomes.error(2)?.kind == .protocolError)
        #expect(h.written().compactMap { $0.type == T.rstStream ? $0.errorCode : nil } == [Code.protocolError, Code.protocolError])
    }

    // MARK: defect 7: REFUSED_STREAM

    @Test("REFUSED_STREAM fails the request as not processed (the caller retries with backoff); never re-sent here")
    func refusedStream() {
        var h = MachineHarness()
        h.send()
        _ = h.written()
        h.receive(Wire.rst(stream: 1, Code.refusedStream))
        #expect(h.requeued.isEmpty)
        #expect(h.outcomes.error(0)?.kind == .streamReset && h.outcomes.error(0)?.possiblyProcessed == false)
        #expect(h.written().isEmpty)  // nothing re-sent by the connection itself
    }

    // MARK: defect 8: warm-up

    @Test("warm-up: one stream until any complete answer (a 4xx too), or until the warm-up time passes")
    func warmUp() {
        var h = MachineHarness(.init(warmUp: .seconds(1)))
        for _ in 0..<3 { h.send() }
        #expect(h.machine.openStreams == 1)
        h.receive(Wire.headers(&h.encoder, stream: 1, status: "403"))
        #expect(h.machine.openStreams == 2 && !h.machine.isWarmingUp)

        var silent = MachineHarness(.init(warmUp: .seconds(1)))
        for _ in 0..<3 { silent.send() }
        silent.tick(advance: .milliseconds(500))
        #expect(silent.machine.openStreams == 1)
        silent.tick(advance: .milliseconds(600))
        #expect(silent.machine.openStreams == 3)
        #expect(silent.outcomes.completedCount == 0)
    }

    @Test("a request whose deadline passed while queued is never written, and fails as not processed")
    func expiredNeverWritten() {
        var h = MachineHarness(settings: [(3, 1)])
        h.send(timeout: .seconds(10))
        h.send(timeout: .milliseconds(50))
        _ = h.written()
        h.tick(advance: .milliseconds(60))
        #expect(h.outcomes.error(1)?.kind == .deadlineExceeded && h.outcomes.error(1)?.possiblyProcessed == false)
        h.receive(Wire.headers(&h.encoder, stream: 1, status: "200"))
        #expect(!h.written().contains { $0.type == T.headers })
        // In flight, the deadline cancels the stream: possibly processed.
        h.send(timeout: .milliseconds(50))
        h.tick(advance: .milliseconds(60))
        #expect(h.outcomes.error(2)?.kind == .deadlineExceeded && h.outcomes.error(2)?.possiblyProcessed == true)
        #expect(h.written().map(\.type) == [T.headers, T.data, T.rstStream])
    }

    @Test("a request's own deadline timer firing in flight fails it as possibly processed; the connection's sweep then cancels its stream and frees the slot")
    func ownTimerInFlight() {
        var h = MachineHarness(settings: [(3, 1)])
        h.send(timeout: .milliseconds(50))
        h.send(timeout: .seconds(10))
        #expect(h.written().map(\.type) == [T.headers, T.data], "one stream at a time: the second waits")
        // The pool's timer (armed while the request waited for a connection) fires: the request knows only that
        // it is on a stream, not which connection holds it.
        h.requests[0].deadlineExceeded()
        #expect(h.outcomes.error(0)?.kind == .deadlineExceeded && h.outcomes.error(0)?.possiblyProcessed == true)
        #expect(h.machine.openStreams == 1 && h.written().isEmpty)
        h.tick(advance: .milliseconds(60))
        let frames = h.written()
        #expect(frames.map(\.type) == [T.rstStream, T.headers, T.data])
        #expect(frames.first?.streamID == 1 && frames.dropFirst().first?.streamID == 3)
        #expect(h.outcomes.completedCount == 1 && h.outcomes.completedOnce)
    }

    // MARK: defect 9: protocol errors

    static let oneStream: [(String, @Sendable (inout MachineHarness) -> ByteBuffer, UInt32)] = [
        ("DATA on an idle stream", { _ in Wire.data(stream: 5, [1]) }, Code.protocolError),
        ("HEADERS on an idle stream", { h in Wire.headers(&h.encoder, stream: 7, status: "200") }, Code.protocolError),
        ("HEADERS on a server (even) stream", { h in Wire.headers(&h.encoder, stream: 2, status: "200") }, Code.protocolError),
        ("RST_STREAM on an idle stream", { _ in Wire.rst(stream: 9, 0) }, Code.protocolError),
        ("WINDOW_UPDATE on an idle stream", { _ in Wire.windowUpdate(stream: 11, 1) }, Code.protocolError),
        ("connection window past 2^31-1", { _ in Wire.windowUpdate(stream: 0, 0x7fff_ffff) }, Code.flowControlError),
        ("zero connection WINDOW_UPDATE", { _ in Wire.windowUpdate(stream: 0, 0) }, Code.protocolError),
        ("SETTINGS_INITIAL_WINDOW_SIZE overflowing an open stream's window", { h in
            Wire.concat(Wire.windowUpdate(stream: 1, 0x7fff_0000), Wire.settings([(4, 0x10_0000)])) }, Code.flowControlError),
        ("SETTINGS_INITIAL_WINDOW_SIZE past 2^31-1", { _ in Wire.settings([(4, 0x8000_0000)]) }, Code.flowControlError),
        ("SETTINGS_ENABLE_PUSH = 1 from a server", { _ in Wire.settings([(2, 1)]) }, Code.protocolError),
        ("SETTINGS_MAX_FRAME_SIZE out of range", { _ in Wire.settings([(5, 1)]) }, Code.protocolError),
        ("PUSH_PROMISE", { _ in Wire.frame(T.pushPromise, flags: 0x4, stream: 1, [0, 0, 0, 2]) }, Code.protocolError),
        ("CONTINUATION without HEADERS", { _ in Wire.frame(T.continuation, flags: 0x4, stream: 1, [0x88]) }, Code.protocolError),
        ("a header block interrupted", { _ in
            Wire.concat(Wire.frame(T.headers, stream: 1, [0x88]), Wire.data(stream: 1, [1])) }, Code.protocolError),
        ("an undecodable header block", { _ in Wire.frame(T.headers, flags: 0x4, stream: 1, [0xff, 0xff, 0xff, 0x7f]) }, Code.compressionError),
        ("a frame over 16 KiB", { _ in Wire.frame(T.data, stream: 1, Array(repeating: 0, count: 16_385)) }, Code.frameSizeError),
        ("PING of a wrong size", { _ in Wire.frame(T.ping, [1, 2, 3]) }, Code.frameSizeError),
        ("DATA on stream 0", { _ in Wire.frame(T.data, stream: 0, [1]) }, Code.protocolError),
        ("padding longer than the frame", { _ in Wire.frame(T.data, flags: 0x8, stream: 1, [5, 1]) }, Code.protocolError),
        ("DATA overrunning the connection's receive window (4 MiB: the stream's 1 MiB is overrun first, and DATA on the reset stream still counts)", { h in
            var bytes = Wire.headers(&h.encoder, stream: 1, status: "200", endStream: false)
            for _ in 0..<263 { bytes.writeImmutableBuffer(Wire.data(stream: 1, Array(repeating: 0, count: 16_000), endStream: false)) }
            return bytes
        }, Code.flowControlError),
    ]

    @Test("connection errors: GOAWAY with the code RFC 9113 names, every request ends, the connection closes",
          arguments: 0..<oneStream.count)
    func connectionErrors(index: Int) {
        let (name, make, code) = Self.oneStream[index]
        var h = MachineHarness()
        h.send()
        _ = h.written()
        let bytes = make(&h)
        h.receive(bytes)
        #expect(h.closed, "\(name)")
        #expect(h.goAwayCode() == code, "\(name)")
        #expect(h.outcomes.error(0)?.possiblyProcessed == true, "\(name)")
    }

    @Test("the server's first frame must be SETTINGS")
    func firstFrameNotSettings() {
        var h = MachineHarness(settings: nil)
        h.receive(Wire.frame(T.ping, [0, 0, 0, 0, 0, 0, 0, 0]))
        #expect(h.closed && !h.ready)
        #expect(h.goAwayCode() == Code.protocolError)
    }

    static let streamErrors: [(String, @Sendable (inout MachineHarness) -> ByteBuffer, UInt32)] = [
        ("zero stream WINDOW_UPDATE", { _ in Wire.windowUpdate(stream: 1, 0) }, Code.protocolError),
        ("stream window past 2^31-1", { _ in Wire.windowUpdate(stream: 1, 0x7fff_ffff) }, Code.flowControlError),
        ("PRIORITY of a wrong size", { _ in Wire.frame(T.priority, stream: 1, [0, 0, 0]) }, Code.frameSizeError),
        ("a response without :status", { h in Wire.headers(&h.encoder, stream: 1, status: nil, [("x", "y")]) }, Code.protocolError),
        ("DATA before the response headers", { _ in Wire.data(stream: 1, [1]) }, Code.protocolError),
        ("trailers that do not end the stream", { h in
            Wire.concat(Wire.headers(&h.encoder, stream: 1, status: "200", endStream: false),
                        Wire.headers(&h.encoder, stream: 1, status: nil, [("x", "y")], endStream: false)) }, Code.protocolError),
    ]

    @Test("stream errors: RST_STREAM with the code RFC 9113 names; that request fails, the connection goes on",
          arguments: 0..<streamErrors.count)
    func streamErrorsEndOneStream(index: Int) {
        let (name, make, code) = Self.streamErrors[index]
        var h = MachineHarness()
        h.send()
        h.send()
        _ = h.written()
        let bytes = make(&h)
        h.receive(bytes)
        #expect(!h.closed, "\(name)")
        #expect(h.written().contains { $0.type == T.rstStream && $0.streamID == 1 && $0.errorCode == code }, "\(name)")
        #expect(h.outcomes.error(0)?.possiblyProcessed == true, "\(name)")
        h.receive(Wire.headers(&h.encoder, stream: 3, status: "200"))
        #expect(h.outcomes.status(1) == 200, "\(name)")
    }

    @Test("a response body beyond the configured bound fails its stream only")
    func bodyBound() {
        var h = MachineHarness(.init(maxResponseBodyBytes: 1_000))
        h.send()
        h.send()
        _ = h.written()
        h.receive(Wire.concat(Wire.headers(&h.encoder, stream: 1, status: "400", endStream: false),
                              Wire.data(stream: 1, Array(repeating: 0, count: 600), endStream: false),
                              Wire.data(stream: 1, Array(repeating: 0, count: 600)),
                              Wire.headers(&h.encoder, stream: 3, status: "200")))
        #expect(h.outcomes.error(0)?.kind == .responseTooLarge)
        #expect(h.outcomes.status(1) == 200)
        #expect(!h.closed)
    }

    // MARK: PING, idle

    @Test("PING after the interval without frames; no answer by the next interval closes; any frame counts as an answer")
    func pingAndIdle() {
        var h = MachineHarness(.init(pingInterval: .seconds(10)))
        h.tick(advance: .seconds(5))
        #expect(h.written().isEmpty)
        h.tick(advance: .seconds(6))
        #expect(h.written().map(\.type) == [T.ping])
        h.receive(Wire.frame(T.ping, flags: 0x1, [0, 0, 0, 0, 0x4e, 0x4f, 0x52, 0x51]))
        h.tick(advance: .seconds(11))
        #expect(h.written().map(\.type) == [T.ping])
        h.tick(advance: .seconds(11))
        #expect(h.closed)

        var idle = MachineHarness(.init(idleTimeout: .seconds(30)))
        idle.send()
        idle.receive(Wire.headers(&idle.encoder, stream: 1, status: "200"))
        idle.tick(advance: .seconds(29))
        #expect(!idle.closed)
        idle.tick(advance: .seconds(2))
        #expect(idle.closed && idle.goAwayCode() == Code.noError)
    }

    @Test("Duration converts to TimeAmount exactly (the connect timeout is not truncated to seconds)")
    func exactTimeouts() {
        #expect(Duration.milliseconds(1_500).timeAmount == .milliseconds(1_500))
        #expect(Duration.milliseconds(250).timeAmount == .milliseconds(250))
        #expect(Duration.nanoseconds(7).timeAmount == .nanoseconds(7))
    }
}
