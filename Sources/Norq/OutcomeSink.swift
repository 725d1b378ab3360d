import NorqCore
import Synchronization

/// Where a send's outcomes go. `emit` never waits. A sink that can fill up (a streaming send whose consumer
/// is behind) says so through `hasRoom`, and producers start nothing new until `waitForRoom` calls back.
protocol OutcomeSink: Sendable {
    /// Takes the outcome of the target at `position` (its place in the send's report). `consuming`: the
    /// outcome moves into the sink instead of being copied (a copy retains each of its strings).
    func emit(_ position: Int, _ outcome: consuming PushOutcome)
    /// Whether the sink takes more outcomes without falling further behind.
    var hasRoom: Bool { get }
    /// True when there is room now. Otherwise false, and `resume` is called once when there is room (or the
    /// sink ended).
    func waitForRoom(_ resume: @escaping @Sendable () -> Void) -> Bool
}

extension OutcomeSink {
    /// `emit`, then, for a producer that is a task, waits while the sink is full.
    func emitWaiting(_ position: Int, _ outcome: PushOutcome) async {
        emit(position, outcome)
        guard !hasRoom else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if waitForRoom({ continuation.resume() }) { continuation.resume() }
        }
    }
}

/// Collects the outcomes of `send` into report order; always has room.
final class OutcomeCollector: OutcomeSink {
    private let slots: Mutex<[PushOutcome?]>
    init(count: Int) { slots = Mutex(Array(repeating: nil, count: count)) }
    func emit(_ position: Int, _ outcome: consuming PushOutcome) {
        var moving: PushOutcome? = outcome
        slots.withLock { $0[position] = moving.take() }
    }
    var hasRoom: Bool { true }
    func waitForRoom(_ resume: @escaping @Sendable () -> Void) -> Bool { true }
    var report: SendReport { SendReport(outcomes: slots.withLock { $0.compactMap { $0 } }) }
}
