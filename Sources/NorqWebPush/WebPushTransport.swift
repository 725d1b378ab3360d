package import NorqCore
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
}

/// A push service's answer on the wire.
package struct WebPushWireResponse: Sendable {
    package var status: Int
    /// Lowercase names.
    package var headers: [HTTPHeader]
    package var body: [UInt8]
}

/// Sends wire requests to push services; pooled per origin. Failures are `provider/transport-failed`,
/// `provider/deadline-exceeded`, `provider/shut-down` or `webpush/endpoint-not-allowed` (the resolved address
/// was refused), with `possiblyProcessed` kept.
package protocol WebPushTransport: Sendable {
    func start(_ request: WebPushWireRequest, deadline: ContinuousClock.Instant,
               completion: @escaping @Sendable (Result<WebPushWireResponse, NorqError>) -> Void)
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
