import NIOCore
import NIOHPACK
import NorqHTTP2
import Testing

/// The connection state machine's actions, matched whole and in order (postgres-nio's `ConnectionStateMachine` tests
/// are the model), where what matters is what the machine decides rather than the bytes it writes.
@Suite("HTTP2ConnectionStateMachine actions")
struct HTTP2ConnectionActionTests {
    /// An action with its request named by index: comparable.
    enum Step: Hashable {
        case succeed(Int, status: Int)
        case fail(Int, HTTP2ClientError.Kind, possiblyProcessed: Bool)
        case requeue(Int, HTTP2ClientError.Kind, written: Bool)
        case ready
        case goingAway
        case close
        case writeAndResume
    }

    /// A frame the machine wrote, comparable.
    struct Written: Hashable {
        var type: UInt8
        var stream: Int32
        var length: Int
        var endStream: Bool

        static func data(_ stream: Int32, _ length: Int, end: Bool) -> Written {
            Written(type: HTTP2Wire.FrameType.data, stream: stream, length: length, endStream: end)
        }
    }

    /// A machine and its requests; `steps()` takes its pending actions without carrying them out.
    struct Subject {
        var machine: HTTP2ConnectionStateMachine
        var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var requests: [HTTP2RequestContext] = []

        init(_ configuration: HTTP2ConnectionStateMachine.Configuration = .init()) {
            machine = HTTP2ConnectionStateMachine(configuration: configuration, now: now)
        }

        mutating func enqueue(_ count: Int, body: Int = 0, timeout: TimeAmount = .seconds(10)) {
            for _ in 0..<count {
                let request = HTTP2RequestContext(head: MachineHarness.head(requests.count),
                                                  body: ByteBuffer(repeating: 7, count: body),
                                                  deadline: now + timeout) { _ in }
                requests.append(request)
                machine.enqueue(request, now: now)
            }
        }

        mutating func tick(advance: TimeAmount) {
            now = now + advance
            machine.tick(now: now)
        }

        /// The frames written since the last call (or `steps()`), as (type, stream, payload length, END_STREAM).
        mutating func written() -> [Written] {
            var out = machine.outbound
            machine.outbound.clear()
            if out.readableBytes >= 24, out.getBytes(at: out.readerIndex, length: 24) == HTTP2Wire.preface {
                out.moveReaderIndex(forwardBy: 24)
            }
            return Wire.frames(&out).map {
                Written(type: $0.type, stream: $0.streamID, length: $0.payload.readableBytes,
                        endStream: $0.flags & HTTP2Wire.Flags.endStream != 0
                            && ($0.type == HTTP2Wire.FrameType.data || $0.type == HTTP2Wire.FrameType.headers))
            }
        }

        mutating func receive(_ bytes: ByteBuffer) {
            var bytes = bytes
            machine.receive(&bytes, now: now)
        }

        mutating func steps() -> [Step] {
            var steps: [Step] = []
            while let action = machine.popAction() {
                switch action {
                case .succeed(let request, let response): steps.append(.succeed(index(request), status: response.status))
                case .fail(let request, let error):
                    steps.append(.fail(index(request), error.kind, possiblyProcessed: error.possiblyProcessed))
                case .requeue(let request, let error, let written): steps.append(.requeue(index(request), error.kind, written: written))
                case .ready: steps.append(.ready)
                case .goingAway: steps.append(.goingAway)
                case .close: steps.append(.close)
                case .writeAndResume: steps.append(.writeAndResume)
                }
            }
            machine.outbound.clear()
            return steps
        }

        func index(_ request: HTTP2RequestContext) -> Int { requests.firstIndex { $0 === request } ?? -1 }
    }

    @Test("requests wait for the server's SETTINGS, which makes the connection ready; answers succeed in the order they arrive")
    func readyThenAnswers() {
        var s = Subject()
        s.enqueue(2)
        #expect(s.steps() == [])
        s.receive(Wire.settings())
        #expect(s.steps() == [.ready])
        #expect(s.machine.openStreams == 2)
        s.receive(Wire.concat(Wire.headers(&s.encoder, stream: 3, status: "200"),
                              Wire.headers(&s.encoder, stream: 1, status: "410")))
        #expect(s.steps() == [.succeed(1, status: 200), .succeed(0, status: 410)])
        #expect(s.machine.load == 0)
    }

    @Test("GOAWAY below streams in flight: going away, the streams above the last id handed back as refused (written), the queue as never written; the rest finish, then close")
    func goAwayHandsBackWhatWasNotProcessed() {
        var s = Subject()
        s.receive(Wire.settings([(3, 3)]))  // at most 3 streams: requests 3 and 4 stay queued
        _ = s.steps()
        s.enqueue(5)
        #expect(s.machine.openStreams == 3 && s.machine.load == 5)
        s.receive(Wire.goAway(last: 1))  // stream 1 (request 0) may have been processed; 3 and 5 were not
        let steps = s.steps()
        #expect(steps.first == .goingAway && steps.count == 5)
        // The streams above the last id leave in the stream table's order; the queue in its own.
        #expect(Set(steps.dropFirst(1).prefix(2)) == [.requeue(1, .goAway, written: true), .requeue(2, .goAway, written: true)])
        #expect(Array(steps.dropFirst(3)) == [.requeue(3, .goAway, written: false), .requeue(4, .goAway, written: false)])
        #expect(s.machine.takesNoNewStreams && s.machine.openStreams == 1)
        s.receive(Wire.headers(&s.encoder, stream: 1, status: "200"))
        #expect(s.steps() == [.succeed(0, status: 200), .close])
        #expect(s.machine.isClosed)
    }

    @Test("REFUSED_STREAM fails that request as not processed and the freed stream takes the next queued request; another code may have been processed")
    func refusedStream() {
        var s = Subject()
        s.receive(Wire.settings([(3, 1)]))
        _ = s.steps()
        s.enqueue(3)
        s.receive(Wire.rst(stream: 1, HTTP2Wire.ErrorCode.refusedStream))
        #expect(s.steps() == [.fail(0, .streamReset, possiblyProcessed: false)])
        #expect(s.machine.openStreams == 1 && s.machine.load == 2, "request 1 took the freed stream")
        s.receive(Wire.rst(stream: 3, HTTP2Wire.ErrorCode.internalError))
        #expect(s.steps() == [.fail(1, .streamReset, possiblyProcessed: true)])
    }

    @Test("the channel closing: going away, streams in flight fail as possibly processed, queued requests are handed back unwritten")
    func channelClosed() {
        var s = Subject()
        s.receive(Wire.settings([(3, 1)]))
        _ = s.steps()
        s.enqueue(2)
        s.machine.channelClosed(reason: "the connection closed")
        #expect(s.steps() == [.goingAway, .fail(0, .connectionLost, possiblyProcessed: true),
                              .requeue(1, .connectionLost, written: false)])
        s.enqueue(1)
        #expect(s.steps() == [.requeue(2, .connectionLost, written: false)])
    }

    @Test("a double GOAWAY (2^31-1, then the real last id): the first hands back only the queue; the second the streams above its id (refused, written); a higher third changes nothing; the last stream's answer closes")
    func doubleGoAway() {
        var s = Subject()
        s.receive(Wire.settings([(3, 3)]))
        _ = s.steps()
        s.enqueue(5)
        s.receive(Wire.goAway(last: Int32.max))
        #expect(s.steps() == [.goingAway, .requeue(3, .goAway, written: false), .requeue(4, .goAway, written: false)])
        #expect(s.machine.stateName == "draining(lastStreamID: 2147483647)" && s.machine.openStreams == 3)
        s.receive(Wire.goAway(last: 1))
        #expect(Set(s.steps()) == [.requeue(1, .goAway, written: true), .requeue(2, .goAway, written: true)])
        #expect(s.machine.stateName == "draining(lastStreamID: 1)" && s.machine.openStreams == 1)
        s.receive(Wire.goAway(last: 5))
        #expect(s.steps() == [])
        #expect(s.machine.stateName == "draining(lastStreamID: 1)", "a later GOAWAY cannot raise the last id")
        s.enqueue(1)
        #expect(s.steps() == [.requeue(5, .connectionLost, written: false)], "draining takes no request")
        s.receive(Wire.headers(&s.encoder, stream: 1, status: "200"))
        #expect(s.steps() == [.succeed(0, status: 200), .close])
        #expect(s.machine.stateName == "closed" && s.machine.load == 0)
    }

    @Test("GOAWAY on a connection whose streams are all at or below the last id: going away, nothing handed back; each answer finishes, the last closes")
    func goAwayAboveEverything() {
        var s = Subject()
        s.receive(Wire.settings())
        _ = s.steps()
        s.enqueue(2)
        s.receive(Wire.goAway(last: 3))
        #expect(s.steps() == [.goingAway])
        s.receive(Wire.headers(&s.encoder, stream: 3, status: "200"))
        #expect(s.steps() == [.succeed(1, status: 200)])
        s.receive(Wire.rst(stream: 1, HTTP2Wire.ErrorCode.refusedStream))
        #expect(s.steps() == [.fail(0, .streamReset, possiblyProcessed: false), .close],
                "REFUSED_STREAM while draining: not processed, and the connection closes once empty")
    }

    @Test("bodies blocked on a small stream window go out as WINDOW_UPDATEs open it, oldest first, with no action until the answers")
    func windowUpdatesUnblockBodies() {
        var s = Subject()
        s.receive(Wire.settings([(HTTP2Wire.Setting.initialWindowSize, 10)]))
        #expect(s.steps() == [.ready])
        s.enqueue(2, body: 100)
        let opened = s.written()
        #expect(opened.filter { $0.type == HTTP2Wire.FrameType.data }
            == [.data(1, 10, end: false), .data(3, 10, end: false)], "each stream's window's worth at once")
        #expect(s.machine.blockedStreams == 2)
        #expect(s.steps() == [])
        s.receive(Wire.windowUpdate(stream: 3, 90))
        #expect(s.written() == [.data(3, 90, end: true)])
        #expect(s.machine.blockedStreams == 1 && s.steps() == [])
        s.receive(Wire.windowUpdate(stream: 1, 40))
        #expect(s.written() == [.data(1, 40, end: false)])
        #expect(s.machine.blockedStreams == 1)
        s.receive(Wire.windowUpdate(stream: 1, 1_000))
        #expect(s.written() == [.data(1, 50, end: true)])
        #expect(s.machine.blockedStreams == 0 && s.machine.connectionSendWindow == 65_535 - 200)
        s.receive(Wire.concat(Wire.headers(&s.encoder, stream: 1, status: "200"),
                              Wire.headers(&s.encoder, stream: 3, status: "200")))
        #expect(s.steps() == [.succeed(0, status: 200), .succeed(1, status: 200)])
    }

    @Test("the connection window: a body waits for the connection's WINDOW_UPDATE even when its stream has room")
    func connectionWindowUnblocksBodies() {
        var s = Subject()
        s.receive(Wire.settings([(HTTP2Wire.Setting.initialWindowSize, 1_000_000)]))
        _ = s.steps()
        s.enqueue(1, body: 65_535)
        _ = s.written()
        #expect(s.machine.connectionSendWindow == 0 && s.machine.blockedStreams == 0, "exactly the window: sent at once")
        s.enqueue(1, body: 100)
        #expect(s.written().filter { $0.type == HTTP2Wire.FrameType.data } == [])
        #expect(s.machine.blockedStreams == 1)
        s.receive(Wire.windowUpdate(stream: 0, 60))
        #expect(s.written() == [.data(3, 60, end: false)])
        s.receive(Wire.windowUpdate(stream: 0, 60))
        #expect(s.written() == [.data(3, 40, end: true)])
        #expect(s.machine.blockedStreams == 0 && s.steps() == [])
    }

    @Test("deadlines: at the tick past them, a queued request fails not processed, a stream in flight possibly processed (and is reset)")
    func timeouts() {
        var s = Subject()
        s.receive(Wire.settings([(3, 1)]))
        _ = s.steps()
        s.enqueue(2, timeout: .seconds(1))
        s.enqueue(1, timeout: .seconds(5))
        _ = s.written()
        s.tick(advance: .milliseconds(500))
        #expect(s.steps() == [])
        s.tick(advance: .seconds(1))
        let resets = s.written().filter { $0.type == HTTP2Wire.FrameType.rstStream }
        #expect(s.steps() == [.fail(1, .deadlineExceeded, possiblyProcessed: false),
                              .fail(0, .deadlineExceeded, possiblyProcessed: true)])
        #expect(resets.map(\.stream) == [1])
        #expect(s.machine.openStreams == 1 && s.machine.load == 1, "request 2 took the freed stream")
    }

    @Test("a stream in flight on a draining connection expires: it fails, and the drained connection closes")
    func timeoutWhileDraining() {
        var s = Subject()
        s.receive(Wire.settings())
        _ = s.steps()
        s.enqueue(1, timeout: .seconds(1))
        s.receive(Wire.goAway(last: 1))
        #expect(s.steps() == [.goingAway])
        s.tick(advance: .seconds(2))
        #expect(s.steps() == [.fail(0, .deadlineExceeded, possiblyProcessed: true), .close])
        #expect(s.machine.isClosed)
    }

    @Test("the channel closing while draining: the streams left fail as possibly processed, no second going-away; closed takes nothing more")
    func closeWhileDraining() {
        var s = Subject()
        s.receive(Wire.settings())
        _ = s.steps()
        s.enqueue(2)
        s.receive(Wire.goAway(last: 1))
        #expect(s.steps() == [.goingAway, .requeue(1, .goAway, written: true)])
        s.machine.channelClosed(reason: "the connection closed")
        #expect(s.steps() == [.fail(0, .connectionLost, possiblyProcessed: true)])
        #expect(s.machine.stateName == "closed")
        s.receive(Wire.headers(&s.encoder, stream: 1, status: "200"))
        s.tick(advance: .seconds(60))
        #expect(s.steps() == [])
    }

    @Test("PING unanswered for an interval, and the idle timeout: going away, then close")
    func keepAliveTimers() {
        var pinged = Subject(.init(pingInterval: .seconds(1)))
        pinged.receive(Wire.settings())
        _ = pinged.steps()
        pinged.tick(advance: .seconds(1))
        #expect(pinged.written().map(\.type) == [HTTP2Wire.FrameType.ping])
        #expect(pinged.steps() == [])
        pinged.tick(advance: .seconds(1))
        #expect(pinged.steps() == [.goingAway, .close])

        var idle = Subject(.init(idleTimeout: .seconds(1)))
        idle.receive(Wire.settings())
        _ = idle.steps()
        idle.tick(advance: .seconds(1))
        #expect(idle.written().map(\.type) == [HTTP2Wire.FrameType.goAway])
        #expect(idle.steps() == [.goingAway, .close])
    }

    @Test("warm-up: one stream until the first complete answer, then the server's limit")
    func warmUp() {
        var s = Subject(.init(warmUp: .seconds(5)))
        s.enqueue(3)
        s.receive(Wire.settings())
        #expect(s.steps() == [.ready])
        #expect(s.machine.openStreams == 1 && s.machine.isWarmingUp)
        s.receive(Wire.headers(&s.encoder, stream: 1, status: "200"))
        #expect(s.steps() == [.succeed(0, status: 200)])
        #expect(s.machine.openStreams == 2 && !s.machine.isWarmingUp)
    }
}
