import NorqCore
import NorqHTTP2
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// The FCM transport on NorqHTTP2: one `HTTP2ConnectionPool` per origin (the FCM API, and the token endpoint
/// when it is another origin). `HTTP2ClientError` becomes `NorqError` keeping `possiblyProcessed`.
final class FCMConnectionTransport: FCMTransport {
    let pool: HTTP2ConnectionPool
    /// The last request head made and the header array it was made from: see `head(for:)`.
    private let lastHead = Mutex<CachedHead?>(nil)

    init(origin: FCMURL, configuration: FCMConfiguration, connections: Int, logger: Logger) throws(NorqError) {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let pem = configuration.additionalTrustRootsPEM {
            do {
                let certificates = try NIOSSLCertificate.fromPEMBytes(Array(pem.utf8))
                tls.additionalTrustRoots = [.certificates(certificates)]
            } catch {
                throw NorqError(.configInvalidValue, "the CA file \(configuration.caPath ?? "caPath") cannot be loaded")
            }
        }
        var client = HTTP2ClientConfiguration(host: origin.host, port: origin.port, tls: tls)
        client.connections = connections
        client.maxConcurrentStreams = configuration.maxConcurrentStreams
        client.connectTimeout = min(configuration.requestTimeout, .seconds(10))
        if let proxy = configuration.proxy { client.proxy = HTTP2Proxy(host: proxy.host, port: proxy.port) }
        // The answers of one read complete as one batch: the router wakes its outcome consumer and refills its
        // free slots once per read, not once per answer.
        client.completionBatching = HTTP2CompletionBatching(begin: { CompletionBatch.begin() }, end: { CompletionBatch.end() })
        self.pool = HTTP2ConnectionPool(configuration: client, eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
                                        logger: logger)
    }

    /// The API transport, and the token endpoint's when it is another origin.
    static func make(configuration: FCMConfiguration,
                     logger: Logger) throws(NorqError) -> (api: FCMConnectionTransport, token: FCMConnectionTransport?) {
        let api = try FCMConnectionTransport(origin: configuration.endpoint, configuration: configuration,
                                             connections: configuration.connections, logger: logger)
        let token = configuration.tokenEndpoint
        if token.host == configuration.endpoint.host && token.port == configuration.endpoint.port { return (api, nil) }
        return (api, try FCMConnectionTransport(origin: token, configuration: configuration, connections: 1, logger: logger))
    }

    func execute(_ request: FCMWireRequest, deadline: ContinuousClock.Instant, now: ContinuousClock.Instant,
                 completion: @escaping @Sendable (Result<HTTP2Response, NorqError>) -> Void) {
        let body: HTTP2RequestBody = switch request.body {
        case .bytes(let bytes): .bytes(bytes)
        case .spliced(let head, let middle, let tail): .spliced(head: head, middle: middle, tail: tail)
        }
        pool.execute(HTTP2Request(head: head(for: request), body: body, timeout: request.timeout), deadline: deadline,
                     now: now) { result in
            completion(result.mapError(Self.norqError))
        }
    }

    /// The HTTP/2 head of `request`: the last one made when the request has the same method, authority, path and
    /// header array (every send with one access token shares its header array), else a new one.
    func head(for request: FCMWireRequest) -> HTTP2RequestHead {
        if let last = lastHead.withLock({ $0 }), last.headers == request.headers, last.head.path == request.path,
           last.head.authority == request.authority, last.head.method == request.method {
            return last.head
        }
        var fields: [HTTP2HeaderField] = []
        fields.reserveCapacity(request.headers.count)
        for header in request.headers {
            let indexing: HTTP2HeaderIndexing = header.name == "authorization" ? .neverIndexed : .indexed
            fields.append(HTTP2HeaderField(header.name, header.value, indexing: indexing))
        }
        let head = HTTP2RequestHead(method: request.method, scheme: "https", authority: request.authority,
                                    path: request.path, fields: fields)
        let made = CachedHead(headers: request.headers, head: head)
        lastHead.withLock { $0 = made }
        return head
    }

    /// A request head and the header array it was made from (its method, authority and path are the head's own;
    /// immutable: read outside the lock, one reference to copy).
    private final class CachedHead: Sendable {
        let headers: [HTTPHeader]
        let head: HTTP2RequestHead

        init(headers: [HTTPHeader], head: HTTP2RequestHead) {
            self.headers = headers
            self.head = head
        }
    }

    /// `HTTP2ClientError` -> `NorqError`: deadline, shut-down or transport failure, keeping `possiblyProcessed` and
    /// `notProcessed` (``HTTP2ClientError/isUnprocessed``).
    static func norqError(_ error: HTTP2ClientError) -> NorqError {
        let code: NorqError.Code
        switch error.kind {
        case .deadlineExceeded: code = .deadlineExceeded
        case .shutDown: code = .providerShutDown
        case .invalidRequest: code = .invalidHeaderValue
        default: code = .transportFailed
        }
        return NorqError(code, "FCM: \(error.message)", possiblyProcessed: error.possiblyProcessed,
                         notProcessed: error.isUnprocessed)
    }

    var connectFailure: String? { pool.health.lastConnectFailure }

    func shutdown() async {
        await pool.shutdown()
    }
}
