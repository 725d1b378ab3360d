import DequeModule
import Synchronization

/// The plans of the sends this process enqueued most recently, by send id, so that a worker in the same process
/// delivers them without reading and decoding the send back from the store.
///
/// Bounded to `capacity` sends (the oldest leaves first); a miss (another process's send, or an older one) reads
/// the store as before. The plan is the very one whose encoding the store holds.
final class SendPlanCache: Sendable {
    private struct State {
        var plans: [String: SendPlan] = [:]
        var order = Deque<String>()
    }
    let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) { self.capacity = max(0, capacity) }

    func insert(_ plan: SendPlan, for sendID: String) {
        guard capacity > 0 else { return }
        state.withLock { state in
            if state.plans.updateValue(plan, forKey: sendID) == nil { state.order.append(sendID) }
            while state.order.count > capacity, let oldest = state.order.popFirst() {
                state.plans.removeValue(forKey: oldest)
            }
        }
    }

    func remove(_ sendID: String) {
        state.withLock { state in
            if state.plans.removeValue(forKey: sendID) != nil, let index = state.order.firstIndex(of: sendID) {
                state.order.remove(at: index)
            }
        }
    }

    /// The cached plans among `sendIDs`.
    func plans(for sendIDs: some Sequence<String>) -> [String: SendPlan] {
        state.withLock { state in
            var found: [String: SendPlan] = [:]
            for id in sendIDs { if let plan = state.plans[id] { found[id] = plan } }
            return found
        }
    }

    var count: Int { state.withLock { $0.plans.count } }
}
