import NIOCore

/// What a pool says of its connections, for readiness checks.
package struct HTTP2PoolHealth: Sendable, Equatable {
    package var readyConnections: Int
    package var consecutiveFailures: Int
    /// Set when no connection is ready and the last attempt failed: why.
    package var lastConnectFailure: String?
    package var isHealthy: Bool { lastConnectFailure == nil }
}

/// Delay before the next connection attempt after `failures` consecutive failed ones: exponential from 100 ms,
/// capped at 30 s, with jitter in [50%, 100%]. Pure: `random` is the caller's.
package enum HTTP2ReconnectBackoff {
    package static func delay(failures: Int, random: Double = Double.random(in: 0.5...1.0)) -> Duration {
        guard failures > 0 else { return .zero }
        let exponent = min(failures - 1, 20)
        let base = min(100.0 * Double(1 << exponent), 30_000.0)
        return .milliseconds(Int64(base * min(max(random, 0), 1)))
    }
}

/// Names one connection of a pool: unique within the pool, never reused. The pool's state machine knows connections
/// only by it; the pool keeps the connection objects, and a connection reports to the pool with it
/// (``HTTP2ConnectionDelegate``).
package typealias HTTP2ConnectionID = Int

/// The connections of one pool without I/O and without connection objects: which ids exist (connecting, ready),
/// the requests waiting for one, consecutive connection failures, shutdown. Every input returns one ``Action``, a
/// closed pair of what to do with requests and with connections, naming connections by ``HTTP2ConnectionID``
/// (AsyncHTTPClient's `HTTPConnectionPool.StateMachine` is the model); the pool carries it out outside its lock.
/// Timers are actions too: a reconnect backoff is the `delay` of a ``ConnectionAction/connect(_:)`` order, a
/// request's wait for a connection is ``RequestAction/scheduleDeadline(_:)``.
///
/// Rules: at most `connections` connections (connecting or ready); a connection closed or going away while it was
/// still connecting is never added (its success is answered with `close`); after a failed attempt the next waits
/// ``HTTP2ReconnectBackoff``; after `retryLimit` consecutive failures the waiting requests fail and no attempt is
/// made until the next request; after shutdown nothing new is accepted and late connections are closed.
package struct HTTP2PoolStateMachine {
    package struct ConnectOrder: Sendable, Equatable {
        package var id: HTTP2ConnectionID
        package var delay: Duration?

        package init(id: HTTP2ConnectionID, delay: Duration?) {
            self.id = id
            self.delay = delay
        }
    }

    /// What to do after an input: one request action and one connection action, carried out connection first.
    package struct Action {
        package var request: RequestAction
        package var connection: ConnectionAction

        package init(request: RequestAction, connection: ConnectionAction) {
            self.request = request
            self.connection = connection
        }

        package static var none: Action { Action(request: .none, connection: .none) }
    }

    /// What to do with requests.
    package enum RequestAction {
        case none
        /// Send the request just submitted on this ready connection.
        case execute(HTTP2RequestContext, on: HTTP2ConnectionID)
        /// Send the requests that waited for a connection on the one that just opened.
        case executeWaiting([HTTP2RequestContext], on: HTTP2ConnectionID)
        /// No connection is ready: the request waits; arm its deadline timer.
        case scheduleDeadline(HTTP2RequestContext)
        /// Fail these requests with this error (not processed: none was written).
        case fail([HTTP2RequestContext], HTTP2ClientError)
    }

    /// What to do with connections.
    package enum ConnectionAction {
        case none
        /// Start this connection attempt (after its `delay`, the reconnect backoff, when it has one).
        case connect(ConnectOrder)
        /// Close this connection (it finished opening after shutdown, or closed while opening: the pool never
        /// added it), and start the `replacement` attempt when requests still wait.
        case close(HTTP2ConnectionID, replacement: ConnectOrder?)
        /// The end of a shutdown: close these connections (the pool forgot them) and wait for each to close.
        case closeAll([HTTP2ConnectionID])
    }

    private let maxConnections: Int
    private let retryLimit: Int?
    /// The ready connections, in the order they opened: what ``submit(_:pick:)`` picks from.
    private(set) package var ready: [HTTP2ConnectionID] = []
    private var connecting: Set<HTTP2ConnectionID> = []
    private var closedWhileConnecting: Set<HTTP2ConnectionID> = []
    private var waiting: [HTTP2RequestContext] = []
    private(set) package var consecutiveFailures = 0
    /// Why the last connection attempt failed, while no attempt has succeeded since (for health checks).
    private(set) package var lastConnectFailure: String?
    private var nextID: HTTP2ConnectionID = 0
    private(set) package var isShutDown = false
    private var turn = 0
    /// Random in [0.5, 1] for the backoff; injectable for tests.
    private let jitter: @Sendable () -> Double

    package init(connections: Int, retryLimit: Int?,
                 jitter: @escaping @Sendable () -> Double = { Double.random(in: 0.5...1.0) }) {
        self.maxConnections = max(1, connections)
        self.retryLimit = retryLimit.map { max(1, $0) }
        self.jitter = jitter
    }

    package var waitingCount: Int { waiting.count }

    /// Healthy unless the last connection attempt failed and no connection is ready: a pool that has not
    /// connected yet (nothing sent) is healthy, as is one whose connections work while another attempt failed.
    package var health: HTTP2PoolHealth {
        HTTP2PoolHealth(readyConnections: ready.count, consecutiveFailures: consecutiveFailures,
                        lastConnectFailure: ready.isEmpty ? lastConnectFailure : nil)
    }
    package var connectingCount: Int { connecting.count }

    /// A new request (or one handed back): a ready connection (chosen by `pick`), else it waits.
    package mutating func submit(_ request: HTTP2RequestContext,
                                 pick: ([HTTP2ConnectionID], Int) -> HTTP2ConnectionID) -> Action {
        guard !isShutDown else { return Action(request: .fail([request], Self.shutDownError), connection: .none) }
        let connection = Self.connecting(connectIfRoom(delay: nil))
        if !ready.isEmpty {
            turn &+= 1
            return Action(request: .execute(request, on: pick(ready, turn)), connection: connection)
        }
        waiting.append(request)
        return Action(request: .scheduleDeadline(request), connection: connection)
    }

    private static var shutDownError: HTTP2ClientError {
        HTTP2ClientError(.shutDown, possiblyProcessed: false, "the HTTP/2 client is shut down")
    }

    private static func connecting(_ order: ConnectOrder?) -> ConnectionAction {
        order.map { .connect($0) } ?? .none
    }

    /// Opens one more connection when the pool has room and no attempt waits out a backoff.
    private mutating func connectIfRoom(delay: Duration?) -> ConnectOrder? {
        guard !isShutDown, ready.count + connecting.count < maxConnections else { return nil }
        nextID += 1
        connecting.insert(nextID)
        return ConnectOrder(id: nextID, delay: delay)
    }

    /// Attempt `id` opened its connection: ready, and the waiting requests go to it; or closed at once when the
    /// pool is shut down or the connection closed while it opened (then no ``Action/connection`` names it as ready).
    package mutating func connectSucceeded(id: HTTP2ConnectionID) -> Action {
        connecting.remove(id)
        if isShutDown || closedWhileConnecting.remove(id) != nil {
            let replacement = waiting.isEmpty ? nil : connectIfRoom(delay: nil)
            return Action(request: .none, connection: .close(id, replacement: replacement))
        }
        consecutiveFailures = 0
        lastConnectFailure = nil
        ready.append(id)
        let requests = waiting.filter { !$0.isDone }
        waiting.removeAll()
        return Action(request: requests.isEmpty ? .none : .executeWaiting(requests, on: id), connection: .none)
    }

    package mutating func connectFailed(id: HTTP2ConnectionID, error: HTTP2ClientError) -> Action {
        connecting.remove(id)
        closedWhileConnecting.remove(id)
        waiting.removeAll { $0.isDone }
        if isShutDown {
            return Action(request: failWaiting(Self.shutDownError), connection: .none)
        }
        consecutiveFailures += 1
        lastConnectFailure = error.message
        let limitReached = retryLimit.map { consecutiveFailures >= $0 } ?? false
        if error.kind == .addressNotAllowed || (limitReached && ready.isEmpty) {
            // Give up on the waiting requests; the next request tries again.
            return Action(request: failWaiting(error), connection: .none)
        }
        guard !waiting.isEmpty else { return .none }
        let delay = HTTP2ReconnectBackoff.delay(failures: consecutiveFailures, random: jitter())
        return Action(request: .none, connection: Self.connecting(connectIfRoom(delay: delay)))
    }

    /// The waiting requests, failed with `error` (none: no action).
    private mutating func failWaiting(_ error: HTTP2ClientError) -> RequestAction {
        guard !waiting.isEmpty else { return .none }
        defer { waiting.removeAll() }
        return .fail(waiting, error)
    }

    /// A connection takes no new requests (GOAWAY, error, closed): forgotten; a replacement when requests wait.
    package mutating func connectionUnusable(id: HTTP2ConnectionID) -> Action {
        if let index = ready.firstIndex(of: id) {
            ready.remove(at: index)
        } else if connecting.contains(id) {
            closedWhileConnecting.insert(id)
        }
        guard !waiting.isEmpty else { return .none }
        return Action(request: .none, connection: Self.connecting(connectIfRoom(delay: nil)))
    }

    /// A connection handed back a request the server did not process (``HTTP2ConnectionStateMachine/Action/requeue(_:_:written:)``):
    /// submitted again while the request's bounds allow (``HTTP2RequestContext/takeRequeue(written:)``), else it
    /// fails with `error` (not processed).
    package mutating func handBack(_ request: HTTP2RequestContext, error: HTTP2ClientError, written: Bool,
                                   pick: ([HTTP2ConnectionID], Int) -> HTTP2ConnectionID) -> Action {
        guard request.takeRequeue(written: written) else {
            return Action(request: .fail([request], error), connection: .none)
        }
        return submit(request, pick: pick)
    }

    /// Refuses new requests from now on: the waiting ones fail (shut down, not processed).
    package mutating func shutdown() -> Action {
        isShutDown = true
        return Action(request: failWaiting(Self.shutDownError), connection: .none)
    }

    /// The end of a shutdown, once the requests in flight completed: the ready connections, forgotten, to close.
    package mutating func closeAll() -> Action {
        let all = ready
        ready.removeAll()
        return Action(request: .none, connection: all.isEmpty ? .none : .closeAll(all))
    }

    /// The connection for the next request: round robin among the connections on the calling event loop
    /// (`isLocal`) that have room (`load` below `capacity`), so that a request started from a completion on an
    /// event loop stays on that thread; when none has room, the least loaded connection of all. Inlined into the
    /// pool's call: through opaque closures every connection looked at was retained and released, connections
    /// of other event loops included.
    @inline(__always)
    package static func pick<C>(from ready: [C], turn: Int, capacity: Int,
                                isLocal: (C) -> Bool, load: (C) -> Int) -> C {
        let count = ready.count
        let start = Int(UInt(bitPattern: turn) % UInt(count))
        guard count > 1 else { return ready[0] }
        var roomy = 0
        for connection in ready where isLocal(connection) && load(connection) < capacity { roomy += 1 }
        if roomy > 0 {
            var skip = Int(UInt(bitPattern: turn) % UInt(roomy))
            for connection in ready where isLocal(connection) && load(connection) < capacity {
                if skip == 0 { return connection }
                skip -= 1
            }
        }
        var best = ready[start]
        var bestLoad = load(best)
        for offset in 1..<count where bestLoad > 0 {
            let connection = ready[(start + offset) % count]
            let connectionLoad = load(connection)
            if connectionLoad < bestLoad {
                best = connection
                bestLoad = connectionLoad
            }
        }
        return best
    }
}

// Requests by identity (the same object, not an equal one), connections by id: what tests compare actions with.
extension HTTP2PoolStateMachine.Action: Equatable {}

extension HTTP2PoolStateMachine.RequestAction: Equatable {
    package static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case (.none, .none): true
        case (.execute(let a, let c), .execute(let b, let d)): a === b && c == d
        case (.executeWaiting(let a, let c), .executeWaiting(let b, let d)):
            a.count == b.count && zip(a, b).allSatisfy { $0 === $1 } && c == d
        case (.scheduleDeadline(let a), .scheduleDeadline(let b)): a === b
        case (.fail(let a, let e), .fail(let b, let f)):
            a.count == b.count && zip(a, b).allSatisfy { $0 === $1 } && e.kind == f.kind
                && e.possiblyProcessed == f.possiblyProcessed
        default: false
        }
    }
}

extension HTTP2PoolStateMachine.ConnectionAction: Equatable {
    package static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case (.none, .none): true
        case (.connect(let a), .connect(let b)): a == b
        case (.close(let a, let c), .close(let b, let d)): a == b && c == d
        case (.closeAll(let a), .closeAll(let b)): a == b
        default: false
        }
    }
}
