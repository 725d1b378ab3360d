import NIOCore
import NIOEmbedded
import NIOHPACK
@testable import NorqHTTP2
import Logging
import Synchronization
import Testing

/// The handler on an EmbeddedChannel: the state machine's actions carried out on a real pipeline.
@Suite("HTTP2ConnectionHandler on EmbeddedChannel")
struct HTTP2ConnectionHandlerTests {
    /// Holds what it reads until read-complete, as NIOSSL does with decrypted bytes.
    final class HoldUntilReadComplete: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias InboundOut = ByteBuffer
        var held = ByteBuffer()
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            held.writeBuffer(&buffer)
        }
        func channelReadComplete(context: ChannelHandlerContext) {
            if held.readableBytes > 0 {
                context.fireChannelRead(wrapInboundOut(held))
                held = ByteBuffer()
            }
            context.fireChannelReadComplete()
        }
        func channelInactive(context: ChannelHandlerContext) {
            held.clear()  // NIOSSL discards what it holds when the connection goes away uncleanly
            context.fireChannelInactive()
        }
    }

    struct Setup {
        let channel: EmbeddedChannel
        let handler: HTTP2ConnectionHandler
        let outcomes = Outcomes()
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var sent = 0

        init(flushOnError: Bool = true, configuration: HTTP2ClientConfiguration = .init(host: "push.example.com")) throws {
            channel = EmbeddedChannel()
            handler = HTTP2ConnectionHandler(configuration: configuration, eventLoop: channel.eventLoop,
                                             logger: Logger(label: "test"))
            if flushOnError { try channel.pipeline.syncOperations.addHandler(HTTP2ReadFlushHandler()) }
            try channel.pipeline.syncOperations.addHandler(HoldUntilReadComplete())
            try channel.pipeline.syncOperations.addHandler(handler)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        }

        mutating func send() {
            let index = sent
            sent += 1
            let outcomes = self.outcomes
            handler.enqueue(CollectionOfOne(HTTP2RequestContext(
                head: MachineHarness.head(index), body: ByteBuffer(repeating: 2, count: 10), deadline: .now() + .seconds(10)
            ) { outcomes.record(index, $0) }))
        }

        func read(_ bytes: ByteBuffer, complete: Bool = true) throws {
            try channel.writeInbound(bytes)
            if complete { channel.pipeline.fireChannelReadComplete() }
        }

        /// Frames the handler wrote (flushed), the preface skipped.
        func written() throws -> [Wire.Frame] {
            channel.embeddedEventLoop.run()
            var all = ByteBuffer()
            while var buffer = try channel.readOutbound(as: ByteBuffer.self) { all.writeBuffer(&buffer) }
            if all.readableBytes >= 24, all.getBytes(at: all.readerIndex, length: 24) == HTTP2Wire.preface {
                all.moveReaderIndex(forwardBy: 24)
            }
            return Wire.frames(&all)
        }
    }

    @Test("defect 1: GOAWAY right after the first SETTINGS: ready, closed, and a request arriving after is not written")
    func goAwayAfterSettings() throws {
        var setup = try Setup()
        try setup.read(Wire.concat(Wire.settings(), Wire.goAway(last: 0)))
        #expect(try setup.handler.ready.wait() == ())
        setup.send()  // no pool behind it: handed back = failed, not processed
        #expect(setup.outcomes.error(0)?.possiblyProcessed == false)
        #expect(try !setup.written().contains { $0.type == HTTP2Wire.FrameType.headers })
        #expect(!setup.channel.isActive)
    }

    @Test("defect 1: closed before SETTINGS: the ready future fails, nothing hangs")
    func closedBeforeSettings() throws {
        let setup = try Setup()
        let ready = setup.handler.ready
        try setup.channel.close().wait()
        #expect(throws: HTTP2ClientError.self) { try ready.wait() }
    }

    @Test("defect 3: answers that arrived in the same read as a TCP reset complete (held by TLS until read-complete)")
    func answersBeforeReset() throws {
        var setup = try Setup()
        try setup.read(Wire.settings())
        setup.send()
        setup.send()
        _ = try setup.written()
        // The answer to stream 1 arrives, then the read fails with ECONNRESET before any read-complete.
        try setup.read(Wire.headers(&setup.encoder, stream: 1, status: "200"), complete: false)
        setup.channel.pipeline.fireErrorCaught(IOError(errnoCode: 104, reason: "read(descriptor:pointer:size:)"))
        setup.channel.embeddedEventLoop.run()
        #expect(setup.outcomes.status(0) == 200)
        #expect(setup.outcomes.error(1)?.kind == .connectionLost && setup.outcomes.error(1)?.possiblyProcessed == true)
    }

    @Test("defect 4: an oversized response header list fails one stream; the channel stays open for the others")
    func oversizedHeadersKeepTheConnection() throws {
        var setup = try Setup()
        try setup.read(Wire.settings())
        setup.send()
        setup.send()
        _ = try setup.written()
        let big = Wire.headers(&setup.encoder, stream: 1, status: "200", [("x-big", String(repeating: "b", count: 15_000)),
                                                                           ("x-big2", String(repeating: "c", count: 1_500))])
        try setup.read(Wire.concat(big, Wire.headers(&setup.encoder, stream: 3, status: "200")))
        #expect(setup.outcomes.error(0)?.kind == .responseTooLarge)
        #expect(setup.outcomes.status(1) == 200)
        #expect(setup.channel.isActive)
        #expect(try setup.written().map(\.type) == [HTTP2Wire.FrameType.rstStream])
    }

    @Test("a protocol error closes the channel after writing GOAWAY with its code")
    func protocolErrorCloses() throws {
        var setup = try Setup()
        try setup.read(Wire.settings())
        setup.send()
        _ = try setup.written()
        try setup.read(Wire.data(stream: 9, [1]))
        let frames = try setup.written()
        #expect(frames.last?.type == HTTP2Wire.FrameType.goAway && frames.last?.errorCode == HTTP2Wire.ErrorCode.protocolError)
        #expect(!setup.channel.isActive)
        #expect(setup.outcomes.error(0)?.kind == .connectionLost)
    }

    /// What the completions of one read saw: how deeply they nested, and the connection's load at each.
    final class CompletionProbe: Sendable {
        private struct State {
            var depth = 0
            var maxDepth = 0
            var loads: [Int] = []
        }
        private let state = Mutex(State())
        func enter(load: Int) {
            state.withLock {
                $0.depth += 1
                $0.maxDepth = max($0.maxDepth, $0.depth)
                $0.loads.append(load)
            }
        }
        func leave() { state.withLock { $0.depth -= 1 } }
        var maxDepth: Int { state.withLock { $0.maxDepth } }
        var loads: [Int] { state.withLock { $0.loads } }
    }

    @Test("the completions of one read run one after another, not nested, when each starts the next request on the connection; each sees the answered streams freed in the load the pool balances on")
    func completionsStartingRequests() throws {
        var setup = try Setup()
        let channel = setup.channel
        let pool = HTTP2ConnectionPool(configuration: .init(host: "push.example.com"),
                                       eventLoopGroup: channel.embeddedEventLoop, logger: Logger(label: "test"))
        let handler = NIOLoopBound(setup.handler, eventLoop: channel.eventLoop)
        let connection = HTTP2Connection(id: 1, channel: channel, handler: handler)
        setup.handler.attach(id: 1, delegate: pool, load: connection.publishedLoad)
        try setup.read(Wire.settings())
        let probe = CompletionProbe()
        let answered = 50
        for index in 0..<answered {
            // As the router's pump does: each completion starts the next request, here on the same connection.
            handler.value.enqueue(CollectionOfOne(HTTP2RequestContext(
                head: MachineHarness.head(index), body: ByteBuffer(), deadline: .now() + .seconds(10)
            ) { _ in
                probe.enter(load: connection.load)
                handler.value.enqueue(CollectionOfOne(HTTP2RequestContext(
                    head: MachineHarness.head(answered + index), body: ByteBuffer(), deadline: .now() + .seconds(10)
                ) { _ in }))
                probe.leave()
            }))
        }
        #expect(try setup.written().filter { $0.type == HTTP2Wire.FrameType.headers }.count == answered)
        #expect(connection.load == answered)
        var answers = ByteBuffer()
        for i in 0..<answered {
            answers.writeImmutableBuffer(Wire.headers(&setup.encoder, stream: Int32(2 * i + 1), status: "200"))
        }
        try setup.read(answers)
        #expect(probe.loads == Array(0..<answered))
        #expect(probe.maxDepth == 1)
        #expect(connection.load == answered)
        #expect(try setup.written().filter { $0.type == HTTP2Wire.FrameType.headers }.count == answered)
        withExtendedLifetime(pool) {}
    }
}
