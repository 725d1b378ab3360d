import Synchronization

/// Spans encoded as they ended: each one a `ScopeSpans.spans` field (its tag, its length, its `Span` message), one
/// after another, as an export request carries them. A span's attributes are read once, when it ends, on the thread
/// that ends it; nothing of a span but these bytes waits for the exporter.
struct OTLPEncodedSpans: Sendable {
    private var writer: ProtobufWriter
    /// Where each span's field ends in `bytes` (the next one starts there).
    private var ends: [Int] = []

    /// The bytes reserved per span (a span of Norq's is ~250 bytes encoded).
    static let bytesPerSpan = 256

    init(reservingSpans spans: Int = 0) {
        writer = ProtobufWriter(capacity: spans * Self.bytesPerSpan)
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

    /// Empties the spans, keeping the storage of the bytes and the ends.
    mutating func removeAll() {
        writer.removeAll()
        ends.removeAll(keepingCapacity: true)
    }

    /// The bytes the held storage takes (the recycling bound, ``OTLPSpanBuffer/recycle(_:)``).
    var storageBytes: Int { writer.capacity + ends.capacity * MemoryLayout<Int>.stride }

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
///
/// Two sets of storage take turns: the exporter takes the held spans (``takeAll()``), sends them and gives the storage
/// back (``recycle(_:)``), emptied, for the take after next. So spans are written into memory that is already
/// allocated (before, every take made a new half-megabyte buffer, grown again span by span). Storage a burst grew past
/// ``recycleBound`` bytes is freed, not kept, so at most the held spans' bound plus one spare stay allocated.
final class OTLPSpanBuffer: Sendable {
    private struct Pending {
        var spans: OTLPEncodedSpans
        var dropped = 0
        /// Emptied storage the exporter gave back, put in place at the next take.
        var spare: OTLPEncodedSpans?
    }

    let maxQueueSize: Int
    let maxQueueBytes: Int
    let batchSize: Int
    /// The most bytes of storage ``recycle(_:)`` keeps (four times a batch's reserve): a buffer a burst grew
    /// beyond it is freed, not kept.
    let recycleBound: Int
    private let pending: Mutex<Pending>
    let wakeups: AsyncStream<Void>
    private let wakeup: AsyncStream<Void>.Continuation

    init(maxQueueSize: Int, maxQueueBytes: Int = 16 << 20, batchSize: Int) {
        self.maxQueueSize = max(1, maxQueueSize)
        self.maxQueueBytes = max(1, maxQueueBytes)
        self.batchSize = max(1, min(batchSize, self.maxQueueSize))
        self.recycleBound = 4 * Self.reserve(batchSize: self.batchSize) * (OTLPEncodedSpans.bytesPerSpan + MemoryLayout<Int>.stride)
        self.pending = Mutex(Pending(spans: OTLPEncodedSpans(reservingSpans: Self.reserve(batchSize: self.batchSize))))
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

    /// The spans a storage is first made for.
    static func reserve(batchSize: Int) -> Int { min(batchSize, 4096) }

    /// Everything held (oldest first), and the count dropped since the last take. Give the spans back with
    /// ``recycle(_:)`` once they are sent.
    func takeAll() -> (spans: OTLPEncodedSpans, dropped: Int) {
        pending.withLock { pending in
            // New storage only when none was given back (the first take, or after a burst's storage was freed).
            let replacement = pending.spare.take() ?? OTLPEncodedSpans(reservingSpans: Self.reserve(batchSize: batchSize))
            let taken = (pending.spans, pending.dropped)
            pending.spans = replacement
            pending.dropped = 0
            return taken
        }
    }

    /// Takes back the storage of spans ``takeAll()`` returned and that were sent: emptied and kept for the next take,
    /// unless its storage is above ``recycleBound`` or storage is already kept.
    func recycle(_ spans: consuming OTLPEncodedSpans) {
        guard spans.storageBytes <= recycleBound else { return }
        spans.removeAll()  // keeps the storage when the caller gave it up (`consume`); else a copy is emptied
        let emptied = spans
        pending.withLock { pending in
            if pending.spare == nil { pending.spare = emptied }
        }
    }

    /// Whether emptied storage waits for the next take (tests).
    var hasSpare: Bool { pending.withLock { $0.spare != nil } }

    var count: Int { pending.withLock { $0.spans.count } }
}
