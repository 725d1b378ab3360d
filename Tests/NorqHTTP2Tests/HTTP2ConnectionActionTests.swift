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

    /// A machine and its requests; `steps()` takes its pending actions without carrying them out.
    struct Subject {
        var machine = HTTP2ConnectionStateMachine(configuration: .init(), now: .uptimeNanoseconds(1_000_000_000))
        var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var requests: [HTTP2RequestContext] = []

        mutating func enqueue(_ count: Int) {
            for _ in 0..<count {
                let request = HTTP2RequestContext(head: MachineHarness.head(requests.count), body: ByteBuffer(),
                                                  deadline: now + .seconds(10)) { _ in }
                requests.append(request)
                machine.enqueue(request, now: now)
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
}
