package import NorqCore
import DequeModule
import Synchronization

/// The bookkeeping of a group commit, as a value type: which caller runs the next batch, which requests it takes.
///
/// At most one batch runs at a time. A request that arrives while one runs waits in `pending`; when the batch
/// ends, the oldest waiting request's caller becomes the next leader and takes everything that piled up meanwhile
/// (at most `maxRequests` requests, and no more than `maxWeight` in weight unless a single request weighs more).
/// So under load many callers share one transaction, and an idle store still commits a lone request at once.
package struct GroupCommitState<Request, Waiter> {
    package struct Entry {
        package var id: UInt64
        package var request: Request
        package var weight: Int
        package var waiter: Waiter
    }

    /// What a caller that just submitted does.
    package enum SubmitAction: Equatable {
        /// No batch runs: this caller leads one now.
        case lead
        /// A batch runs: wait to be answered or promoted.
        case wait
    }

    package let maxRequests: Int
    package let maxWeight: Int
    private var pending = Deque<Entry>()
    /// Requests submitted and not yet taken by a batch.
    package var pendingCount: Int { pending.count }
    package private(set) var running = false

    package init(maxRequests: Int, maxWeight: Int) {
        self.maxRequests = max(1, maxRequests)
        self.maxWeight = max(1, maxWeight)
    }

    package mutating func submit(_ entry: Entry) -> SubmitAction {
        pending.append(entry)
        if running { return .wait }
        running = true
        return .lead
    }

    /// The leader takes the next batch: the oldest pending requests within the bounds (always at least one).
    package mutating func takeBatch() -> [Entry] {
        var batch: [Entry] = []
        var weight = 0
        while let next = pending.first, batch.count < maxRequests,
              batch.isEmpty || weight + next.weight <= maxWeight {
            weight += next.weight
            batch.append(pending.removeFirst())
        }
        return batch
    }

    /// The batch ended: the entry whose caller leads the next one (still pending), or nil when none waits.
    package mutating func batchEnded() -> Entry? {
        guard let next = pending.first else {
            running = false
            return nil
        }
        return next
    }
}

/// Group commit: concurrent callers' requests gathered into batches, each led by one of the callers (there is no
/// background task: the leader runs its batch in a task that it awaits), so N concurrent enqueues cost one
/// transaction instead of N.
///
/// A caller's cancellation does not cancel a batch it leads (the batch runs in a task of its own that it awaits)
/// nor take a waiting caller's request out of the next batch: every submitted request is committed or fails
/// with the batch, within the deadline `run` keeps.
///
/// Bounds: a batch holds at most `maxRequests` requests and `maxWeight` weight (e.g. rows); the requests waiting
/// are those of callers suspended in `submit`, so the queue is bounded by the callers themselves.
package final class GroupCommit<Request: Sendable, Response: Sendable>: Sendable {
    private enum Role: Sendable {
        case lead
        case answered(Result<Response, NorqError>)
    }
    private typealias State = GroupCommitState<Request, CheckedContinuation<Role, Never>>
    private struct Box: ~Copyable {
        var machine: State
        var nextID: UInt64 = 0
    }
    private let state: Mutex<Box>

    package init(maxRequests: Int, maxWeight: Int) {
        state = Mutex(Box(machine: State(maxRequests: maxRequests, maxWeight: maxWeight)))
    }

    /// Submits `request` and returns its response. When this caller leads a batch, `run` is called with the
    /// batch's requests (this one among them) and must return one result per request, in order.
    package func submit(_ request: Request, weight: Int,
                        run: @escaping @Sendable ([Request]) async -> [Result<Response, NorqError>]) async throws(NorqError) -> Response {
        var ownID: UInt64 = 0
        let role = await withCheckedContinuation { (continuation: CheckedContinuation<Role, Never>) in
            let action = state.withLock { box -> State.SubmitAction in
                box.nextID += 1
                ownID = box.nextID
                return box.machine.submit(State.Entry(id: box.nextID, request: request, weight: weight,
                                                      waiter: continuation))
            }
            if action == .lead { continuation.resume(returning: .lead) }
        }
        if case .answered(let result) = role { return try result.get() }
        // This caller leads: its own entry is the oldest pending one, so it is in the batch it takes.
        let batch = state.withLock { $0.machine.takeBatch() }
        // The batch carries other callers' requests: it runs in a task of its own, awaited here, so that the
        // cancellation of this caller does not cancel their commit.
        let requests = batch.map(\.request)
        var results = await Task { await run(requests) }.value
        if results.count != batch.count {
            results = Array(repeating: .failure(NorqError(.storeFailed, "a batch returned \(results.count) results for \(batch.count) requests")),
                            count: batch.count)
        }
        let next = state.withLock { $0.machine.batchEnded() }
        var own: Result<Response, NorqError> = .failure(NorqError(.storeFailed, "the batch lost its leader's request"))
        for (entry, result) in zip(batch, results) {
            if entry.id == ownID { own = result } else { entry.waiter.resume(returning: .answered(result)) }
        }
        next?.waiter.resume(returning: .lead)
        return try own.get()
    }
}
