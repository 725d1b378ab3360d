package import NorqCore
package import NorqHTTP2
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One request on the wire: where to connect and what to send.
package struct WebPushWireRequest: Sendable {
    package var endpoint: WebPushEndpoint
    package var method: String
    package var headers: [HTTPHeader]
    package var body: [UInt8]
    /// This request's own time within the send's deadline (``HTTP2Request/deadline(within:timeout:now:)``, the one
    /// rule, applied by both transports).
    package var timeout: Duration?

    package init(endpoint: WebPushEndpoint, method: String, headers: [HTTPHeader], body: [UInt8],
                 timeout: Duration? = nil) {
        self.endpoint = endpoint
        self.method = method
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// Sends wire requests to push services; pooled per origin. Answers are NorqHTTP2's `HTTP2Response` whichever
/// HTTP version carried them (the HTTP/1.1 transport makes one). Failures are `provider/transport-failed`,
/// `provider/deadline-exceeded`, `provider/shut-down` or `webpush/endpoint-not-allowed` (the resolved address
/// was refused), with `possiblyProcessed` kept.
package protocol WebPushTransport: Sendable {
    func start(_ request: WebPushWireRequest, deadline: ContinuousClock.Instant,
               completion: @escaping @Sendable (Result<HTTP2Response, NorqError>) -> Void)
    func shutdown() async
    /// Set when every push-service origin tried lately could not be reached at its last attempt (see
    /// ``WebPushOriginHealth``); nil otherwise. Default nil.
    var unreachableOrigins: WebPushOriginHealth.Unreachable? { get }
}

extension WebPushTransport {
    package var unreachableOrigins: WebPushOriginHealth.Unreachable? { nil }
}

/// The wall clock the provider reads (JWT `exp`, TTL from absolute expirations); injectable for tests.
public struct WebPushClock: Sendable {
    public var epochSeconds: @Sendable () -> Int64
    public init(epochSeconds: @escaping @Sendable () -> Int64) { self.epochSeconds = epochSeconds }
    /// The system wall clock.
    public static let system = WebPushClock {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec)
    }
}
