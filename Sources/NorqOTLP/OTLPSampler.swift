import Synchronization

/// Which new traces are recorded (the OpenTelemetry `ParentBased(TraceIdRatioBased)` sampler): a span with a parent
/// follows the parent's sampled flag; a root span is recorded when its trace id's low 63 bits fall below
/// `ratio x 2^63`, so every service sampling the same trace at the same ratio decides alike. A pure value.
public struct OTLPSampler: Sendable, Hashable {
    /// The share of new traces recorded, 0...1.
    public let ratio: Double
    /// The bound the low 63 bits of a trace id are compared with.
    let bound: UInt64

    /// A sampler recording `ratio` (clamped to 0...1) of new traces.
    public init(ratio: Double) {
        let ratio = ratio.isFinite ? min(1, max(0, ratio)) : 0
        self.ratio = ratio
        self.bound = ratio >= 1 ? UInt64.max : UInt64(ratio * 9_223_372_036_854_775_808.0)
    }

    /// Whether a span is recorded: the parent's flag when there is a parent, else the trace id's ratio decision.
    public func isSampled(parent: OTLPSpanContext?, traceIDLow: UInt64) -> Bool {
        if let parent { return parent.sampled }
        if bound == UInt64.max { return true }
        return (traceIDLow & 0x7FFF_FFFF_FFFF_FFFF) < bound
    }
}

/// Trace and span ids: SplitMix64 seeded from the system's random source (a few nanoseconds an id, not a
/// `getrandom` call each), its state one atomic counter, so spans started on many threads at once take ids without
/// waiting for a lock (a lock here was contended in `perf` of a traced `norq serve`): SplitMix64's state only advances
/// by a constant, so an atomic add is the whole step. Ids identify, they do not protect: W3C asks for uniqueness and
/// randomness, not unpredictability.
final class OTLPIDSource: Sendable {
    /// SplitMix64's step (the golden ratio's 64-bit fraction).
    static let increment: UInt64 = 0x9E37_79B9_7F4A_7C15

    private let state: Atomic<UInt64>

    init(seed: UInt64? = nil) {
        var system = SystemRandomNumberGenerator()
        state = Atomic(seed ?? system.next())
    }

    /// The next non-zero 64-bit id.
    func next() -> UInt64 {
        while true {
            let z = Self.mix(state.wrappingAdd(Self.increment, ordering: .relaxed).newValue)
            if z != 0 { return z }
        }
    }

    /// SplitMix64's output function of a state.
    static func mix(_ state: UInt64) -> UInt64 {
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
