import Metrics
import Synchronization

/// Request counters and latency by route pattern (`/v1/sends/{id}`, never a concrete id), method and status.
/// Label values come from a closed set (route patterns, six methods, status codes), so the series are bounded.
final class RequestMetrics: Sendable {
    private let counters = Mutex<[String: Counter]>([:])
    private let timers = Mutex<[String: Metrics.Timer]>([:])
    static let methods: Set<String> = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"]

    func record(route: String, method: String, status: Int, duration: Duration) {
        let method = Self.methods.contains(method) ? method : "other"
        let key = "\(route)|\(method)|\(status)"
        let counter = counters.withLock { counters in
            if let existing = counters[key] { return existing }
            let made = Counter(label: "norq_http_requests_total",
                               dimensions: [("route", route), ("method", method), ("status", "\(status)")])
            counters[key] = made
            return made
        }
        counter.increment()
        let timer = timers.withLock { timers in
            if let existing = timers[route] { return existing }
            let made = Metrics.Timer(label: "norq_http_request_duration_seconds", dimensions: [("route", route)],
                                     preferredDisplayUnit: .seconds)
            timers[route] = made
            return made
        }
        timer.record(duration: duration)
    }
}
