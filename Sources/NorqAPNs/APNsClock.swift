/// The wall clock the provider reads (JWT `iat`, send times). Injectable so tests can simulate hours.
public struct APNsClock: Sendable {
    /// Current UNIX time in seconds.
    public var epochSeconds: @Sendable () -> Int64

    public init(epochSeconds: @escaping @Sendable () -> Int64) {
        self.epochSeconds = epochSeconds
    }

    /// The system wall clock.
    public static let system = APNsClock {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
