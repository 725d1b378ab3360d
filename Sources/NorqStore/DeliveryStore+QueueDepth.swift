import NorqCore
/// The rows of the hot outbox at one instant, in five disjoint groups (their sum is every pending and leased row).
/// Finished rows (history) are never counted.
public struct QueueDepth: Sendable, Hashable {
    /// Pending rows whose `next_attempt_at` has come: a worker takes them at its next claim. A number that keeps
    /// growing means the workers do not keep up.
    public var due: Int
    /// Pending rows waiting for a later attempt (a retry's backoff).
    public var scheduled: Int
    /// Rows a worker holds under a live lease (being sent).
    public var leased: Int
    /// Leased rows whose lease ran out (their worker died or stalled): claimable again, like `due`.
    public var leaseExpired: Int
    /// Pending rows the service accepted, waiting for their receipts (a receipt segment, due or not): polls, not
    /// sends. Counted apart so that an Expo send's 15-minute receipt delay does not read as a backlog of pushes.
    public var awaitingReceipts: Int

    public init(due: Int = 0, scheduled: Int = 0, leased: Int = 0, leaseExpired: Int = 0, awaitingReceipts: Int = 0) {
        self.due = due
        self.scheduled = scheduled
        self.leased = leased
        self.leaseExpired = leaseExpired
        self.awaitingReceipts = awaitingReceipts
    }

    /// Every row of the hot outbox.
    public var total: Int { due + scheduled + leased + leaseExpired + awaitingReceipts }

    /// The groups with their metric label values (`norq_outbox_rows{state=…}`), in a fixed order.
    public var byLabel: [(label: String, rows: Int)] {
        [("due", due), ("scheduled", scheduled), ("leased", leased), ("lease-expired", leaseExpired),
         ("awaiting-receipt", awaitingReceipts)]
    }

    /// Puts one hot row in its group (the rule every store applies; the in-memory store uses it directly).
    /// `awaitsReceipt`: the row is in a receipt segment.
    public mutating func count(state: DeliveryState, nextAttemptAt: Int64, leaseExpiresAt: Int64?, now: Int64,
                               rows: Int = 1, awaitsReceipt: Bool = false) {
        switch state {
        case .pending:
            if awaitsReceipt {
                awaitingReceipts += rows
            } else if nextAttemptAt <= now { due += rows } else { scheduled += rows }
        case .leased:
            if (leaseExpiresAt ?? Int64.min) <= now { leaseExpired += rows } else { leased += rows }  // as `isClaimable`
        default:
            break
        }
    }
}
