package import Logging
package import NIOCore
import NIOPosix
package import NIOSSL
import Synchronization

/// What a connection tells its pool, naming itself by id (AsyncHTTPClient's `HTTP2ConnectionDelegate` is the
/// model): the only way back from a connection to its pool. Called on the connection's event loop.
protocol HTTP2ConnectionDelegate: AnyObject, Sendable {
    /// The connection hands back a request the server did not process (see
    /// ``HTTP2ConnectionStateMachine/Action/requeue(_:_:written:)``): send it again, else fail it with `error`.
    func connection(_ id: HTTP2ConnectionID, handsBack request: HTTP2RequestContext, error: HTTP2ClientError,
                    written: Bool)
    /// The connection takes no new requests (GOAWAY, a protocol error, idle): forget it.
    func connectionGoingAway(_ id: HTTP2ConnectionID)
    /// The connection's channel closed (perhaps before the pool heard it opened).
    func connectionClosed(_ id: HTTP2ConnectionID)
}

/// The HTTP/2 connections to one origin: up to ``HTTP2ClientConfiguration/connections``, opened on demand,
/// replaced when they close or go away, reconnected with backoff (``HTTP2PoolStateMachine``, which knows them by
/// ``HTTP2ConnectionID``; the pool keeps the objects in ``ConnectionTable``). Connections report back through
/// ``HTTP2ConnectionDelegate``. Connection attempts run as child tasks of one task the pool owns (started with the
/// first attempt, cancelled by ``shutdown()``).
package final class HTTP2ConnectionPool: HTTP2ConnectionDelegate {
    package let configuration: HTTP2ClientConfiguration
    let logger: Logger
    let group: any EventLoopGroup
    private let sslContext: Result<NIOSSLContext, HTTP2ClientError>
    /// The state machine and the connection objects of the ids it names as ready, changed together.
    private struct State {
        var machine: HTTP2PoolStateMachine
        var connections = ConnectionTable()
    }
    private let state: Mutex<State>
    private let capacity: Int
    /// Requests accepted and not yet complete: what each request holds of the pool (not the pool itself).
    private let outstanding = HTTP2OutstandingRequests()
    private let orders: AsyncStream<HTTP2PoolStateMachine.ConnectOrder>
    private let ordersContinuation: AsyncStream<HTTP2PoolStateMachine.ConnectOrder>.Continuation
    private let runTask = Mutex<Task<Void, Never>?>(nil)
    /// The group's event loops, and which of them each connection of this pool (open or opening) runs on: a new
    /// connection goes to the loop holding the fewest. `group.next()` (shared with every other user of the group,
    /// and called for each request waiting for a connection) put three of four connections on one of two loops
    /// in most runs, so one core did nearly three quarters of the pool's work.
    private let loops: [any EventLoop]
    private let placement = Mutex<[Int: Int]>([:])

    /// - Parameters:
    ///   - configuration: the origin and every bound; ALPN `h2` is added to its TLS configuration.
    package convenience init(configuration: HTTP2ClientConfiguration, eventLoopGroup: any EventLoopGroup,
                             logger: Logger) {
        var tls = configuration.tls
        tls.applicationProtocols = ["h2"]
        let context: Result<NIOSSLContext, HTTP2ClientError>
        do {
            context = .success(try NIOSSLContext(configuration: tls))
        } catch {
            context = .failure(HTTP2ClientError(.connectFailed, possiblyProcessed: false, "invalid TLS configuration: \(error)"))
        }
        self.init(configuration: configuration, sslContext: context, eventLoopGroup: eventLoopGroup, logger: logger)
    }

    /// With a TLS context made (and validated) by the caller, shared by its pools. It must offer ALPN `h2`.
    package convenience init(configuration: HTTP2ClientConfiguration, sslContext: NIOSSLContext,
                             eventLoopGroup: any EventLoopGroup, logger: Logger) {
        self.init(configuration: configuration, sslContext: .success(sslContext), eventLoopGroup: eventLoopGroup,
                  logger: logger)
    }

    private init(configuration: HTTP2ClientConfiguration, sslContext: Result<NIOSSLContext, HTTP2ClientError>,
                 eventLoopGroup: any EventLoopGroup, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        self.group = eventLoopGroup
        self.sslContext = sslContext
        self.capacity = max(1, configuration.maxConcurrentStreams)
        self.loops = Array(eventLoopGroup.makeIterator())
        self.state = Mutex(State(machine: HTTP2PoolStateMachine(connections: configuration.connections,
                                                                retryLimit: configuration.connectionRetryLimit)))
        let (orders, continuation) = AsyncStream<HTTP2PoolStateMachine.ConnectOrder>
            .makeStream(bufferingPolicy: .unbounded)
        self.orders = orders
        self.ordersContinuation = continuation
    }

    // MARK: requests

    /// The one bridge from a provider to HTTP/2 (AsyncHTTPClient's `execute(_:deadline:)` is the model): sends
    /// `request` once, within the send's `deadline` and the request's own ``HTTP2Request/timeout`` (whichever
    /// comes first: ``HTTP2Request/deadline(within:now:)``, the only place that rule is written), and calls
    /// `completion` exactly once, on an event loop or before this returns, with the answer (any status) or an
    /// ``HTTP2ClientError`` saying whether the server may have processed it. A request whose deadline has passed
    /// is never written: it fails, not processed, when a connection takes it (or when its timer fires while it
    /// waits for one). A head whose fields break RFC 9113 §8.2.1 (``HTTP2FieldRules``) fails at once with
    /// ``HTTP2ClientError/Kind/invalidRequest``: no connection is touched.
    ///
    /// - Parameter now: a read of the clock the caller has just made, if it has one (saves a read per request).
    package func execute(_ request: HTTP2Request, deadline: ContinuousClock.Instant,
                         now: ContinuousClock.Instant = .now, completion: @escaping HTTP2Completion) {
        guard !outstanding.isShuttingDown else {
            completion(.failure(HTTP2ClientError(.shutDown, possiblyProcessed: false, "the HTTP/2 client is shut down")))
            return
        }
        if let problem = HTTP2FieldRules.problem(in: request.head) {
            completion(.failure(HTTP2ClientError(.invalidRequest, possiblyProcessed: false, problem)))
            return
        }
        outstanding.started()
        let context = HTTP2RequestContext(head: request.head, body: request.body,
                                          deadline: request.deadline(within: deadline, now: now), outstanding: outstanding,
                                          completion: completion)
        submit(context)
    }

    /// ``execute(_:deadline:now:completion:)`` for async callers: the answer, or the failure thrown.
    package func execute(_ request: HTTP2Request,
                         deadline: ContinuousClock.Instant) async throws(HTTP2ClientError) -> HTTP2Response {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<HTTP2Response, HTTP2ClientError>, Never>) in
            execute(request, deadline: deadline) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    private func submit(_ request: HTTP2RequestContext) {
        // Compared by identity: `channel.eventLoop === currentLoop` retained and released the loop objects, which
        // every event loop's picks touched.
        let currentLoop = MultiThreadedEventLoopGroup.currentEventLoop.map { ObjectIdentifier($0) }
        let capacity = self.capacity
        let (action, connection) = state.withLock { state in
            // The closure reads `connections` while `machine` changes: disjoint stored properties of the state.
            let action = state.machine.submit(request) { ready, turn in
                HTTP2PoolStateMachine.pick(from: ready, turn: turn, capacity: capacity,
                                           isLocal: { state.connections[$0]?.eventLoopID == currentLoop },
                                           load: { state.connections[$0]?.load ?? .max })
            }
            return (action, state.connections[action.request.connectionID])
        }
        perform(action, connection: connection)
    }

    // MARK: what connections report (HTTP2ConnectionDelegate)

    /// A request a connection handed back unprocessed: sent again within ``HTTP2RequestContext``'s bounds, else
    /// failed with `error` (not processed).
    func connection(_ id: HTTP2ConnectionID, handsBack request: HTTP2RequestContext, error: HTTP2ClientError,
                    written: Bool) {
        let currentLoop = MultiThreadedEventLoopGroup.currentEventLoop.map { ObjectIdentifier($0) }
        let capacity = self.capacity
        let (action, connection) = state.withLock { state in
            let action = state.machine.handBack(request, error: error, written: written) { ready, turn in
                HTTP2PoolStateMachine.pick(from: ready, turn: turn, capacity: capacity,
                                           isLocal: { state.connections[$0]?.eventLoopID == currentLoop },
                                           load: { state.connections[$0]?.load ?? .max })
            }
            return (action, state.connections[action.request.connectionID])
        }
        perform(action, connection: connection)
    }

    /// The connection takes no new streams (GOAWAY or closed): forget it, open a replacement if requests wait.
    func connectionGoingAway(_ id: HTTP2ConnectionID) {
        perform(state.withLock { state in
            state.connections.remove(id)
            return state.machine.connectionUnusable(id: id)
        }, connection: nil)
    }

    /// The connection closed: forgotten, and its event loop holds one connection less.
    func connectionClosed(_ id: HTTP2ConnectionID) {
        connectionGoingAway(id)
        releaseEventLoop(ofConnection: id)
    }

    /// The pool's connection health (see ``HTTP2PoolHealth``).
    package var health: HTTP2PoolHealth { state.withLock { $0.machine.health } }

    // MARK: connections

    private func order(_ order: HTTP2PoolStateMachine.ConnectOrder) {
        runTask.withLock { task in
            if task == nil, !outstanding.isShuttingDown {
                task = Task { await self.run() }
            }
        }
        ordersContinuation.yield(order)
    }

    /// Runs the connection attempts, each as a child task, until shutdown.
    package func run() async {
        await withDiscardingTaskGroup { group in
            for await order in orders {
                group.addTask { await self.attempt(order) }
            }
            group.cancelAll()
        }
    }

    private func attempt(_ order: HTTP2PoolStateMachine.ConnectOrder) async {
        let action: HTTP2PoolStateMachine.Action
        var opened: HTTP2Connection?
        do {
            if let delay = order.delay, delay > .zero { try await Task.sleep(for: delay) }
            try Task.checkCancellation()
            let connection = try await connect(id: order.id)
            opened = connection
            action = state.withLock { state in
                let action = state.machine.connectSucceeded(id: order.id)
                if case .close = action.connection {} else { state.connections.add(connection) }
                return action
            }
            if case .close = action.connection {} else {
                logger.debug("HTTP/2 connection open", metadata: ["norq.http2.origin": "\(configuration.authority)",
                                                                 "norq.http2.connection": "\(order.id)"])
            }
        } catch {
            let failure = (error as? HTTP2ClientError)
                ?? HTTP2ClientError(.connectFailed, possiblyProcessed: false,
                                    "cannot connect to \(configuration.authority): \(error)")
            logger.notice("HTTP/2 connection failed", metadata: ["norq.http2.origin": "\(configuration.authority)",
                                                                 "norq.http2.error": "\(failure.message)"])
            releaseEventLoop(ofConnection: order.id)
            action = state.withLock { $0.machine.connectFailed(id: order.id, error: failure) }
        }
        perform(action, connection: opened)
    }

    /// Carries out what the state machine said, outside its lock: the connection action first (so that a request
    /// waiting for a connection is waiting when the attempt starts), then the request action. `connection`: the
    /// object of the one connection the action names (looked up under the lock, or just opened).
    private func perform(_ action: HTTP2PoolStateMachine.Action, connection: HTTP2Connection?) {
        switch action.connection {
        case .none:
            break
        case .connect(let next):
            order(next)
        case .close(let id, let replacement):
            if let connection, connection.id == id { connection.close() }
            if let replacement { order(replacement) }
        case .closeAll:
            break  // only from closeAll(), carried out by shutdown(), which waits for each channel to close
        }
        switch action.request {
        case .none:
            break
        case .execute(let request, let id):
            if let connection, connection.id == id {
                connection.enqueue(request)
            } else {
                request.fail(HTTP2ClientError(.connectionLost, possiblyProcessed: false, "connection \(id) is gone"))
            }
        case .executeWaiting(let requests, let id):
            if let connection, connection.id == id {
                connection.enqueue(requests)
            } else {
                for request in requests {
                    request.fail(HTTP2ClientError(.connectionLost, possiblyProcessed: false, "connection \(id) is gone"))
                }
            }
        case .scheduleDeadline(let request):
            request.armDeadline(on: group.next())
        case .fail(let requests, let error):
            for request in requests { request.fail(error) }
        }
    }

    /// The event loop for connection `id`: the group's loop holding the fewest of this pool's connections; among
    /// those, the one `group.next()` suggests (so that the single connections of several pools still spread over
    /// the group, as they did).
    private func placeConnection(id: Int) -> any EventLoop {
        let suggested = group.next()
        guard loops.count > 1 else { return suggested }
        let suggestedID = ObjectIdentifier(suggested)
        let preferred = loops.firstIndex { ObjectIdentifier($0) == suggestedID }
        let count = loops.count
        let index = placement.withLock { placement in
            let index = Self.leastUsedLoop(placement, loops: count, preferring: preferred)
            placement[id] = index
            return index
        }
        return loops[index]
    }

    /// Of `loops` event loops, the index of one holding the fewest connections in `placement` (connection id ->
    /// loop index): `preferring` when it is one of those, else the first.
    package static func leastUsedLoop(_ placement: [Int: Int], loops: Int, preferring: Int? = nil) -> Int {
        guard loops > 1 else { return 0 }
        var counts = [Int](repeating: 0, count: loops)
        for loop in placement.values where loop >= 0 && loop < loops { counts[loop] += 1 }
        let fewest = counts.min() ?? 0
        if let preferring, preferring >= 0, preferring < loops, counts[preferring] == fewest { return preferring }
        return counts.firstIndex(of: fewest) ?? 0
    }

    /// Connection `id` closed (or never opened): its loop holds one connection less.
    func releaseEventLoop(ofConnection id: Int) {
        _ = placement.withLock { $0.removeValue(forKey: id) }
    }

    private func connect(id: Int) async throws -> HTTP2Connection {
        let sslContext = try self.sslContext.get()
        let eventLoop = placeConnection(id: id)
        let configuration = self.configuration
        let timeout = configuration.connectTimeout.timeAmount
        let connectDeadline = NIODeadline.now() + timeout
        let target = configuration.proxy.map { ($0.host, $0.port) } ?? (configuration.host, configuration.port)
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
        let channel: any Channel
        if let filter = configuration.addressFilter {
            let address = try await NIOThreadPool.singleton.runIfActive {
                try SocketAddress.makeAddressResolvingHost(target.0, port: target.1)
            }
            guard filter(address) else {
                throw HTTP2ClientError(.addressNotAllowed, possiblyProcessed: false,
                                       "the address of \(target.0) is not allowed")
            }
            channel = try await bootstrap.connect(to: address).get()
        } else {
            channel = try await bootstrap.connect(host: target.0, port: target.1).get()
        }
        do {
            // The whole opening (proxy tunnel, TLS, the server's SETTINGS) within the connect timeout.
            let timeoutTask = eventLoop.scheduleTask(deadline: connectDeadline) { channel.close(promise: nil) }
            defer { timeoutTask.cancel() }
            if let proxy = configuration.proxy {
                let established = try await eventLoop.submit { () -> EventLoopFuture<Void> in
                    let handler = HTTPConnectProxyHandler(host: configuration.host, port: configuration.port,
                                                          proxy: proxy, eventLoop: eventLoop)
                    try channel.pipeline.syncOperations.addHandler(handler)
                    return handler.established.assumeIsolated().flatMap {
                        channel.pipeline.syncOperations.removeHandler(handler)
                    }.nonisolated()
                }.get()
                try await established.get()
            }
            let hostname = Self.isIPAddress(configuration.host) ? nil : configuration.host
            let logger = self.logger
            let handler: NIOLoopBound<HTTP2ConnectionHandler> = try await eventLoop.submit {
                let sync = channel.pipeline.syncOperations
                try sync.addHandler(HTTP2ReadFlushHandler(), position: .first)
                try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: hostname))
                let handler = HTTP2ConnectionHandler(configuration: configuration, eventLoop: eventLoop, logger: logger)
                try sync.addHandler(handler)
                return NIOLoopBound(handler, eventLoop: eventLoop)
            }.get()
            let connection = HTTP2Connection(id: id, channel: channel, handler: handler)
            let ready = try await eventLoop.submit { () -> EventLoopFuture<Void> in
                handler.value.attach(id: id, delegate: self, load: connection.publishedLoad)
                return handler.value.ready
            }.get()
            try await ready.get()
            return connection
        } catch {
            try? await channel.close()
            throw error
        }
    }

    static func isIPAddress(_ host: String) -> Bool {
        host.contains(":") || host.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || $0 == UInt8(ascii: ".") }
    }

    // MARK: shutdown

    /// Stops taking requests, waits for those in flight (each ends by its deadline at the latest), closes the
    /// connections and ends the connection attempts. Connections that finish opening later are closed at once.
    package func shutdown() async {
        outstanding.beginShutdown()
        perform(state.withLock { $0.machine.shutdown() }, connection: nil)
        await outstanding.waitUntilDrained()
        let connections = state.withLock { state -> [HTTP2Connection] in
            guard case .closeAll(let ids) = state.machine.closeAll().connection else { return [] }
            return ids.compactMap { state.connections.remove($0) }
        }
        for connection in connections { try? await connection.channel.close() }
        ordersContinuation.finish()
        runTask.withLock { $0 }?.cancel()
    }
}

/// The connection objects of a pool's ready connections, by id: a handful (``HTTP2ClientConfiguration/connections``),
/// so a linear scan of ids, which the pool's pick does per request, costs less than hashing them.
struct ConnectionTable {
    private var entries: [(id: HTTP2ConnectionID, connection: HTTP2Connection)] = []

    subscript(id: HTTP2ConnectionID?) -> HTTP2Connection? {
        guard let id else { return nil }
        for entry in entries where entry.id == id { return entry.connection }
        return nil
    }

    mutating func add(_ connection: HTTP2Connection) {
        remove(connection.id)
        entries.append((connection.id, connection))
    }

    @discardableResult
    mutating func remove(_ id: HTTP2ConnectionID) -> HTTP2Connection? {
        guard let index = entries.firstIndex(where: { $0.id == id }) else { return nil }
        return entries.remove(at: index).connection
    }
}

extension HTTP2PoolStateMachine.RequestAction {
    /// The connection this action sends requests on, if any.
    var connectionID: HTTP2ConnectionID? {
        switch self {
        case .execute(_, let id), .executeWaiting(_, let id): id
        case .none, .scheduleDeadline, .fail: nil
        }
    }
}

/// The requests a connection holds (queued or in flight), as its handler last published them: shared by the
/// connection (the pool reads it to balance) and its handler (which writes it), nothing else.
final class HTTP2ConnectionLoad: Sendable {
    let published = Atomic<Int>(0)
}

/// One connection of a pool: the channel and its handler (used only on its event loop). It holds nothing of the
/// pool; its handler reports to the pool by id (``HTTP2ConnectionDelegate``).
package final class HTTP2Connection: Sendable {
    let id: HTTP2ConnectionID
    let channel: any Channel
    private let handler: NIOLoopBound<HTTP2ConnectionHandler>

    init(id: HTTP2ConnectionID, channel: any Channel, handler: NIOLoopBound<HTTP2ConnectionHandler>) {
        self.id = id
        self.channel = channel
        self.handler = handler
        self.eventLoop = channel.eventLoop
        self.eventLoopID = ObjectIdentifier(channel.eventLoop)
    }

    /// The channel's event loop, kept (`channel.eventLoop` is a call through the protocol returning it retained).
    let eventLoop: any EventLoop
    /// Its identity: what `pick` compares with the calling thread's loop.
    let eventLoopID: ObjectIdentifier

    /// Requests handed over from other threads, taken by the event loop in batches: one `execute` per batch.
    private let inbox = Mutex<[HTTP2RequestContext]>([])
    private let inboxCount = Atomic<Int>(0)
    /// Requests queued or in flight on the connection, as its handler last published them.
    let publishedLoad = HTTP2ConnectionLoad()

    /// About how many requests this connection holds, read from any thread: what the pool balances on.
    var load: Int { publishedLoad.published.load(ordering: .relaxed) + inboxCount.load(ordering: .relaxed) }

    func enqueue(_ request: HTTP2RequestContext) {
        if eventLoop.inEventLoop {
            handler.value.enqueue(CollectionOfOne(request))
            return
        }
        inboxCount.add(1, ordering: .relaxed)
        let first = inbox.withLock { inbox in
            inbox.append(request)
            return inbox.count == 1
        }
        guard first else { return }
        scheduleInboxDrain()
    }

    func enqueue(_ requests: [HTTP2RequestContext]) {
        inboxCount.add(requests.count, ordering: .relaxed)
        let first = inbox.withLock { inbox in
            inbox.append(contentsOf: requests)
            return inbox.count == requests.count
        }
        guard first else { return }
        scheduleInboxDrain()
    }

    private func scheduleInboxDrain() {
        let handler = self.handler
        eventLoop.execute {
            let batch = self.inbox.withLock { inbox in
                let batch = inbox
                inbox.removeAll(keepingCapacity: true)
                return batch
            }
            self.inboxCount.subtract(batch.count, ordering: .relaxed)
            handler.value.enqueue(batch)
        }
    }

    func close() {
        channel.close(promise: nil)
    }
}
