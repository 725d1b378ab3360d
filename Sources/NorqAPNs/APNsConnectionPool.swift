import NorqCore
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// One HTTP/2 connection of a pool: the channel and its stream handler (used only on its event loop).
final class APNsConnection: Sendable {
    let id: Int
    let channel: any Channel
    private let handler: NIOLoopBound<APNsStreamHandler>
    private weak let pool: APNsConnectionPool?

    init(id: Int, channel: any Channel, handler: NIOLoopBound<APNsStreamHandler>, pool: APNsConnectionPool) {
        self.id = id
        self.channel = channel
        self.handler = handler
        self.pool = pool
    }

    var eventLoop: any EventLoop { channel.eventLoop }

    /// Requests handed over from other threads, taken by the event loop in batches: one `execute` per batch
    /// (scheduled by whoever finds the inbox empty), not one per request.
    private let inbox = Mutex<[APNsRequestBox]>([])
    /// Requests in the inbox, for `load`.
    private let inboxCount = Atomic<Int>(0)
    /// Requests queued or in flight on the connection, as its handler last published them.
    let publishedLoad = Atomic<Int>(0)

    /// About how many requests this connection holds (queued, in flight, or on their way to its event loop):
    /// what the pool balances on. Read from any thread; it may lag by the requests of one event-loop tick.
    var load: Int { publishedLoad.load(ordering: .relaxed) + inboxCount.load(ordering: .relaxed) }

    func enqueue(_ box: APNsRequestBox) {
        let handler = self.handler
        if eventLoop.inEventLoop {
            handler.value.enqueue(box)
            return
        }
        inboxCount.add(1, ordering: .relaxed)
        let first = inbox.withLock { inbox in
            inbox.append(box)
            return inbox.count == 1
        }
        guard first else { return }
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

    func cancelStream(_ id: Int32) {
        let handler = self.handler
        eventLoop.execute { handler.value.cancelStream(id) }
    }

    func close() {
        channel.close(promise: nil)
    }

    // Called by the handler, on the event loop.
    func requeue(_ boxes: [APNsRequestBox]) { pool?.requeue(boxes, from: self) }
    func draining() { pool?.connectionUnusable(self) }
    func closed(requeue boxes: [APNsRequestBox]) {
        pool?.connectionUnusable(self)
        pool?.requeue(boxes, from: self)
    }
}

/// Settings shared by the pools of one provider.
struct APNsConnectionSettings: Sendable {
    var sslContext: NIOSSLContext
    var proxy: APNsEndpoint?
    var tokenAuth: Bool
    var connectionsPerEndpoint: Int
    var maxStreamsPerConnection: Int
    var pingInterval: Duration
    var connectTimeout: Duration = .seconds(10)
}

/// The connections to one endpoint: up to `connectionsPerEndpoint`, opened on demand, replaced when they
/// close or drain, reconnected with jittered exponential backoff.
final class APNsConnectionPool: Sendable {
    let endpoint: APNsEndpoint
    let settings: APNsConnectionSettings
    let logger: Logger
    let group: any EventLoopGroup

    private struct State {
        var ready: [APNsConnection] = []
        var connecting = 0
        var waiting: [APNsRequestBox] = []
        var shutdown = false
        var failures = 0
        var reconnectScheduled = false
        var nextConnectionID = 0
        var roundRobin = 0
    }
    private let state = Mutex(State())

    init(endpoint: APNsEndpoint, settings: APNsConnectionSettings, logger: Logger, group: any EventLoopGroup) {
        self.endpoint = endpoint
        self.settings = settings
        self.logger = logger
        self.group = group
    }

    private enum Action {
        case none
        case fail(NorqError)
        case send(APNsConnection)
    }

    /// The connection for the next request: round robin among the connections on the calling event loop
    /// (`isLocal`) that have room (`load` below `capacity`), so that a request started from a completion on an
    /// event loop (the router's next target) stays on that thread instead of waking another one. When none has
    /// room, the least loaded connection of all: otherwise the event loop that answers fastest would pile its
    /// requests into its own connections' queues while the other event loop's connections idle.
    static func pick<Connection>(from ready: [Connection], turn: Int, capacity: Int,
                                 isLocal: (Connection) -> Bool, load: (Connection) -> Int) -> Connection {
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

    func submit(_ box: APNsRequestBox) {
        let currentLoop = MultiThreadedEventLoopGroup.currentEventLoop
        var connect = false
        let action: Action = state.withLock { s in
            if s.shutdown && s.ready.isEmpty {
                return .fail(NorqError(.providerShutDown, "the APNs provider is shut down"))
            }
            if !s.shutdown, s.ready.count + s.connecting < settings.connectionsPerEndpoint, !s.reconnectScheduled {
                s.connecting += 1
                connect = true
            }
            if !s.ready.isEmpty {
                s.roundRobin &+= 1
                return .send(Self.pick(from: s.ready, turn: s.roundRobin, capacity: settings.maxStreamsPerConnection,
                                       isLocal: { $0.eventLoop === currentLoop }, load: { $0.load }))
            }
            s.waiting.append(box)
            return .none
        }
        if connect { openConnection(after: nil) }
        switch action {
        case .none: box.armDeadline(on: group.next())  // waits for a connection
        case .fail(let error): box.complete(.failure(error))
        case .send(let connection): connection.enqueue(box)
        }
    }

    /// Requests a connection handed back (GOAWAY, refused stream, closed before sending): sent again elsewhere.
    func requeue(_ boxes: [APNsRequestBox], from connection: APNsConnection) {
        for box in boxes where !box.isDone {
            box.requeues.add(1, ordering: .relaxed)
            submit(box)
        }
    }

    /// The connection takes no new streams (GOAWAY or closed): forget it, open a replacement if needed.
    func connectionUnusable(_ connection: APNsConnection) {
        var connect = false
        state.withLock { s in
            s.ready.removeAll(where: { $0 === connection })
            if !s.shutdown, !s.waiting.isEmpty, s.ready.count + s.connecting < settings.connectionsPerEndpoint,
               !s.reconnectScheduled {
                s.connecting += 1
                connect = true
            }
        }
        if connect { openConnection(after: nil) }
    }

    private func openConnection(after delay: Duration?) {
        let id = state.withLock { s -> Int in
            s.nextConnectionID += 1
            return s.nextConnectionID
        }
        Task {
            if let delay { try? await Task.sleep(for: delay) }
            do {
                let connection = try await self.connect(id: id)
                let (boxes, keep) = self.state.withLock { s -> ([APNsRequestBox], Bool) in
                    s.connecting -= 1
                    s.failures = 0
                    s.reconnectScheduled = false
                    s.ready.append(connection)
                    let boxes = s.waiting
                    s.waiting.removeAll()
                    return (boxes, true)
                }
                _ = keep
                Metrics.connectionOpened()
                self.logger.debug("APNs connection open", metadata: ["endpoint": "\(self.endpoint)", "connection": "\(id)"])
                for box in boxes where !box.isDone { connection.enqueue(box) }
            } catch {
                let (failed, retryDelay) = self.state.withLock { s -> ([APNsRequestBox], Duration?) in
                    s.connecting -= 1
                    s.failures += 1
                    var failed: [APNsRequestBox] = []
                    if s.ready.isEmpty {
                        failed = s.waiting
                        s.waiting.removeAll()
                    }
                    // Back off before the next attempt; requests arriving meanwhile wait for it.
                    let delay = APNsReconnectBackoff.delay(failures: s.failures)
                    s.reconnectScheduled = true
                    s.connecting += 1
                    return (failed, s.shutdown ? nil : delay)
                }
                self.logger.warning("APNs connection failed", metadata: ["endpoint": "\(self.endpoint)", "error": "\(error)"])
                for box in failed {
                    box.complete(.failure(NorqError(.transportFailed, "cannot connect to APNs at \(self.endpoint): \(error)")))
                }
                if let retryDelay {
                    self.scheduleReconnect(after: retryDelay)
                } else {
                    self.state.withLock { $0.connecting -= 1; $0.reconnectScheduled = false }
                }
            }
        }
    }

    /// After a failure: wait, then connect again only if requests are waiting.
    private func scheduleReconnect(after delay: Duration) {
        Task {
            try? await Task.sleep(for: delay)
            let go = self.state.withLock { s -> Bool in
                s.reconnectScheduled = false
                if s.shutdown || s.waiting.allSatisfy(\.isDone) {
                    s.waiting.removeAll()
                    s.connecting -= 1
                    return false
                }
                return true
            }
            if go { self.openConnection(after: nil) }
        }
    }

    private func connect(id: Int) async throws -> APNsConnection {
        let eventLoop = group.next()
        let target = settings.proxy ?? endpoint
        let timeout = TimeAmount.seconds(settings.connectTimeout.components.seconds)
        let channel = try await ClientBootstrap(group: eventLoop)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connect(host: target.host, port: target.port).get()
        do {
            if settings.proxy != nil {
                let endpoint = self.endpoint
                let proxyHandler = try await eventLoop.submit { () -> NIOLoopBound<HTTPConnectProxyHandler> in
                    let handler = HTTPConnectProxyHandler(target: endpoint, eventLoop: eventLoop)
                    try channel.pipeline.syncOperations.addHandler(handler)
                    return NIOLoopBound(handler, eventLoop: eventLoop)
                }.get()
                let established = try await eventLoop.submit { proxyHandler.value.established }.get()
                try await established.get()
                try await eventLoop.submit {
                    channel.pipeline.syncOperations.removeHandler(proxyHandler.value)
                }.get().get()
            }
            let hostname = Self.isIPAddress(endpoint.host) ? nil : endpoint.host
            let sslContext = settings.sslContext
            let logger = self.logger
            let settings = self.settings
            let handlerBox: NIOLoopBound<APNsStreamHandler> = try await eventLoop.submit {
                let sync = channel.pipeline.syncOperations
                try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: hostname))
                // HTTP/2 is the stream handler's own client framing (HTTP2ClientConnection), straight on TLS.
                let handler = APNsStreamHandler(eventLoop: eventLoop, logger: logger,
                                                clientLimit: settings.maxStreamsPerConnection,
                                                tokenAuth: settings.tokenAuth, pingInterval: settings.pingInterval)
                try sync.addHandler(handler)
                return NIOLoopBound(handler, eventLoop: eventLoop)
            }.get()
            let connection = APNsConnection(id: id, channel: channel, handler: handlerBox, pool: self)
            let ready = try await eventLoop.submit { () -> EventLoopFuture<Void> in
                handlerBox.value.connection = connection
                return handlerBox.value.ready
            }.get()
            let timeoutTask = eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
            defer { timeoutTask.cancel() }
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

    /// Refuses new work, waits for requests in flight (each ends by its deadline at the latest), closes.
    func shutdown(outstanding: @Sendable () -> Int) async {
        state.withLock { $0.shutdown = true }
        while outstanding() > 0 {
            try? await Task.sleep(for: .milliseconds(5))
        }
        let connections = state.withLock { s -> [APNsConnection] in
            let all = s.ready
            s.ready.removeAll()
            return all
        }
        for connection in connections { try? await connection.channel.close() }
    }
}

/// Delay before reconnecting after `failures` consecutive connection failures: exponential from 100 ms,
/// capped at 30 s, with full jitter in [50%, 100%].
enum APNsReconnectBackoff {
    static func delay(failures: Int, random: Double = Double.random(in: 0.5...1.0)) -> Duration {
        let exponent = min(max(failures - 1, 0), 20)
        let base = min(100.0 * Double(1 << exponent), 30_000.0)
        return .milliseconds(Int64(base * random))
    }
}
