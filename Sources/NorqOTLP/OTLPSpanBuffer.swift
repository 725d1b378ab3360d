import Synchronization

/// The spans that ended and wait for export: at most `maxQueueSize` (beyond it a span is dropped and counted). A
/// span's end appends under a lock; the exporter is woken (one wake-up held, no matter how many are asked for) when
/// a batch fills, when a flush is asked for, and by its own timer.
final class OTLPSpanBuffer: Sendable {
    private struct Pending {
        var spans: [OTLPFinishedSpan] = []
        var dropped = 0
    }

    let maxQueueSize: Int
    let batchSize: Int
    private let pending: Mutex<Pending>
    let wakeups: AsyncStream<Void>
    private let wakeup: AsyncStream<Void>.Continuation

    init(maxQueueSize: Int, batchSize: Int) {
        self.maxQueueSize = max(1, maxQueueSize)
        self.batchSize = max(1, min(batchSize, self.maxQueueSize))
        self.pending = Mutex(Pending())
        (wakeups, wakeup) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    func append(_ span: OTLPFinishedSpan) {
        let filled: Bool = pending.withLock { pending in
            guard pending.spans.count < maxQueueSize else { pending.dropped += 1; return false }
            pending.spans.append(span)
            return pending.spans.count == batchSize
        }
        if filled { wakeup.yield() }
    }

    /// Wakes the exporter to send what is held.
    func requestFlush() { wakeup.yield() }

    /// Ends the wake-ups (the exporter's loop ends; it then sends what is left).
    func finish() { wakeup.finish() }

    /// Everything held (oldest first), and the count dropped since the last take.
    func takeAll() -> (spans: [OTLPFinishedSpan], dropped: Int) {
        pending.withLock { pending in
            let taken = (pending.spans, pending.dropped)
            pending.spans = []
            pending.spans.reserveCapacity(min(batchSize, 4096))
            pending.dropped = 0
            return taken
        }
    }

    var count: Int { pending.withLock { $0.spans.count } }
}
