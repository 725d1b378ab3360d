import NorqCore
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import NorqHTTP2
import Synchronization

/// One response as the provider classifies it.
struct APNsWireResponse: Sendable {
    var status: Int
    var headers: [HTTPHeader]
    var body: [UInt8]

    init(status: Int, headers: [HTTPHeader], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    init(_ response: HTTP2Response) {
        self.status = response.status
        var headers: [HTTPHeader] = []
        headers.reserveCapacity(response.fields.count)
        response.forEachField { headers.append(HTTPHeader($0, $1)) }
        self.headers = headers
        self.body = response.body.readableBytes == 0 ? [] : Array(response.body.readableBytesView)
    }
}

/// What the transport calls, exactly once, with a request's answer or failure.
typealias APNsCompletion = @Sendable (Result<APNsWireResponse, NorqError>) -> Void

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
    /// Pools of any other endpoint, made on first use.
    private let pools = Mutex<[APNsEndpoint: HTTP2ConnectionPool]>([:])
    private let isShutDown = Atomic<Bool>(false)

    /// A warm-up stream unanswered for this long stops holding the others back.
    static let warmUp = Duration.seconds(1)

    init(configuration: APNsConfiguration, logger: Logger,
         group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) throws(NorqError) {
        self.logger = logger
        self.group = group
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

    /// Sends once and calls `completion` exactly once, on any thread (an event loop, or the caller's before
    /// returning). Fails with `provider/transport-failed` when the connection fails before an answer,
    /// `provider/deadline-exceeded` when the deadline passes (the stream is cancelled, not the connection),
    /// `provider/shut-down` after `shutdown()`; `possiblyProcessed` says whether APNs may have acted on it.
    /// `target` (redacted), else `label`, names the request in error messages.
    func start(endpoint: APNsEndpoint, head: HTTP2RequestHead, body: ByteBuffer, target: DeliveryTarget?,
               label: String = "channels", deadline: ContinuousClock.Instant, completion: @escaping APNsCompletion) {
        start(endpoint: endpoint, head: head, body: body, target: target, label: label,
              remaining: ContinuousClock.now.duration(to: deadline), completion: completion)
    }

    /// `start` with the time left, for a caller that has just read the clock.
    func start(endpoint: APNsEndpoint, head: HTTP2RequestHead, body: ByteBuffer, target: DeliveryTarget?,
               label: String = "channels", remaining: Duration, completion: @escaping APNsCompletion) {
        startHTTP2(endpoint: endpoint, head: head, body: body, remaining: remaining) { result in
            completion(Self.wireResult(result, logID: target?.redacted ?? label))
        }
    }

    /// `start` that hands over the HTTP/2 result itself (map it with ``wireResult(_:logID:)``): the provider's
    /// per-request path maps and classifies in its one closure, instead of one closure per layer.
    func startHTTP2(endpoint: APNsEndpoint, head: HTTP2RequestHead, body: ByteBuffer, remaining: Duration,
                    completion: @escaping HTTP2Completion) {
        guard !isShutDown.load(ordering: .relaxed) else {
            completion(.failure(HTTP2ClientError(.shutDown, possiblyProcessed: false, "the APNs provider is shut down")))
            return
        }
        let nioDeadline = NIODeadline.now() + remaining.timeAmount
        pool(for: endpoint).start(head, body: body, deadline: nioDeadline, completion: completion)
    }

    /// An HTTP/2 result as the provider sees it: the wire response, or the failure as a `NorqError`.
    static func wireResult(_ result: Result<HTTP2Response, HTTP2ClientError>, logID: @autoclosure () -> String)
        -> Result<APNsWireResponse, NorqError> {
        switch result {
        case .success(let response): .success(APNsWireResponse(response))
        case .failure(let error): .failure(norqError(error, logID: logID()))
        }
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

    /// `start` for async callers.
    func send(endpoint: APNsEndpoint, head: HTTP2RequestHead, body: ByteBuffer, label: String,
              deadline: ContinuousClock.Instant) async throws(NorqError) -> APNsWireResponse {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<APNsWireResponse, NorqError>, Never>) in
            start(endpoint: endpoint, head: head, body: body, target: nil, label: label, deadline: deadline) {
                continuation.resume(returning: $0)
            }
        }
        return try result.get()
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
