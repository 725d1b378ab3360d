import NorqCore
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import NorqHTTP2
import Synchronization

/// APNs on NorqHTTP2: one ``HTTP2ConnectionPool`` per endpoint, TLS 1.2+ with ALPN h2 and certificate
/// verification (client certificate for certificate auth). What is APNs here: the warm-up rule (token auth: one
/// stream until the first answer, as a connection with a bad JWT is closed after it), the metric names, the
/// response-body bound of channel lists, and the mapping of transport failures onto `NorqError`.
final class APNsTransport: Sendable {
    private let logger: Logger
    private let group: any EventLoopGroup
    private let sslContext: NIOSSLContext
    private let template: HTTP2ClientConfiguration
    /// The pools of the configured endpoints (sandbox, production, broadcast), made at init: found without a lock.
    private let configuredPools: [(endpoint: APNsEndpoint, pool: HTTP2ConnectionPool)]
    /// The `:authority` of each configured pool, in the same order, made once (compared per request).
    private let configuredAuthorities: [String]
    /// Pools of any other endpoint, made on first use.
    private let pools = Mutex<[APNsEndpoint: HTTP2ConnectionPool]>([:])
    private let isShutDown = Atomic<Bool>(false)
    /// Each request's own timeout (`timeout`, default 10 s), applied by the bridge within the send's deadline.
    private let requestTimeout: Duration

    /// A warm-up stream unanswered for this long stops holding the others back.
    static let warmUp = Duration.seconds(1)

    init(configuration: APNsConfiguration, logger: Logger,
         group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) throws(NorqError) {
        self.logger = logger
        self.group = group
        self.requestTimeout = configuration.requestTimeout
        let sslContext = try Self.makeSSLContext(configuration)
        self.sslContext = sslContext
        var template = HTTP2ClientConfiguration(host: "", port: 443)
        template.connections = max(1, configuration.connectionsPerEndpoint)
        template.maxConcurrentStreams = max(1, configuration.maxConcurrentStreamsPerConnection)
        template.pingInterval = configuration.pingInterval > .zero ? configuration.pingInterval : nil
        template.idleTimeout = configuration.idleTimeout
        template.connectionRetryLimit = configuration.connectionRetryLimit
        template.proxy = configuration.proxy.map { HTTP2Proxy(host: $0.host, port: $0.port) }
        template.warmUp = configuration.authentication.isToken ? Self.warmUp : nil
        // Channel lists (broadcast management) can be long; push answers are small.
        template.maxResponseBodyBytes = 4 << 20
        template.observer = APNsTransportMetrics()
        template.completionBatching = HTTP2CompletionBatching(begin: { CompletionBatch.begin() },
                                                              end: { CompletionBatch.end() })
        self.template = template
        var configured: [(endpoint: APNsEndpoint, pool: HTTP2ConnectionPool)] = []
        for endpoint in [configuration.sandboxEndpoint, configuration.productionEndpoint,
                         configuration.broadcastEndpoint(for: .sandbox), configuration.broadcastEndpoint(for: .production)]
        where !configured.contains(where: { $0.endpoint == endpoint }) {
            configured.append((endpoint, Self.makePool(endpoint, template: template, sslContext: sslContext,
                                                       group: group, logger: logger)))
        }
        self.configuredPools = configured
        self.configuredAuthorities = configured.map(\.endpoint.authority)
    }

    private static func makePool(_ endpoint: APNsEndpoint, template: HTTP2ClientConfiguration, sslContext: NIOSSLContext,
                                 group: any EventLoopGroup, logger: Logger) -> HTTP2ConnectionPool {
        var configuration = template
        configuration.host = endpoint.host
        configuration.port = endpoint.port
        return HTTP2ConnectionPool(configuration: configuration, sslContext: sslContext, eventLoopGroup: group,
                                   logger: logger)
    }

    private func pool(for endpoint: APNsEndpoint) -> HTTP2ConnectionPool {
        // By index: iterating copied each (endpoint, pool) entry, retaining its strings, per request.
        for index in configuredPools.indices where configuredPools[index].endpoint == endpoint {
            return configuredPools[index].pool
        }
        return pools.withLock { pools in
            if let pool = pools[endpoint] { return pool }
            let pool = Self.makePool(endpoint, template: template, sslContext: sslContext, group: group, logger: logger)
            pools[endpoint] = pool
            return pool
        }
    }

    /// The pool of the origin whose `:authority` `prepare` wrote into the request (a configured endpoint: found by
    /// comparing a few short strings, no endpoint computed again); another origin gets a pool of its own.
    private func pool(forAuthority authority: String) -> HTTP2ConnectionPool {
        for index in configuredAuthorities.indices where configuredAuthorities[index] == authority {
            return configuredPools[index].pool
        }
        return pool(for: APNsEndpoint(authority: authority))
    }

    /// Sends `head` + `body` once, to the origin of `head.authority`, through NorqHTTP2's one bridge (each request's
    /// own `timeout` within the send's `deadline`), and calls `completion` exactly once with the HTTP/2 result, on
    /// any thread (an event loop, or the caller's before returning). Map a failure with ``norqError(_:logID:)``:
    /// the provider's per-request path maps and classifies in its one closure, not one closure per layer.
    /// `timeout`: this request's own, when not the configured `timeout`.
    func execute(head: HTTP2RequestHead, body: ByteBuffer, deadline: ContinuousClock.Instant, timeout: Duration? = nil,
                 completion: @escaping HTTP2Completion) {
        guard !isShutDown.load(ordering: .relaxed) else {
            completion(.failure(HTTP2ClientError(.shutDown, possiblyProcessed: false, "the APNs provider is shut down")))
            return
        }
        pool(forAuthority: head.authority).execute(HTTP2Request(head: head, body: .buffer(body), timeout: timeout ?? requestTimeout),
                                                   deadline: deadline, completion: completion)
    }

    /// The first device-push endpoint (sandbox, production, broadcast) whose last connection attempt failed with no
    /// connection open, and why; nil when every such pool that has tried has a connection or has not tried yet. Channel
    /// management hosts (made on first use, outside the configured pools) do not count: a failed `createChannel`
    /// says nothing about delivering to devices.
    func unhealthyEndpoint() -> (endpoint: APNsEndpoint, reason: String)? {
        for entry in configuredPools {
            if let failure = entry.pool.health.lastConnectFailure { return (entry.endpoint, failure) }
        }
        return nil
    }

    /// ``execute(head:body:deadline:timeout:completion:)`` for async callers with no send deadline of their own
    /// (channel management): `timeout` alone bounds it. `label` names the request in error messages.
    func execute(head: HTTP2RequestHead, body: ByteBuffer, label: String,
                 timeout: Duration) async throws(NorqError) -> HTTP2Response {
        let now = ContinuousClock.now
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<HTTP2Response, HTTP2ClientError>, Never>) in
            execute(head: head, body: body, deadline: now + timeout, timeout: timeout) { continuation.resume(returning: $0) }
        }
        return try result.mapError { Self.norqError($0, logID: label) }.get()
    }

    /// A transport failure as the router sees it, `possiblyProcessed` and `notProcessed` (``HTTP2ClientError/isUnprocessed``) copied.
    static func norqError(_ error: HTTP2ClientError, logID: String) -> NorqError {
        switch error.kind {
        case .shutDown:
            return NorqError(.providerShutDown, "the APNs provider is shut down")
        case .deadlineExceeded:
            return NorqError(.deadlineExceeded, "APNs did not answer before the deadline (token \(logID))",
                             possiblyProcessed: error.possiblyProcessed)
        case .invalidRequest:
            return NorqError(.invalidHeaderValue, "APNs request not sent (token \(logID)): \(error.message)")
        case .connectFailed, .addressNotAllowed:
            return NorqError(.transportFailed, "cannot connect to APNs: \(error.message)",
                             possiblyProcessed: error.possiblyProcessed)
        default:
            return NorqError(.transportFailed, "APNs: \(error.message) (token \(logID))",
                             possiblyProcessed: error.possiblyProcessed, notProcessed: error.isUnprocessed)
        }
    }

    /// Stops taking requests, waits for those in flight, closes the connections.
    func shutdown() async {
        isShutDown.store(true, ordering: .relaxed)
        let all = configuredPools.map(\.pool) + pools.withLock { Array($0.values) }
        await withDiscardingTaskGroup { group in
            for pool in all { group.addTask { await pool.shutdown() } }
        }
    }
}
