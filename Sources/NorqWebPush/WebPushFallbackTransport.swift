package import NorqCore
package import NorqHTTP2
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
    private struct Origins {
        var http1: Set<String> = []
        /// Which origins answered at their last attempt (readiness).
        var health: WebPushOriginHealth
    }
    private let origins: Mutex<Origins>

    package init(http2: WebPushHTTP2Transport, http1: any WebPushTransport, maxOrigins: Int) {
        self.http2 = http2
        self.http1 = http1
        self.limit = max(1, maxOrigins)
        self.origins = Mutex(Origins(health: WebPushOriginHealth(capacity: max(1, maxOrigins))))
    }

    package func start(_ request: WebPushWireRequest, deadline: ContinuousClock.Instant,
                       completion: @escaping @Sendable (Result<HTTP2Response, NorqError>) -> Void) {
        let origin = request.endpoint.origin
        if origins.withLock({ $0.http1.contains(origin) }) {
            http1.start(request, deadline: deadline) { result in
                self.recordHTTP1(result, origin: origin)
                completion(result)
            }
            return
        }
        http2.startRaw(request, deadline: deadline) { result in
            guard case .failure(let error) = result, Self.mayBeHTTP1Only(error) else {
                if case .success = result { self.recordAnswer(origin) }
                completion(result.mapError { WebPushHTTP2Transport.norqError($0, host: request.endpoint.host) })
                return
            }
            self.http1.start(request, deadline: deadline) { fallback in
                if case .success = fallback {
                    self.origins.withLock { origins in
                        if origins.http1.count >= self.limit { origins.http1.removeAll() }
                        origins.http1.insert(origin)
                    }
                }
                self.recordHTTP1(fallback, origin: origin)
                completion(fallback)
            }
        }
    }

    /// An answer (any status) from `origin`: it is reachable.
    private func recordAnswer(_ origin: String) {
        origins.withLock { if !$0.health.isReachable(origin) { $0.health.answered(origin) } }
    }

    /// The HTTP/1.1 attempt's result (the last one tried): an answer, or a failure before any byte could be sent
    /// (connect, DNS, TLS: `provider/transport-failed`, not processed), which makes the origin unreachable.
    private func recordHTTP1(_ result: Result<HTTP2Response, NorqError>, origin: String) {
        switch result {
        case .success:
            recordAnswer(origin)
        case .failure(let error) where error.code == .transportFailed && !error.possiblyProcessed:
            origins.withLock { $0.health.unreachable(origin, reason: error.message) }
        case .failure:
            break
        }
    }

    /// Set when every push-service origin tried lately was unreachable at its last attempt.
    package var unreachableOrigins: WebPushOriginHealth.Unreachable? { origins.withLock { $0.health.allUnreachable } }

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
