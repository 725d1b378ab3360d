package import Logging
package import NIOCore
import NIOPosix
import NIOSSL
package import NorqCore
package import NorqHTTP2
import Synchronization

/// Web Push over NorqHTTP2: one connection pool per push-service origin, at most `maxOrigins` of them.
///
/// Bounds: `maxOrigins` live pools (the least recently used one is retired beyond it) and as many retired pools,
/// which close their own idle connections (`idleTimeout` 60 s) and are shut down with the transport; response
/// bodies are bounded by NorqHTTP2 (`maxResponseBodyBytes`, 64 KiB). Every connection's resolved address goes
/// through the SSRF guard (`addressFilter`) before connecting.
package final class WebPushHTTP2Transport: WebPushTransport {
    private let configuration: WebPushConfiguration
    private let endpointGuard: WebPushEndpointGuard
    private let tls: TLSConfiguration
    private let group: any EventLoopGroup
    private let logger: Logger

    private struct Pools {
        var live: [String: (pool: HTTP2ConnectionPool, lastUsed: UInt64)] = [:]
        var retired: [HTTP2ConnectionPool] = []
        var tick: UInt64 = 0
        var shutDown = false
    }
    private let pools = Mutex(Pools())

    package init(configuration: WebPushConfiguration, endpointGuard: WebPushEndpointGuard, logger: Logger,
         group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) throws(NorqError) {
        self.configuration = configuration
        self.endpointGuard = endpointGuard
        self.logger = logger
        self.group = group
        var tls = try WebPushTLS.clientConfiguration(configuration)
        tls.applicationProtocols = ["h2"]
        self.tls = tls
    }

    /// The pool of `endpoint`'s origin, made on first use; nil after shutdown.
    func pool(for endpoint: WebPushEndpoint) -> HTTP2ConnectionPool? {
        let origin = endpoint.origin
        return pools.withLock { state -> HTTP2ConnectionPool? in
            if state.shutDown { return nil }
            state.tick += 1
            if let entry = state.live[origin] {
                state.live[origin]?.lastUsed = state.tick
                return entry.pool
            }
            let filter = endpointGuard
            let pool = HTTP2ConnectionPool(
                configuration: HTTP2ClientConfiguration(
                    host: endpoint.host, port: endpoint.port, tls: tls, connections: configuration.connectionsPerOrigin,
                    connectTimeout: min(configuration.requestTimeout, .seconds(10)), pingInterval: .seconds(60),
                    idleTimeout: .seconds(60),
                    addressFilter: { address in
                        guard let text = address.ipAddress, let ip = IPAddress(parsing: text) else { return false }
                        return filter.allows(address: ip)
                    },
                    // The answers of one read complete as one batch: the router wakes its outcome consumer and
                    // refills its free slots once per read, not once per answer.
                    completionBatching: HTTP2CompletionBatching(begin: { CompletionBatch.begin() },
                                                                end: { CompletionBatch.end() })),
                eventLoopGroup: group, logger: logger)
            if state.live.count >= configuration.maxOrigins,
               let oldest = state.live.min(by: { $0.value.lastUsed < $1.value.lastUsed }) {
                state.live.removeValue(forKey: oldest.key)
                state.retired.append(oldest.value.pool)
                if state.retired.count > configuration.maxOrigins { state.retired.removeFirst() }
            }
            state.live[origin] = (pool, state.tick)
            return pool
        }
    }

    package func start(_ request: WebPushWireRequest, deadline: ContinuousClock.Instant,
               completion: @escaping @Sendable (Result<HTTP2Response, NorqError>) -> Void) {
        startRaw(request, deadline: deadline) { result in
            completion(result.mapError { Self.norqError($0, host: request.endpoint.host) })
        }
    }

    /// `start` with NorqHTTP2's own error (the fallback transport reads its kind).
    package func startRaw(_ request: WebPushWireRequest, deadline: ContinuousClock.Instant,
                          completion: @escaping @Sendable (Result<HTTP2Response, HTTP2ClientError>) -> Void) {
        guard let pool = pool(for: request.endpoint) else {
            completion(.failure(HTTP2ClientError(.shutDown, possiblyProcessed: false, "the web push provider is shut down")))
            return
        }
        var fields: [HTTP2HeaderField] = []
        fields.reserveCapacity(request.headers.count)
        for header in request.headers {
            // ttl, urgency, topic, content-* and the per-origin VAPID token repeat: indexed.
            fields.append(HTTP2HeaderField(header.name, header.value, indexing: .indexed))
        }
        let head = HTTP2RequestHead(method: request.method, scheme: "https", authority: request.endpoint.authority,
                                    path: request.endpoint.path, fields: fields)
        let group = self.group
        pool.execute(HTTP2Request(head: head, body: .bytes(request.body), timeout: request.timeout),
                     deadline: deadline) { result in
            // Answers are handed to the group's event loops in turn, so that what the completion starts (the
            // router prepares, so encrypts, the next push in it: ~75 µs of ECDH and key generation each) runs on
            // every core, not only on the connection's loop, which then only does the I/O. One connection to one
            // push service is the common case of a bulk send; on 2 cores this took 1x100 from ~4,300 to ~7,400
            // pushes/s (loaded machine, A/B), for ~6 µs more CPU per push (the hop).
            let loop = group.next()
            if !loop.inEventLoop {
                loop.execute { completion(result) }
            } else {
                completion(result)
            }
        }
    }

    static func norqError(_ error: HTTP2ClientError, host: String) -> NorqError {
        let code: NorqError.Code
        switch error.kind {
        case .deadlineExceeded: code = .deadlineExceeded
        case .shutDown: code = .providerShutDown
        case .addressNotAllowed: code = .webPushEndpointNotAllowed
        case .invalidRequest: code = .invalidHeaderValue
        default: code = .transportFailed
        }
        let message = error.kind == .addressNotAllowed
            ? "web push endpoint host \(host.prefix(80)) resolved to an address the SSRF guard refuses (loopback, private, link-local, multicast or reserved)"
            : "web push to \(host.prefix(80)): \(error.message)"
        return NorqError(code, message, possiblyProcessed: error.possiblyProcessed, notProcessed: error.isUnprocessed)
    }

    package func shutdown() async {
        let all = pools.withLock { state -> [HTTP2ConnectionPool] in
            state.shutDown = true
            defer { state.live.removeAll(); state.retired.removeAll() }
            return state.live.values.map(\.pool) + state.retired
        }
        for pool in all { await pool.shutdown() }
        // Answers handed to another event loop (see startRaw) are queued there before the pools finish: one empty
        // task through each loop after them, and every completion has run when shutdown returns.
        for loop in group.makeIterator() { try? await loop.submit {}.get() }
    }
}
