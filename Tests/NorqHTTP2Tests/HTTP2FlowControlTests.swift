import NIOCore
import NorqHTTP2
import Testing

/// The connection's flow control as data: what each input says (an increment to write, a delta for the streams, a
/// connection error), without frames.
@Suite("HTTP2FlowControl")
struct HTTP2FlowControlTests {
    typealias Code = HTTP2Wire.ErrorCode

    /// The error code `body` throws, nil when it throws nothing (or another error).
    static func code(_ body: () throws -> Void) -> UInt32? {
        do {
            try body()
            return nil
        } catch let error as HTTP2ProtocolError {
            return error.errorCode
        } catch {
            return nil
        }
    }

    @Test("the receive window: opened by the preface, handed back once an eighth is used (not per read), overrun a FLOW_CONTROL_ERROR")
    func receiveWindow() throws {
        var flow = HTTP2FlowControl(localWindowSize: 1 << 20)
        #expect(flow.receiveWindow == 65_535)
        #expect(flow.openReceiveWindow() == (1 << 20) - 65_535)
        #expect(flow.receiveWindow == 1 << 20)
        try flow.received(100_000)
        #expect(flow.windowUpdateAtEndOfRead() == nil, "100,000 is less than an eighth (131,072)")
        try flow.received(40_000)
        #expect(flow.windowUpdateAtEndOfRead() == 140_000)
        #expect(flow.receiveWindow == 1 << 20 && flow.unacknowledgedBytes == 0)
        #expect(flow.windowUpdateAtEndOfRead() == nil)
        #expect(Self.code { try flow.received((1 << 20) + 1) } == Code.flowControlError)
        // A small window still waits for 16 KiB before a WINDOW_UPDATE.
        var small = HTTP2FlowControl(localWindowSize: 65_535)
        try small.received(10_000)
        #expect(small.windowUpdateAtEndOfRead() == nil)
        try small.received(6_384)
        #expect(small.windowUpdateAtEndOfRead() == 16_384)
    }

    @Test("the send window: a WINDOW_UPDATE of 0 is a PROTOCOL_ERROR, one past 2^31-1 a FLOW_CONTROL_ERROR; bodies spend it")
    func sendWindow() throws {
        var flow = HTTP2FlowControl(localWindowSize: 65_535)
        #expect(Self.code { try flow.connectionWindowUpdate(0) } == Code.protocolError)
        try flow.connectionWindowUpdate(10_000)
        #expect(flow.sendWindow == 75_535)
        flow.spend(75_000)
        #expect(flow.sendWindow == 535)
        #expect(Self.code { try flow.connectionWindowUpdate(HTTP2Wire.maxWindow) } == Code.flowControlError)
        #expect(flow.sendWindow == 535, "a refused update changes nothing")
    }

    @Test("a body goes out with its HEADERS only when no body waits and both windows hold it; waiting bodies keep their order and leave with their stream")
    func sendsAtOnce() throws {
        var flow = HTTP2FlowControl(localWindowSize: 65_535)
        #expect(flow.sendsAtOnce(65_535))
        #expect(!flow.sendsAtOnce(65_536), "beyond the connection window")
        #expect(try flow.setPeerInitialWindowSize(1_000) == 1_000 - 65_535)
        #expect(!flow.sendsAtOnce(1_001), "beyond a new stream's window")
        #expect(flow.sendsAtOnce(1_000))
        flow.block(streamID: 1, body: ByteBuffer(string: "a"))
        flow.block(streamID: 3, body: ByteBuffer(string: "b"))
        flow.block(streamID: 5, body: ByteBuffer(string: "c"))
        #expect(!flow.sendsAtOnce(1), "a body waits already: the next one queues behind it")
        flow.forget(streamID: 3)
        flow.forget(streamID: 0)
        #expect(flow.blockedCount == 2)
        flow.forgetAll()
        #expect(flow.blockedCount == 0 && flow.sendsAtOnce(1))
    }

    @Test("SETTINGS_INITIAL_WINDOW_SIZE: the delta for every open stream; past 2^31-1 a FLOW_CONTROL_ERROR")
    func initialWindowSize() throws {
        var flow = HTTP2FlowControl(localWindowSize: 65_535)
        #expect(try flow.setPeerInitialWindowSize(100_000) == 100_000 - 65_535)
        #expect(try flow.setPeerInitialWindowSize(100_000) == 0)
        #expect(try flow.setPeerInitialWindowSize(0) == -100_000)
        #expect(Self.code { _ = try flow.setPeerInitialWindowSize(UInt32(HTTP2Wire.maxWindow) + 1) } == Code.flowControlError)
        #expect(flow.peerInitialWindowSize == 0)
    }
}
