import NorqCore

/// Time as the router sees it: tests inject a sleeper that does not really sleep long.
public struct RouterClock: Sendable {
    public var now: @Sendable () -> ContinuousClock.Instant
    public var sleep: @Sendable (Duration) async throws -> Void
    /// A random number in `0..<1` for retry jitter.
    public var random: @Sendable () -> Double

    public init(now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now },
                sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
                random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }) {
        self.now = now
        self.sleep = sleep
        self.random = random
    }

    /// The real continuous clock.
    public static let continuous = RouterClock()
}
