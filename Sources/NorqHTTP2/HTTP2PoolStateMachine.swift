package import NIOCore

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

/// The connections of one pool without I/O: which exist (connecting, ready), the requests waiting for one,
/// consecutive connection failures, shutdown. Every input returns what to do; the pool does it outside its lock.
///
/// Rules: at most `connections` connections (connecting or ready); a connection closed or going away while it was
/// still connecting is never added (its success is answered with `close`); after a failed attempt the next waits
/// ``HTTP2ReconnectBackoff``; after `retryLimit` consecutive failures the waiting requests fail and no attempt is
/// made until the next request; after shutdown nothing new is accepted and late connections are closed.
package struct HTTP2PoolStateMachine<Connection: AnyObject> {
    package struct ConnectOrder: Sendable, Equatable {
        package var id: Int
        package var delay: Duration?

        package init(id: Int, delay: Duration?) {
            self.id = id
            self.delay = delay
        }
    }

    package struct Decision {
        /// Send the request on this connection.
        package var dispatchTo: Connection?
        /// Start this connection attempt.
        package var connect: ConnectOrder?
        /// Fail the request(s) with this.
        package var failure: HTTP2ClientError?
        /// Requests to send on `dispatchTo`, or to fail with `failure`.
        package var requests: [HTTP2RequestContext] = []
        /// Close this connection (it finished opening after shutdown, or closed while opening).
        package var close: Connection?
    }

    private let maxConnections: Int
    private let retryLimit: Int?
    private(set) package var ready: [Connection] = []
    private var readyIDs: [Int] = []
    private var connecting: Set<Int> = []
    private var closedWhileConnecting: Set<Int> = []
    private var waiting: [HTTP2RequestContext] = []
    private(set) package var consecutiveFailures = 0
    /// Why the last connection attempt failed, while no attempt has succeeded since (for health checks).
    private(set) package var lastConnectFailure: String?
    private var nextID = 0
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
    package mutating func submit(_ request: HTTP2RequestContext, pick: ([Connection], Int) -> Connection) -> Decision {
        var decision = Decision()
        guard !isShutDown else {
            decision.failure = HTTP2ClientError(.shutDown, possiblyProcessed: false, "the HTTP/2 client is shut down")
            return decision
        }
        decision.connect = connectIfRoom(delay: nil)
        if !ready.isEmpty {
            turn &+= 1
            decision.dispatchTo = pick(ready, turn)
            return decision
        }
        waiting.append(request)
        return decision
    }

    /// Opens one more connection when the pool has room and no attempt waits out a backoff.
    private mutating func connectIfRoom(delay: Duration?) -> ConnectOrder? {
        guard !isShutDown, ready.count + connecting.count < maxConnections else { return nil }
        nextID += 1
        connecting.insert(nextID)
        return ConnectOrder(id: nextID, delay: delay)
    }

    package mutating func connectSucceeded(id: Int, connection: Connection) -> Decision {
        var decision = Decision()
        connecting.remove(id)
        if isShutDown || closedWhileConnecting.remove(id) != nil {
            decision.close = connection
            if !waiting.isEmpty { decision.connect = connectIfRoom(delay: nil) }
            return decision
        }
        consecutiveFailures = 0
        lastConnectFailure = nil
        ready.append(connection)
        readyIDs.append(id)
        decision.dispatchTo = connection
        decision.requests = waiting.filter { !$0.isDone }
        waiting.removeAll()
        return decision
    }

    package mutating func connectFailed(id: Int, error: HTTP2ClientError) -> Decision {
        var decision = Decision()
        connecting.remove(id)
        closedWhileConnecting.remove(id)
        waiting.removeAll { $0.isDone }
        if isShutDown {
            decision.requests = waiting
            waiting.removeAll()
            decision.failure = HTTP2ClientError(.shutDown, possiblyProcessed: false, "the HTTP/2 client is shut down")
            return decision
        }
        consecutiveFailures += 1
        lastConnectFailure = error.message
        let limitReached = retryLimit.map { consecutiveFailures >= $0 } ?? false
        if error.kind == .addressNotAllowed || (limitReached && ready.isEmpty) {
            // Give up on the waiting requests; the next request tries again.
            decision.requests = waiting
            waiting.removeAll()
            decision.failure = error
            return decision
        }
        if !waiting.isEmpty {
            decision.connect = connectIfRoom(delay: HTTP2ReconnectBackoff.delay(failures: consecutiveFailures, random: jitter()))
        }
        return decision
    }

    /// A connection takes no new requests (GOAWAY, error, closed): forgotten; a replacement when requests wait.
    package mutating func connectionUnusable(id: Int) -> Decision {
        var decision = Decision()
        if let index = readyIDs.firstIndex(of: id) {
            readyIDs.remove(at: index)
            ready.remove(at: index)
        } else if connecting.contains(id) {
            closedWhileConnecting.insert(id)
        }
        if !waiting.isEmpty { decision.connect = connectIfRoom(delay: nil) }
        return decision
    }

    /// Refuses new requests; the waiting ones fail. Returns them.
    package mutating func shutdown() -> [HTTP2RequestContext] {
        isShutDown = true
        let failed = waiting
        waiting.removeAll()
        return failed
    }

    /// The ready connections, forgotten (to close at the end of a shutdown).
    package mutating func takeConnections() -> [Connection] {
        let all = ready
        ready.removeAll()
        readyIDs.removeAll()
        return all
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
