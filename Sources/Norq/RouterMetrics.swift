import Metrics
import NorqCore
import Synchronization

/// The router's swift-metrics instruments. Labels carry provider instance names and bounded reason
/// strings only, never tokens.
final class RouterMetrics: Sendable {
    /// The router's own codes kept as reason labels (provider reasons come from `PushProvider.knownReasons`).
    static let routingReasons: Set<String> = [
        "routing/no-provider", "routing/unknown-provider", "routing/platform-not-supported",
    ]

    /// Reasons kept as label values (the providers' `knownReasons` and the routing codes); any other reason is
    /// counted as `other`.
    let knownReasons: Set<String>

    private let factory: any MetricsFactory
    private let prefix: String
    private let counters = Mutex<[String: Counter]>([:])
    private let timers = Mutex<[String: Timer]>([:])
    private let inFlight: Meter
    /// The per-token instruments of one provider, made up front for every known provider: the hot path then
    /// finds them by a scan of a few names, without hashing one, building a key or taking a lock.
    /// A class: a lookup hands out one reference, not five (a copy of a struct of five instruments was five
    /// retains and five releases, three lookups per token).
    final class ProviderInstruments: Sendable {
        let sent: Counter
        let delivered: Counter
        let retried: Counter
        let deduplicated: Counter
        let latency: Timer

        init(sent: Counter, delivered: Counter, retried: Counter, deduplicated: Counter, latency: Timer) {
            self.sent = sent
            self.delivered = delivered
            self.retried = retried
            self.deduplicated = deduplicated
            self.latency = latency
        }

        func recordLatency(_ duration: Duration) {
            latency.recordNanoseconds(RouterMetrics.nanoseconds(duration))
        }

        func counter(_ name: String) -> Counter? {
            switch name {
            case "sent": sent
            case "delivered": delivered
            case "retried": retried
            case "deduplicated": deduplicated
            default: nil
            }
        }
    }
    private let plain: [(provider: String, instruments: ProviderInstruments)]

    init(factory: (any MetricsFactory)?, prefix: String = "norq", providers: [String] = [],
         reasons: Set<String> = []) {
        self.knownReasons = reasons.union(Self.routingReasons)
        let factory = factory ?? MetricsSystem.factory
        self.factory = factory
        self.prefix = prefix
        self.inFlight = Meter(label: "\(prefix)_in_flight", dimensions: [], factory: factory)
        var plain: [(provider: String, instruments: ProviderInstruments)] = []
        for provider in providers where !plain.contains(where: { $0.provider == provider }) {
            func counter(_ name: String) -> Counter {
                Counter(label: "\(prefix)_\(name)_total", dimensions: [("provider", provider)], factory: factory)
            }
            let latency = Timer(label: "\(prefix)_delivery_duration", dimensions: [("provider", provider)], factory: factory)
            plain.append((provider, ProviderInstruments(sent: counter("sent"), delivered: counter("delivered"),
                                                        retried: counter("retried"),
                                                        deduplicated: counter("deduplicated"), latency: latency)))
        }
        self.plain = plain
    }

    /// A provider's own instruments (a router has a handful of providers: a scan compares a few short names, where
    /// a dictionary hashed the name per call, three calls per token).
    func instruments(of provider: String) -> ProviderInstruments? {
        for index in plain.indices where plain[index].provider == provider { return plain[index].instruments }
        return nil
    }

    func reasonLabel(_ reason: String?) -> String {
        guard let reason else { return "none" }
        return knownReasons.contains(reason) ? reason : "other"
    }

    func count(_ name: String, provider: String?, reason: String? = nil) {
        if reason == nil, let provider, let counter = instruments(of: provider)?.counter(name) {
            counter.increment()
            return
        }
        var dimensions: [(String, String)] = [("provider", provider ?? "none")]
        if let reason { dimensions.append(("reason", reasonLabel(reason))) }
        let key = name + "|" + dimensions.map { $0.0 + "=" + $0.1 }.joined(separator: ",")
        let counter = counters.withLock { counters in
            if let existing = counters[key] { return existing }
            let made = Counter(label: "\(prefix)_\(name)_total", dimensions: dimensions, factory: factory)
            counters[key] = made
            return made
        }
        counter.increment()
    }

    func recordLatency(_ duration: Duration, provider: String) {
        if let instruments = instruments(of: provider) {
            instruments.recordLatency(duration)
            return
        }
        let timer = timers.withLock { timers in
            if let existing = timers[provider] { return existing }
            let made = Timer(label: "\(prefix)_delivery_duration", dimensions: [("provider", provider)],
                             factory: factory)
            timers[provider] = made
            return made
        }
        timer.recordNanoseconds(Self.nanoseconds(duration))
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    func inFlightChanged(by delta: Int) {
        if delta > 0 { inFlight.increment(by: Double(delta)) } else { inFlight.decrement(by: Double(-delta)) }
    }
}
