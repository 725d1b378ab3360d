package import NorqCore
import NorqHTTP2
import Synchronization

/// HTTP/2 (NorqHTTP2) first; HTTP/1.1 (AsyncHTTPClient) for push services that do not speak HTTP/2.
///
/// A request that failed on HTTP/2 before reaching the service (connect or protocol failure, not processed) is
/// sent again over HTTP/1.1 at once; when that answers, the origin is remembered as HTTP/1.1-only (at most
/// `maxOrigins` remembered, the set starts over beyond that) and later requests go there directly. Anything that
/// may have been processed is never re-sent here: the router's retry rule decides.
package final class WebPushFallbackTransport: WebPushTransport {
    private let http2: WebPushHTTP2Transport
    private let http1: any WebPushTransport
    private let limit: Int
    private let http1Origins = Mutex<Set<String>>([])

    package init(http2: WebPushHTTP2Transport, http1: any WebPushTransport, maxOrigins: Int) {
        self.http2 = http2
        self.http1 = http1
        self.limit = max(1, maxOrigins)
    }

    package func start(_ request: WebPushWireRequest, deadline: ContinuousClock.Instant,
                       completion: @escaping @Sendable (Result<WebPushWireResponse, NorqError>) -> Void) {
        let origin = request.endpoint.origin
        if http1Origins.withLock({ $0.contains(origin) }) {
            http1.start(request, deadline: deadline, completion: completion)
            return
        }
        http2.startRaw(request, deadline: deadline) { result in
            guard case .failure(let error) = result, Self.mayBeHTTP1Only(error) else {
                completion(result.mapError { WebPushHTTP2Transport.norqError($0, host: request.endpoint.host) })
                return
            }
            self.http1.start(request, deadline: deadline) { fallback in
                if case .success = fallback {
                    self.http1Origins.withLock { origins in
                        if origins.count >= self.limit { origins.removeAll() }
                        origins.insert(origin)
                    }
                }
                completion(fallback)
            }
        }
    }

    /// A failure of the HTTP/2 attempt that an HTTP/1.1-only service causes (no HTTP/2 connection could be set up)
    /// and that did not reach it. GOAWAY, refused streams and lost connections are not: the router retries those.
    static func mayBeHTTP1Only(_ error: HTTP2ClientError) -> Bool {
        (error.kind == .connectFailed || error.kind == .protocolError) && !error.possiblyProcessed
    }

    package func shutdown() async {
        await http2.shutdown()
        await http1.shutdown()
    }
}
