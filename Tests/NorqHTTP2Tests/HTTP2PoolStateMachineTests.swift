import NIOCore
import NorqHTTP2
import Testing

/// The pool's decisions without I/O.
@Suite("HTTP2PoolStateMachine")
struct HTTP2PoolStateMachineTests {
    final class Connection {}
    typealias Machine = HTTP2PoolStateMachine<Connection>

    static func request(_ outcomes: Outcomes, _ index: Int) -> HTTP2RequestContext {
        HTTP2RequestContext(head: MachineHarness.head(index), body: ByteBuffer(), deadline: .now() + .seconds(10)) {
            outcomes.record(index, $0)
        }
    }

    static func first(_ ready: [Connection], _ turn: Int) -> Connection { ready[0] }

    @Test("requests wait for the first connection, which takes them all; up to `connections` are opened")
    func waitForConnection() {
        var machine = Machine(connections: 2, retryLimit: 1)
        let outcomes = Outcomes()
        let first = machine.submit(Self.request(outcomes, 0), pick: Self.first)
        #expect(first.connect?.id == 1 && first.dispatchTo == nil && first.failure == nil)
        let second = machine.submit(Self.request(outcomes, 1), pick: Self.first)
        #expect(second.connect?.id == 2)
        let third = machine.submit(Self.request(outcomes, 2), pick: Self.first)
        #expect(third.connect == nil)
        let connection = Connection()
        let opened = machine.connectSucceeded(id: 1, connection: connection)
        #expect(opened.dispatchTo === connection && opened.requests.count == 3 && opened.close == nil)
        #expect(machine.submit(Self.request(outcomes, 3), pick: Self.first).dispatchTo === connection)
    }

    @Test("defect 1: a connection that closed (or went away) while opening is never added; its success closes it")
    func closedWhileOpening() {
        var machine = Machine(connections: 1, retryLimit: 1)
        let outcomes = Outcomes()
        _ = machine.submit(Self.request(outcomes, 0), pick: Self.first)
        let replacement = machine.connectionUnusable(id: 1)  // GOAWAY handled before the pool heard of the success
        #expect(replacement.connect == nil)  // the attempt still counts until it reports
        let connection = Connection()
        let opened = machine.connectSucceeded(id: 1, connection: connection)
        #expect(opened.close === connection && opened.dispatchTo == nil)
        #expect(opened.connect?.id == 2)  // requests still wait: a new attempt
        #expect(machine.ready.isEmpty && machine.waitingCount == 1)
    }

    @Test("a connection going away is forgotten; requests then wait for a replacement")
    func goingAway() {
        var machine = Machine(connections: 1, retryLimit: 1)
        let outcomes = Outcomes()
        _ = machine.submit(Self.request(outcomes, 0), pick: Self.first)
        _ = machine.connectSucceeded(id: 1, connection: Connection())
        _ = machine.connectionUnusable(id: 1)
        #expect(machine.ready.isEmpty)
        let next = machine.submit(Self.request(outcomes, 1), pick: Self.first)
        #expect(next.dispatchTo == nil && next.connect?.id == 2)
    }

    @Test("failed attempts back off; the retry limit fails the waiting requests, not processed; the next request tries again")
    func retryLimit() {
        var machine = Machine(connections: 1, retryLimit: 3, jitter: { 1.0 })
        let outcomes = Outcomes()
        _ = machine.submit(Self.request(outcomes, 0), pick: Self.first)
        let error = HTTP2ClientError(.connectFailed, possiblyProcessed: false, "refused")
        let first = machine.connectFailed(id: 1, error: error)
        #expect(first.connect == .init(id: 2, delay: .milliseconds(100)) && first.requests.isEmpty)
        let second = machine.connectFailed(id: 2, error: error)
        #expect(second.connect == .init(id: 3, delay: .milliseconds(200)))
        let third = machine.connectFailed(id: 3, error: error)
        #expect(third.connect == nil && third.requests.count == 1 && third.failure?.kind == .connectFailed)
        #expect(third.failure?.possiblyProcessed == false)
        let again = machine.submit(Self.request(outcomes, 1), pick: Self.first)
        #expect(again.connect?.id == 4)
        _ = machine.connectSucceeded(id: 4, connection: Connection())
        #expect(machine.consecutiveFailures == 0)
    }

    @Test("health: untried and connected pools are healthy; a failed attempt with no connection ready is not, until one connects")
    func health() {
        var machine = Machine(connections: 2, retryLimit: nil)
        let outcomes = Outcomes()
        #expect(machine.health.isHealthy, "nothing tried yet")
        _ = machine.submit(Self.request(outcomes, 0), pick: Self.first)
        _ = machine.connectFailed(id: 1, error: HTTP2ClientError(.connectFailed, possiblyProcessed: false, "connection refused"))
        #expect(!machine.health.isHealthy)
        #expect(machine.health.lastConnectFailure == "connection refused")
        #expect(machine.health.consecutiveFailures == 1)
        let connection = Connection()
        _ = machine.connectSucceeded(id: 2, connection: connection)
        #expect(machine.health.isHealthy && machine.health.readyConnections == 1)
        // A later failed attempt while a connection works: still healthy (requests have somewhere to go).
        _ = machine.submit(Self.request(outcomes, 1), pick: Self.first)
        _ = machine.connectFailed(id: 3, error: HTTP2ClientError(.connectFailed, possiblyProcessed: false, "refused again"))
        #expect(machine.health.isHealthy)
        // The connection goes away: the failure shows again.
        _ = machine.connectionUnusable(id: 2)
        #expect(machine.health.lastConnectFailure == "refused again")
    }

    @Test("no retry limit: requests keep waiting (until their deadline) while attempts back off")
    func noRetryLimit() {
        var machine = Machine(connections: 1, retryLimit: nil, jitter: { 1.0 })
        let outcomes = Outcomes()
        _ = machine.submit(Self.request(outcomes, 0), pick: Self.first)
        let error = HTTP2ClientError(.connectFailed, possiblyProcessed: false, "refused")
        for id in 1...10 {
            let decision = machine.connectFailed(id: id, error: error)
            #expect(decision.requests.isEmpty && decision.connect?.id == id + 1)
        }
        #expect(machine.waitingCount == 1)
    }

    @Test("an address the filter refuses fails the waiting requests at once")
    func addressNotAllowed() {
        var machine = Machine(connections: 1, retryLimit: nil)
        let outcomes = Outcomes()
        _ = machine.submit(Self.request(outcomes, 0), pick: Self.first)
        let decision = machine.connectFailed(id: 1, error: HTTP2ClientError(.addressNotAllowed, possiblyProcessed: false, "no"))
        #expect(decision.requests.count == 1 && decision.failure?.kind == .addressNotAllowed)
    }

    @Test("defect 10: after shutdown nothing is accepted and a connection that finishes opening is closed")
    func shutdown() {
        var machine = Machine(connections: 1, retryLimit: 1)
        let outcomes = Outcomes()
        _ = machine.submit(Self.request(outcomes, 0), pick: Self.first)
        #expect(machine.shutdown().count == 1)
        #expect(machine.submit(Self.request(outcomes, 1), pick: Self.first).failure?.kind == .shutDown)
        let late = Connection()
        let opened = machine.connectSucceeded(id: 1, connection: late)
        #expect(opened.close === late && opened.connect == nil && machine.ready.isEmpty)
    }

    @Test("backoff: exponential from 100 ms, capped at 30 s, jitter within [50%, 100%]")
    func backoff() {
        #expect(HTTP2ReconnectBackoff.delay(failures: 0, random: 1) == .zero)
        #expect(HTTP2ReconnectBackoff.delay(failures: 1, random: 1) == .milliseconds(100))
        #expect(HTTP2ReconnectBackoff.delay(failures: 4, random: 1) == .milliseconds(800))
        #expect(HTTP2ReconnectBackoff.delay(failures: 4, random: 0.5) == .milliseconds(400))
        #expect(HTTP2ReconnectBackoff.delay(failures: 40, random: 1) == .seconds(30))
    }
}
