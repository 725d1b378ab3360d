/// Expo's per-project rate (600 notifications per second) as a pure rule: a generic cell rate (GCRA) per project,
/// with one second's worth of notifications as the burst. ``reserve(_:project:now:)`` says how long to wait before
/// sending `count` notifications and books them. No clock of its own (the caller passes `now`), no I/O.
///
/// Bound: at most ``maxProjects`` projects are tracked; past it the ones already back at full burst (nothing to
/// remember) are dropped, then the oldest.
package struct ExpoRateLimiter: Sendable {
    /// Notifications per second per project; 0 turns the limiter off.
    package let rate: Int
    package static let maxProjects = 10_000
    /// Per project: the theoretical arrival time of the next notification.
    private var arrival: [String: ContinuousClock.Instant] = [:]

    package init(rate: Int) {
        self.rate = rate
    }

    /// The wait before `count` notifications of `project` may go, booked as sent at `now + wait`.
    package mutating func reserve(_ count: Int, project: String, now: ContinuousClock.Instant) -> Duration {
        guard rate > 0, count > 0 else { return .zero }
        let cost = Duration.seconds(count) / rate  // exact for whole notifications, not count x a rounded interval
        let burst = Duration.seconds(1)
        let start = max(arrival[project] ?? now, now)
        let next = start + cost
        let wait = max(.zero, now.duration(to: next) - burst)
        if arrival[project] == nil && arrival.count >= Self.maxProjects { evict(now: now) }
        arrival[project] = next
        return wait
    }

    /// Gives back a booking of `count` notifications of `project` that were not sent (a request the service refused
    /// without processing it, as `PUSH_TOO_MANY_EXPERIENCE_IDS`), so that sending them again counts them once.
    package mutating func release(_ count: Int, project: String, now: ContinuousClock.Instant) {
        guard rate > 0, count > 0, let next = arrival[project] else { return }
        let earlier = next - Duration.seconds(count) / rate
        arrival[project] = earlier > now ? earlier : nil
    }

    private mutating func evict(now: ContinuousClock.Instant) {
        arrival = arrival.filter { $0.value > now }
        if arrival.count >= Self.maxProjects, let oldest = arrival.min(by: { $0.value < $1.value })?.key {
            arrival.removeValue(forKey: oldest)
        }
    }

    /// Projects tracked (for tests of the bound).
    package var trackedProjects: Int { arrival.count }
}

/// Which Expo project a token belongs to, as learnt from `PUSH_TOO_MANY_EXPERIENCE_IDS` answers: later sends group
/// tokens by it and never mix projects again. Bounded: at most ``limit`` tokens, the oldest forgotten first.
package struct ExpoProjectMemory: Sendable {
    package let limit: Int
    private var projects: [String: String] = [:]
    private var order: [String] = []
    private var head = 0

    package init(limit: Int = 100_000) {
        self.limit = max(1, limit)
    }

    package func project(of token: String) -> String? { projects[token] }

    package mutating func remember(_ token: String, project: String) {
        if projects.updateValue(project, forKey: token) == nil {
            order.append(token)
            if projects.count > limit {
                projects.removeValue(forKey: order[head])
                head += 1
                if head > limit { order.removeFirst(head); head = 0 }
            }
        }
    }

    package var count: Int { projects.count }
}
