import NorqCore

// Segments (issue 29): a send's targets are stored in segments of up to `DeliveryStoreSettings.segmentSize`
// targets, the claim unit. A segment is two rows: its immutable targets (one blob) and its small, mutable state
// (lease, attempts, counts by outcome, and `SegmentProgress`: which targets are done and the outcomes worth
// keeping). A worker leases a whole segment with one compare-and-set and checkpoints its progress with one update
// per segment; a target to retry moves to a new *retry segment* with its own due time; a finished segment moves to
// history as its summary, keeping only its non-delivered targets. See `docs/durable-delivery.md`.

/// A target as a segment stores it.
package struct SegmentTarget: Sendable, Hashable {
    /// Its place in the send (report order).
    package var position: Int
    /// The target, serialized (`DeliveryTarget.storedJSON`).
    package var target: String
    /// The token or channel id (the registry's key).
    package var identity: String
    package var provider: String?
    package var recipientID: String?
    /// The stable message id every attempt carries (`apns-id`).
    package var messageID: String?
    /// Claims counted before this segment (a retry segment's targets carry their earlier attempts).
    package var attempts: Int
    /// An earlier attempt may have reached the provider.
    package var mayHaveBeenDelivered: Bool
    /// When the service accepted it (ms): set when it moves to a receipt segment (its `last` is the accepted
    /// answer, with the ticket id), kept while its receipt is polled.
    package var acceptedAt: Int64?
    /// The last answer (a retried target's), nil for a fresh one.
    package var last: StoredOutcome? {
        get { boxedLast?.value }
        set { boxedLast = newValue.map(Indirect.init) }
    }
    /// Out of line: a fresh target has none (see `Indirect`).
    private var boxedLast: Indirect<StoredOutcome>?

    package init(position: Int, target: String, identity: String, provider: String?, recipientID: String?,
                 messageID: String?, attempts: Int = 0, mayHaveBeenDelivered: Bool = false, last: StoredOutcome? = nil,
                 acceptedAt: Int64? = nil) {
        self.position = position
        self.target = target
        self.identity = identity
        self.provider = provider
        self.recipientID = recipientID
        self.messageID = messageID
        self.attempts = attempts
        self.mayHaveBeenDelivered = mayHaveBeenDelivered
        self.last = last
        self.acceptedAt = acceptedAt
    }

    /// It waits for its receipt (it is in a receipt segment): the service accepted it and its last answer is that.
    package var awaitsReceipt: Bool { last?.isAccepted == true }
}

/// Counts of a segment's targets by final state (hot and history): what `stateCounts` and `counts` add up without
/// reading any blob.
package struct SegmentCounts: Sendable, Hashable {
    package var delivered = 0
    package var rejected = 0
    package var failed = 0
    package var skipped = 0

    package init(delivered: Int = 0, rejected: Int = 0, failed: Int = 0, skipped: Int = 0) {
        self.delivered = delivered
        self.rejected = rejected
        self.failed = failed
        self.skipped = skipped
    }

    package mutating func add(_ state: DeliveryState) {
        switch state {
        case .delivered: delivered += 1
        case .rejected: rejected += 1
        case .skipped: skipped += 1
        default: failed += 1
        }
    }

    /// Adds these counts into `counts` (zero counts are left out).
    package func add(into counts: inout [DeliveryState: Int]) {
        for (state, count) in [(DeliveryState.delivered, delivered), (.rejected, rejected), (.failed, failed),
                               (.skipped, skipped)] where count > 0 {
            counts[state, default: 0] += count
        }
    }
}

/// Which targets of a segment are done, and what is kept of them: the outcome (with the target) of every target
/// not delivered, a marker for a target moved to a retry segment (or given back), and for a delivered target only
/// the provider's message id or status when they differ from the ones sent (FCM names its messages; Web Push
/// answers 201). A delivered target with neither costs one bit.
package struct SegmentProgress: Sendable, Hashable {
    package enum Entry: Sendable, Hashable {
        /// Finished other than delivered: the outcome, the target (history keeps both) and when (ms).
        case finished(StoredOutcome, SegmentTarget, at: Int64)
        /// Moved to a retry segment, or given back into a new segment: the target's outcome is there.
        case moved
        /// Delivered with the provider's own message id, a status other than 200, or after a re-send that may have
        /// delivered it twice; or only accepted by the service (`accepted`: a ticket, as Expo's, whose receipt is
        /// not fetched on the durable path: `StoredOutcome.acceptedClassification`).
        case delivered(messageID: String?, status: Int?, mayHaveBeenDelivered: Bool, accepted: Bool = false)
    }

    /// One bit per target (index in the segment): done.
    package var done: [UInt8]
    package var entries: [Int: Entry]

    package init(count: Int) {
        done = [UInt8](repeating: 0, count: (count + 7) / 8)
        entries = [:]
    }

    package func isDone(_ index: Int) -> Bool {
        index / 8 < done.count && done[index / 8] & (1 << UInt8(index % 8)) != 0
    }

    package mutating func markDone(_ index: Int) {
        done[index / 8] |= 1 << UInt8(index % 8)
    }
}

/// A sorted set of positions as ranges: a fresh segment is one range; a retry segment lists what it holds.
package struct PositionRanges: Sendable, Hashable {
    package var ranges: [Range<Int>]

    package init(_ ranges: [Range<Int>]) { self.ranges = ranges }

    /// The ranges of these positions, in the given order (each index of the segment in turn).
    package init(positions: [Int]) {
        var ranges: [Range<Int>] = []
        for position in positions {
            if let last = ranges.last, last.upperBound == position {
                ranges[ranges.count - 1] = last.lowerBound..<(position + 1)
            } else {
                ranges.append(position..<(position + 1))
            }
        }
        self.ranges = ranges
    }

    /// The positions in index order.
    package var positions: [Int] { ranges.flatMap { Array($0) } }
    package var count: Int { ranges.reduce(0) { $0 + $1.count } }
    package var lowest: Int { ranges.map(\.lowerBound).min() ?? 0 }
    package var highest: Int { ranges.map { $0.upperBound - 1 }.max() ?? 0 }
}

/// A hot segment's state row (without its targets).
package struct SegmentRecord: Sendable, Hashable {
    package var id: Int64
    package var sendID: String
    /// Targets in the segment.
    package var count: Int
    /// Targets not done yet.
    package var open: Int
    /// `pending` or `leased`.
    package var state: DeliveryState
    /// Claims of this segment (a target's attempts are its `SegmentTarget.attempts` plus these).
    package var attempts: Int
    package var nextAttemptAt: Int64
    package var leaseOwner: String?
    package var leaseToken: String?
    package var leaseExpiresAt: Int64?
    /// Claimed again after a lease expired: its open targets may have been sent by the worker that lost it.
    package var mayHaveBeenDelivered: Bool
    package var counts: SegmentCounts
    package var progress: SegmentProgress
    package var positions: PositionRanges
    package var createdAt: Int64

    package init(id: Int64, sendID: String, count: Int, open: Int, state: DeliveryState, attempts: Int,
                 nextAttemptAt: Int64, leaseOwner: String? = nil, leaseToken: String? = nil,
                 leaseExpiresAt: Int64? = nil, mayHaveBeenDelivered: Bool = false, counts: SegmentCounts,
                 progress: SegmentProgress, positions: PositionRanges, createdAt: Int64) {
        self.id = id
        self.sendID = sendID
        self.count = count
        self.open = open
        self.state = state
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.leaseOwner = leaseOwner
        self.leaseToken = leaseToken
        self.leaseExpiresAt = leaseExpiresAt
        self.mayHaveBeenDelivered = mayHaveBeenDelivered
        self.counts = counts
        self.progress = progress
        self.positions = positions
        self.createdAt = createdAt
    }
}

/// A finished segment as history keeps it: its positions, counts, and the entries of its progress (no targets but
/// the non-delivered ones).
package struct SegmentHistoryRecord: Sendable, Hashable {
    package var id: Int64
    package var sendID: String
    package var count: Int
    /// Claims of the segment (a delivered target's attempts are its earlier ones plus these).
    package var attempts: Int
    package var counts: SegmentCounts
    package var progress: SegmentProgress
    package var positions: PositionRanges
    package var finishedAt: Int64

    package init(id: Int64, sendID: String, count: Int, attempts: Int = 0, counts: SegmentCounts,
                 progress: SegmentProgress, positions: PositionRanges, finishedAt: Int64) {
        self.id = id
        self.sendID = sendID
        self.count = count
        self.attempts = attempts
        self.counts = counts
        self.progress = progress
        self.positions = positions
        self.finishedAt = finishedAt
    }
}

/// A segment to insert (at enqueue, or a retry segment at a completion). Its targets are held encoded (the blob the
/// stores write): a send of a million targets does not hold a second copy of them as values while it is inserted.
package struct NewSegment: Sendable, Hashable {
    package var sendID: String
    /// The targets' blob (`SegmentCodec.encode(targets:)`).
    package let encodedTargets: [UInt8]
    package let positions: PositionRanges
    package let count: Int
    package var open: Int
    package var counts: SegmentCounts
    package var progress: SegmentProgress
    package var nextAttemptAt: Int64
    /// A *receipt segment*: its targets were accepted by the service and wait for their receipts (the stores keep
    /// the flag in a column, so that `stateCounts` counts its open targets as `accepted` without reading a blob).
    package var awaitsReceipts = false
    /// Every target finished already (at enqueue): the segment goes to history at once.
    package var isFinished: Bool { open == 0 }
    /// The targets, decoded again (the in-memory store keeps them as values).
    package var targets: [SegmentTarget] { (try? SegmentCodec.decodeTargets(encodedTargets)) ?? [] }

    package init(sendID: String, targets: [SegmentTarget], open: Int, counts: SegmentCounts = SegmentCounts(),
                 progress: SegmentProgress, nextAttemptAt: Int64, awaitsReceipts: Bool = false) {
        self.init(sendID: sendID, encodedTargets: SegmentCodec.encode(targets: targets),
                  positions: PositionRanges(positions: targets.map(\.position)), count: targets.count, open: open,
                  counts: counts, progress: progress, nextAttemptAt: nextAttemptAt)
        self.awaitsReceipts = awaitsReceipts
    }

    /// A segment of targets encoded already (a new send's `SendSegment`).
    package init(sendID: String, encodedTargets: [UInt8], positions: PositionRanges, count: Int, open: Int,
                 counts: SegmentCounts, progress: SegmentProgress, nextAttemptAt: Int64) {
        self.sendID = sendID
        self.encodedTargets = encodedTargets
        self.positions = positions
        self.count = count
        self.open = open
        self.counts = counts
        self.progress = progress
        self.nextAttemptAt = nextAttemptAt
    }
}

/// A token-invalid finish to record in the registry.
package struct RegistryUpdate: Sendable, Hashable {
    package var token: String
    package var provider: String?
    package var environment: String?
    package var outcome: StoredOutcome
}
