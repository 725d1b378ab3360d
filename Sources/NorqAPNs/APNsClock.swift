/// The wall clock the provider reads (JWT `iat`, send times). Injectable so tests can simulate hours.
public struct APNsClock: Sendable {
    /// Current UNIX time in seconds.
    public var epochSeconds: @Sendable () -> Int64

    public init(epochSeconds: @escaping @Sendable () -> Int64) {
        self.epochSeconds = epochSeconds
    }

    /// The system wall clock. Read per notification (the send time), in whole seconds: on Linux the coarse clock
    /// (the time of the last timer tick, a few milliseconds behind at most) is read without the cost of a precise
    /// one.
    public static let system = APNsClock {
        var spec = timespec()
        #if os(Linux)
        clock_gettime(CLOCK_REALTIME_COARSE, &spec)
        #else
        clock_gettime(CLOCK_REALTIME, &spec)
        #endif
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
