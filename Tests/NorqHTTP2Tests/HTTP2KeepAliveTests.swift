import NIOCore
import NorqHTTP2
import Testing

/// The connection's PING and idle timing as data: each tick's action, matched whole.
@Suite struct HTTP2KeepAliveTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test("a PING after an interval without frames; unanswered for another interval, the connection closes; any frame answers it")
    func ping() {
        var keepAlive = HTTP2KeepAlive(now: start)
        let interval = TimeAmount.seconds(10)
        func tick(_ seconds: Int64) -> HTTP2KeepAlive.Action {
            keepAlive.tick(now: start + .seconds(seconds), pingInterval: interval, idleTimeout: nil, idle: false)
        }
        #expect(tick(9) == .none)
        #expect(tick(10) == .sendPing)
        #expect(tick(15) == .none, "one PING at a time")
        keepAlive.frameReceived(now: start + .seconds(16))
        #expect(tick(25) == .none)
        #expect(tick(26) == .sendPing)
        #expect(tick(35) == .none)
        #expect(tick(36) == .closeUnanswered)
    }

    @Test("idle: closed after the timeout without a request, counted from the last stream activity; never while busy")
    func idle() {
        var keepAlive = HTTP2KeepAlive(now: start)
        let timeout = TimeAmount.seconds(30)
        #expect(keepAlive.tick(now: start + .seconds(40), pingInterval: nil, idleTimeout: timeout, idle: false) == .none)
        keepAlive.streamActivity(now: start + .seconds(40))
        #expect(keepAlive.tick(now: start + .seconds(69), pingInterval: nil, idleTimeout: timeout, idle: true) == .none)
        #expect(keepAlive.tick(now: start + .seconds(70), pingInterval: nil, idleTimeout: timeout, idle: true)
            == .closeIdle(timeout))
    }

    @Test("an idle connection due a PING is closed, not pinged; an unanswered PING closes before idleness is looked at")
    func precedence() {
        var keepAlive = HTTP2KeepAlive(now: start)
        #expect(keepAlive.tick(now: start + .seconds(60), pingInterval: .seconds(10), idleTimeout: .seconds(30), idle: true)
            == .closeIdle(.seconds(30)))
        var pinged = HTTP2KeepAlive(now: start)
        #expect(pinged.tick(now: start + .seconds(10), pingInterval: .seconds(10), idleTimeout: nil, idle: false) == .sendPing)
        #expect(pinged.tick(now: start + .seconds(60), pingInterval: .seconds(10), idleTimeout: .seconds(30), idle: true)
            == .closeUnanswered)
        var off = HTTP2KeepAlive(now: start)
        #expect(off.tick(now: start + .seconds(600), pingInterval: .zero, idleTimeout: nil, idle: true) == .none,
                "a zero interval sends no PING")
    }
}
