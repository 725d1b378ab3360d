import NorqCore
import NorqHTTP2
import NorqZlib
import Logging
import NIOCore
import NIOPosix
import NIOSSL

/// The Expo transport on NorqHTTP2: one pool to the push service, at most `maxConcurrentRequests` streams in
/// flight (Expo advises 6). Answers are NorqHTTP2's one bridge response type, `HTTP2Response` (its body inflated when
/// it came gzipped or deflated), read by the provider as APNs, FCM and Web Push read theirs; `HTTP2ClientError`
/// becomes `NorqError` keeping `possiblyProcessed`.
final class ExpoTransport: Sendable {
    let pool: HTTP2ConnectionPool
    let authority: String
    /// Each request's own time (`timeout`, default 30 s), applied by NorqHTTP2's bridge within the send's deadline.
    let requestTimeout: Duration
    /// The largest answer accepted, inflated (100 tickets or 1,000 receipts are far below it).
    static let maxResponseBytes = 4 << 20

    init(configuration: ExpoConfiguration, logger: Logger) throws(NorqError) {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let pem = configuration.additionalTrustRootsPEM {
            do {
                tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMBytes(Array(pem.utf8)))]
            } catch {
                throw NorqError(.configInvalidCertificate, "the CA \(configuration.caPath ?? "caPem") cannot be loaded")
            }
        }
        var client = HTTP2ClientConfiguration(host: configuration.endpoint.host, port: configuration.endpoint.port, tls: tls)
        client.connections = 1
        client.maxConcurrentStreams = configuration.maxConcurrentRequests
        client.connectTimeout = min(configuration.requestTimeout, .seconds(10))
        client.maxResponseBodyBytes = Self.maxResponseBytes
        self.authority = configuration.endpoint.authority
        self.requestTimeout = configuration.requestTimeout
        self.pool = HTTP2ConnectionPool(configuration: client, eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
                                        logger: logger)
    }

    /// Sends `body` to `path` once, within `deadline` and the configured `timeout` (NorqHTTP2's bridge);
    /// `completion` runs exactly once, on any thread.
    func start(path: String, headers: [HTTPHeader], body: [UInt8], deadline: ContinuousClock.Instant,
               completion: @escaping @Sendable (Result<HTTP2Response, NorqError>) -> Void) {
        var fields: [HTTP2HeaderField] = []
        fields.reserveCapacity(headers.count)
        for header in headers {
            fields.append(HTTP2HeaderField(header.name, header.value,
                                           indexing: header.name == "authorization" ? .neverIndexed : .indexed))
        }
        let head = HTTP2RequestHead(method: "POST", scheme: "https", authority: authority, path: path, fields: fields)
        pool.execute(HTTP2Request(head: head, body: .bytes(body), timeout: requestTimeout), deadline: deadline) { result in
            switch result {
            case .success(var response):
                if let encoding = response.header("content-encoding")?.lowercased(), encoding == "gzip" || encoding == "deflate" {
                    guard let inflated = Gzip.decompress(response.bodyBytes, limit: Self.maxResponseBytes) else {
                        completion(.failure(NorqError(.transportFailed, "Expo: the \(encoding) answer cannot be inflated",
                                                      possiblyProcessed: true)))
                        return
                    }
                    response.body = ByteBuffer(bytes: inflated)
                }
                completion(.success(response))
            case .failure(let error):
                let code: NorqError.Code = switch error.kind {
                case .deadlineExceeded: .deadlineExceeded
                case .shutDown: .providerShutDown
                case .invalidRequest: .invalidHeaderValue
                default: .transportFailed
                }
                completion(.failure(NorqError(code, "Expo: \(error.message)", possiblyProcessed: error.possiblyProcessed,
                                              notProcessed: error.isUnprocessed)))
            }
        }
    }

    var connectFailure: String? { pool.health.lastConnectFailure }

    func shutdown() async { await pool.shutdown() }
}
