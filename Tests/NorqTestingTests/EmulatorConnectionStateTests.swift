import NIOCore
import NIOHPACK
import NIOHTTP2
@testable import NorqTesting
import Testing

/// The connection half the APNs and FCM emulators share, driven frame by frame without a channel.
@Suite struct EmulatorConnectionStateTests {
    static func headers(_ id: Int, end: Bool = false) -> HTTP2Frame {
        HTTP2Frame(streamID: HTTP2StreamID(id), payload: .headers(.init(headers: [":method": "POST", ":path": "/x"],
                                                                        endStream: end)))
    }

    static func data(_ id: Int, bytes: Int, end: Bool = false) -> HTTP2Frame {
        let buffer = ByteBuffer(repeating: UInt8(ascii: "x"), count: bytes)
        return HTTP2Frame(streamID: HTTP2StreamID(id), payload: .data(.init(data: .byteBuffer(buffer), endStream: end)))
    }

    static let none = EmulatorStreamFaults()

    @Test func aRequestCompletesAtEndStreamWithItsBody() {
        var state = EmulatorConnectionState()
        guard case .nothing = state.receive(Self.headers(1), faults: Self.none) else { Issue.record("headers"); return }
        guard case .nothing = state.receive(Self.data(1, bytes: 10), faults: Self.none) else { Issue.record("data"); return }
        guard case .complete(let id) = state.receive(Self.data(1, bytes: 5, end: true), faults: Self.none) else {
            Issue.record("not complete"); return
        }
        #expect(id == 1)
        #expect(state.stream(1)?.body?.readableBytes == 15)
        state.remove(1)
        #expect(state.stream(1) == nil)
        // The DATA counted towards the connection window, handed back (with the large window) at the read's end.
        guard case .windowUpdate(let increment) = state.readComplete().first else { Issue.record("no WINDOW_UPDATE"); return }
        #expect(increment == (1 << 30) + 15)
        let first = state.takeFlush(), second = state.takeFlush()
        #expect(first && !second)
    }

    @Test func aBodyAboveTheBoundIsDroppedAndMarked() {
        var state = EmulatorConnectionState()
        _ = state.receive(Self.headers(1), faults: Self.none)
        for _ in 0..<(EmulatorConnectionState.defaultMaxBodyBytes / 16_384) {
            _ = state.receive(Self.data(1, bytes: 16_384), faults: Self.none)
        }
        #expect(state.stream(1)?.body?.readableBytes == EmulatorConnectionState.defaultMaxBodyBytes)
        #expect(state.stream(1)?.tooLarge == false)
        _ = state.receive(Self.data(1, bytes: 1), faults: Self.none)
        for _ in 0..<100 { _ = state.receive(Self.data(1, bytes: 16_384), faults: Self.none) }
        #expect(state.stream(1)?.tooLarge == true)
        #expect(state.stream(1)?.body == nil)
    }

    @Test func goAwayFaultAnswersTheStreamsBelowItThenCloses() {
        var state = EmulatorConnectionState()
        let faults = EmulatorStreamFaults(goAwayAfterStreams: 2)
        _ = state.receive(Self.headers(1, end: true), faults: faults)
        _ = state.receive(Self.headers(3, end: true), faults: faults)
        // Above the GOAWAY's last stream: ignored.
        guard case .nothing = state.receive(Self.headers(5, end: true), faults: faults) else { Issue.record("5"); return }
        #expect(state.stream(5) == nil)
        let frames = state.readComplete()
        #expect(frames.contains { if case .goAway(let last, _, _) = $0 { last == 3 } else { false } })
        let withStreams = state.closeIfDrained()  // streams 1 and 3 are not answered yet
        state.remove(1)
        state.remove(3)
        state.delayedAnswers = 1
        let withDelayed = state.closeIfDrained()
        state.delayedAnswers = 0
        let drained = state.closeIfDrained()
        let again = state.closeIfDrained()
        #expect(!withStreams && !withDelayed && drained && !again)
        #expect(state.closed)
    }

    @Test func dropFaultAndResetAndClose() {
        var state = EmulatorConnectionState()
        let faults = EmulatorStreamFaults(dropConnectionAfterStreams: 3)
        _ = state.receive(Self.headers(1), faults: faults)
        guard case .reset(let id, _) = state.receive(HTTP2Frame(streamID: 1, payload: .rstStream(.cancel)), faults: faults) else {
            Issue.record("no reset"); return
        }
        #expect(id == 1)
        _ = state.receive(Self.headers(3), faults: faults)
        guard case .drop = state.receive(Self.headers(5), faults: faults) else { Issue.record("no drop"); return }
        #expect(state.closed)
        guard case .nothing = state.receive(Self.headers(7), faults: faults) else { Issue.record("after close"); return }
        let unanswered = state.closedByPeer().map(\.0).sorted()
        let frames = state.readComplete()
        #expect(unanswered == [3, 5])
        #expect(frames.isEmpty)
    }
}
