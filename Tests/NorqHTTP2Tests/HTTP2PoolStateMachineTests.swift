import NIOCore
import NorqHTTP2
import Testing

/// The pool's actions without I/O, compared whole (requests by identity, connections by id).
@Suite("HTTP2PoolStateMachine")
struct HTTP2PoolStateMachineTests {
    typealias Machine = HTTP2PoolStateMachine

    static func request(_ outcomes: Outcomes, _ index: Int) -> HTTP2RequestContext {
        HTTP2RequestContext(head: MachineHarness.head(index), body: ByteBuffer(), deadline: .now() + .seconds(10)) {
            outcomes.record(index, $0)
        }
    }

    static func first(_ ready: [HTTP2ConnectionID], _ turn: Int) -> HTTP2ConnectionID { ready[0] }

    static let shutDown = HTTP2ClientError(.shutDown, possiblyProcessed: false, "the HTTP/2 client is shut down")

    @Test("requests wait for the first connection, which takes them all; up to `connections` are opened")
    func waitForConnection() {
        var machine = Machine(connections: 2, retryLimit: 1)
        let outcomes = Outcomes()
        let requests = (0..<4).map { Self.request(outcomes, $0) }
        #expect(machine.submit(requests[0], pick: Self.first)
            == Machine.Action(request: .scheduleDeadline(requests[0]), connection: .connect(.init(id: 1, delay: nil))))
        #expect(machine.submit(requests[1], pick: Self.first)
            == Machine.Action(request: .scheduleDeadline(requests[1]), connection: .connect(.init(id: 2, delay: nil))))
        #expect(machine.submit(requests[2], pick: Self.first)
            == Machine.Action(request: .scheduleDeadline(requests[2]), connection: .none))
        let connection: HTTP2ConnectionID = 1
        #expect(machine.connectSucceeded(id: 1)
            == Machine.Action(request: .executeWaiting(Array(requests[0..<3]), on: connection), connection: .none))
        #expect(machine.submit(requests[3], pick: Self.first)
            == Machine.Action(request: .execute(requests[3], on: connection), connection: .none))
    }

    @Test("defect 1: a connection that closed (or went away) while opening is never added; its success closes it")
    func closedWhileOpening() {
        var machine = Machine(connections: 1, retryLimit: 1)
        let outcomes = Outcomes()
        _ = machine.submit(Self.request(outcomes, 0), pick: Self.first)
        // GOAWAY handled before the pool heard of the success: the attempt still counts until it reports.
        #expect(machine.connectionUnusable(id: 1) == Machine.Action(request: .none, connection: .none))
        let connection: HTTP2ConnectionID = 1
        // Requests still wait: the late connection is closed and a new attempt replaces it.
        #expect(machine.connectSucceeded(id: 1)
            == Machine.Action(request: .none, connection: .close(connection, replacement: .init(id: 2, delay: nil))))
        #expect(machine.ready.isEmpty && machine.waitingCount == 1)
    }

    @Test("a connection going away is forgotten; requests then wait for a replacement")
    func goingAway() {
        var machine = Machine(connections: 1, retryLimit: 1)
        let outcomes = Outcomes()
        _ = machine.submit(Self.request(outcomes, 0), pick: Self.first)
        _ = machine.connectSucceeded(id: 1)
        #expect(machine.connectionUnusable(id: 1) == .none, "no request waits: no replacement yet")
        #expect(machine.ready.isEmpty)
        let next = Self.request(outcomes, 1)
        #expect(machine.submit(next, pick: Self.first)
            == Machine.Action(request: .scheduleDeadline(next), connection: .connect(.init(id: 2, delay: nil))))
        #expect(machine.connectionUnusable(id: 5) == Machine.Action(request: .none, connection: .none),
                "an attempt is under way: an unknown id opens no other")
    }

    @Test("failed attempts back off (the delay is the connect action's timer); the retry limit fails the waiting requests, not processed; the next request tries again")
    func retryLimit() {
        var machine = Machine(connections: 1, retryLimit: 3, jitter: { 1.0 })
        let outcomes = Outcomes()
        let waiting = Self.request(outcomes, 0)
        _ = machine.submit(waiting, pick: Self.first)
        let error = HTTP2ClientError(.connectFailed, possiblyProcessed: false, "refused")
        #expect(machine.connectFailed(id: 1, error: error)
            == Machine.Action(request: .none, connection: .connect(.init(id: 2, delay: .milliseconds(100)))))
        #expect(machine.connectFailed(id: 2, error: error)
            == Machine.Action(request: .none, connection: .connect(.init(id: 3, delay: .milliseconds(200)))))
        let third = machine.connectFailed(id: 3, error: error)
        #expect(third == Machine.Action(request: .fail([waiting], error), connection: .none))
        guard case .fail(_, let failure) = third.request else { Issue.record("not a failure: \(third)"); return }
        #expect(failure.kind == .connectFailed && !failure.possiblyProcessed)
        let again = Self.request(outcomes, 1)
        #expect(machine.submit(again, pick: Self.first)
            == Machine.Action(request: .scheduleDeadline(again), connection: .connect(.init(id: 4, delay: nil))))
        let connection: HTTP2ConnectionID = 4
        #expect(machine.connectSucceeded(id: 4)
            == Machine.Action(request: .executeWaiting([again], on: connection), connection: .none))
        #expect(machine.consecutiveFailures == 0)
    }

    @Test("a request that completed while it waited (its deadline) is not handed to the new connection")
    func doneRequestsAreDropped() {
        var machine = Machine(connections: 1, retryLimit: 1)
        let outcomes = Outcomes()
        let expired = Self.request(outcomes, 0)
        let live = Self.request(outcomes, 1)
        _ = machine.submit(expired, pick: Self.first)
        _ = machine.submit(live, pick: Self.first)
        expired.fail(HTTP2ClientError(.deadlineExceeded, possiblyProcessed: false, "deadline"))
        let connection: HTTP2ConnectionID = 1
        #expect(machine.connectSucceeded(id: 1)
            == Machine.Action(request: .executeWaiting([live], on: connection), connection: .none))
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
        _ = machine.connectSucceeded(id: 2)
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
            let delay = HTTP2ReconnectBackoff.delay(failures: id, random: 1.0)
            #expect(machine.connectFailed(id: id, error: error)
                == Machine.Action(request: .none, connection: .connect(.init(id: id + 1, delay: delay))))
        }
        #expect(machine.waitingCount == 1)
    }

    @Test("an address the filter refuses fails the waiting requests at once")
    func addressNotAllowed() {
        var machine = Machine(connections: 1, retryLimit: nil)
        let outcomes = Outcomes()
        let waiting = Self.request(outcomes, 0)
        _ = machine.submit(waiting, pick: Self.first)
        let refusal = HTTP2ClientError(.addressNotAllowed, possiblyProcessed: false, "no")
        #expect(machine.connectFailed(id: 1, error: refusal)
            == Machine.Action(request: .fail([waiting], refusal), connection: .none))
    }

    @Test("defect 10: after shutdown nothing is accepted and a connection that finishes opening is closed")
    func shutdown() {
        var machine = Machine(connections: 1, retryLimit: 1)
        let outcomes = Outcomes()
        let waiting = Self.request(outcomes, 0)
        _ = machine.submit(waiting, pick: Self.first)
        #expect(machine.shutdown() == Machine.Action(request: .fail([waiting], Self.shutDown), connection: .none))
        let late = Self.request(outcomes, 1)
        #expect(machine.submit(late, pick: Self.first) == Machine.Action(request: .fail([late], Self.shutDown), connection: .none))
        let connection: HTTP2ConnectionID = 1
        #expect(machine.connectSucceeded(id: 1)
            == Machine.Action(request: .none, connection: .close(connection, replacement: nil)))
        #expect(machine.ready.isEmpty)
    }

    @Test("a request handed back unprocessed is submitted again (to a ready connection, or to wait) within its bounds; past them it fails with the connection's error")
    func handBack() {
        var machine = Machine(connections: 1, retryLimit: 1)
        let outcomes = Outcomes()
        let request = Self.request(outcomes, 0)
        _ = machine.submit(request, pick: Self.first)
        _ = machine.connectSucceeded(id: 1)
        let refused = HTTP2ClientError(.goAway, possiblyProcessed: false, "above the last stream id")
        let connection: HTTP2ConnectionID = 1
        // Refused once (written): sent again.
        #expect(machine.handBack(request, error: refused, written: true, pick: Self.first)
            == Machine.Action(request: .execute(request, on: connection), connection: .none))
        // Refused twice: the pool does not send it again; the caller sees it not processed.
        #expect(machine.handBack(request, error: refused, written: true, pick: Self.first)
            == Machine.Action(request: .fail([request], refused), connection: .none))
        // Never written: handed back up to maxHandBacks in all, waiting for a connection when none is ready.
        let queued = Self.request(outcomes, 1)
        let lost = HTTP2ClientError(.connectionLost, possiblyProcessed: false, "closed before it was written")
        #expect(machine.connectionUnusable(id: 1) == .none)
        #expect(machine.handBack(queued, error: lost, written: false, pick: Self.first)
            == Machine.Action(request: .scheduleDeadline(queued), connection: .connect(.init(id: 2, delay: nil))))
        for _ in 1..<HTTP2RequestContext.maxHandBacks {
            #expect(machine.handBack(queued, error: lost, written: false, pick: Self.first).request == .scheduleDeadline(queued))
        }
        #expect(machine.handBack(queued, error: lost, written: false, pick: Self.first)
            == Machine.Action(request: .fail([queued], lost), connection: .none))
    }

    @Test("shutdown: the waiting requests fail (shut down, not processed); at the end every ready connection is closed by id, once")
    func shutdownClosesAll() {
        var machine = Machine(connections: 2, retryLimit: 1)
        let outcomes = Outcomes()
        _ = machine.submit(Self.request(outcomes, 0), pick: Self.first)
        _ = machine.submit(Self.request(outcomes, 1), pick: Self.first)
        _ = machine.connectSucceeded(id: 1)
        _ = machine.connectSucceeded(id: 2)
        #expect(machine.shutdown() == Machine.Action.none, "nothing waits")
        #expect(machine.closeAll() == Machine.Action(request: .none, connection: .closeAll([1, 2])))
        #expect(machine.closeAll() == Machine.Action.none)
    }

    @Test("a failed attempt after shutdown fails what still waits with shut-down, and opens nothing")
    func failedAfterShutdown() {
        var machine = Machine(connections: 1, retryLimit: nil)
        let outcomes = Outcomes()
        _ = machine.submit(Self.request(outcomes, 0), pick: Self.first)
        _ = machine.shutdown()
        #expect(machine.connectFailed(id: 1, error: HTTP2ClientError(.connectFailed, possiblyProcessed: false, "x"))
            == Machine.Action.none)
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
