/// Which push-service origins could be reached at their last attempt, for readiness (`WebPushProvider.health()`).
/// Pure: the transport records what happened and asks.
///
/// A Web Push provider talks to many push services (one per browser vendor, and whatever origin a subscription
/// names), so one dead origin says little about this process: a subscription may point at a service that is gone,
/// and the other origins still work. What readiness should catch is this process being cut off (egress, DNS,
/// proxy, the trust store): then *every* origin fails. So: not ready when at least one origin was tried and every
/// origin remembered could not be reached at its last attempt (no connection could be made over HTTP/2 or
/// HTTP/1.1); any answer from any origin, whatever its status, makes it ready again. Nothing tried yet is ready.
///
/// Bounded: at most `capacity` origins are remembered; a new one beyond that replaces the least recently seen.
package struct WebPushOriginHealth: Sendable {
    /// Why the provider is not ready.
    package struct Unreachable: Sendable, Equatable {
        /// Origins remembered (all unreachable).
        package var origins: Int
        /// The most recent failure.
        package var lastOrigin: String
        package var reason: String
    }

    private struct Entry {
        var reachable: Bool
        var reason: String
        var seen: UInt64
    }

    private var entries: [String: Entry] = [:]
    private var unreachableCount = 0
    private var tick: UInt64 = 0
    private var last: (origin: String, reason: String)?
    private let capacity: Int

    package init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// The origin answered (any HTTP status).
    package mutating func answered(_ origin: String) {
        record(origin, reachable: true, reason: "")
    }

    /// No connection to the origin could be made (connect, DNS or TLS handshake failure), on every protocol tried.
    package mutating func unreachable(_ origin: String, reason: String) {
        record(origin, reachable: false, reason: reason)
        last = (origin, reason)
    }

    /// Whether recording an answer from `origin` would change nothing (the hot path skips it).
    package func isReachable(_ origin: String) -> Bool { entries[origin]?.reachable == true }

    /// Set when every remembered origin was unreachable at its last attempt and there are at least two of them;
    /// nil when any answered, or when only one was tried (one subscription naming a push service that is gone, or a
    /// host that does not resolve, says nothing about this instance's egress).
    package var allUnreachable: Unreachable? {
        guard entries.count >= 2, unreachableCount == entries.count, let last else { return nil }
        return Unreachable(origins: entries.count, lastOrigin: last.origin, reason: last.reason)
    }

    private mutating func record(_ origin: String, reachable: Bool, reason: String) {
        tick &+= 1
        if let old = entries[origin] {
            if !old.reachable { unreachableCount -= 1 }
        } else if entries.count >= capacity,
                  let oldest = entries.min(by: { $0.value.seen < $1.value.seen }) {
            if !oldest.value.reachable { unreachableCount -= 1 }
            entries.removeValue(forKey: oldest.key)
        }
        entries[origin] = Entry(reachable: reachable, reason: reason, seen: tick)
        if !reachable { unreachableCount += 1 }
    }
}
