import Synchronization

/// Spans encoded as they ended: each one a `ScopeSpans.spans` field (its tag, its length, its `Span` message), one
/// after another, as an export request carries them. A span's attributes are read once, when it ends, on the thread
/// that ends it; nothing of a span but these bytes waits for the exporter.
struct OTLPEncodedSpans: Sendable {
    private var writer: ProtobufWriter
    /// Where each span's field ends in `bytes` (the next one starts there).
    private var ends: [Int] = []

    init(reservingSpans spans: Int = 0) {
        writer = ProtobufWriter(capacity: spans * 256)
        ends.reserveCapacity(spans)
    }

    var bytes: [UInt8] { writer.bytes }
    var byteCount: Int { writer.bytes.count }
    var count: Int { ends.count }

    /// Appends one span's field, written by `write` straight into the held bytes (no buffer of its own).
    mutating func appendSpan(_ write: (inout ProtobufWriter) -> Void) {
        write(&writer)
        ends.append(writer.bytes.count)
    }

    /// The fields of the spans at `spans` (indices), as one run of bytes.
    func fields(_ spans: Range<Int>) -> ArraySlice<UInt8> {
        guard !spans.isEmpty else { return writer.bytes[0..<0] }
        let start = spans.lowerBound == 0 ? 0 : ends[spans.lowerBound - 1]
        return writer.bytes[start..<ends[spans.upperBound - 1]]
    }
}

/// The spans that ended and wait for export, encoded (``OTLPEncodedSpans``): at most `maxQueueSize` spans and about
/// `maxQueueBytes` bytes (a span is refused once the bytes held reach the bound; beyond either bound spans are
/// dropped and counted). A span's end appends under a lock; the exporter is woken (one wake-up held, no matter how
/// many are asked for) when a batch fills, when a flush is asked for, and by its own timer.
final class OTLPSpanBuffer: Sendable {
    private struct Pending {
        var spans: OTLPEncodedSpans
        var dropped = 0
    }

    let maxQueueSize: Int
    let maxQueueBytes: Int
    let batchSize: Int
    private let pending: Mutex<Pending>
    let wakeups: AsyncStream<Void>
    private let wakeup: AsyncStream<Void>.Continuation

    init(maxQueueSize: Int, maxQueueBytes: Int = 16 << 20, batchSize: Int) {
        self.maxQueueSize = max(1, maxQueueSize)
        self.maxQueueBytes = max(1, maxQueueBytes)
        self.batchSize = max(1, min(batchSize, self.maxQueueSize))
        self.pending = Mutex(Pending(spans: OTLPEncodedSpans(reservingSpans: min(self.batchSize, 4096))))
        (wakeups, wakeup) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Encodes `span` into the held bytes and queues it, or counts it dropped when a bound is reached. Encoded under
    /// the lock, in place (about a microsecond): no buffer per span, no copy.
    func append(_ span: borrowing OTLPFinishedSpan) {
        let filled: Bool = pending.withLock { pending in
            guard pending.spans.count < maxQueueSize, pending.spans.byteCount < maxQueueBytes else {
                pending.dropped += 1
                return false
            }
            pending.spans.appendSpan { OTLPTraceEncoder.appendSpanField(span, into: &$0) }
            return pending.spans.count == batchSize
        }
        if filled { wakeup.yield() }
    }

    /// Wakes the exporter to send what is held.
    func requestFlush() { wakeup.yield() }

    /// Ends the wake-ups (the exporter's loop ends; it then sends what is left).
    func finish() { wakeup.finish() }

    /// Everything held (oldest first), and the count dropped since the last take.
    func takeAll() -> (spans: OTLPEncodedSpans, dropped: Int) {
        pending.withLock { pending in
            let taken = (pending.spans, pending.dropped)
            pending.spans = OTLPEncodedSpans(reservingSpans: min(batchSize, 4096))
            pending.dropped = 0
            return taken
        }
    }

    var count: Int { pending.withLock { $0.spans.count } }
}
