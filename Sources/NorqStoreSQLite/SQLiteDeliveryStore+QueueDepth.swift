public import NorqCore
public import NorqStore
import SQLiteNIO

extension SQLiteDeliveryStore {
    /// One statement of five sums of open targets over the hot segments' partial indexes (`norq_segments_due`
    /// holds the pending segments, `norq_segments_leases` the leased ones): its cost follows the segments waiting or
    /// in flight, never the history. Within `settings.callTimeout`, like every call.
    public func queueDepth(now: Int64) async throws(NorqError) -> QueueDepth {
        try await call("reading the queue depth") { connection in
            let row = try await connection.rows("""
                SELECT
                    (SELECT coalesce(sum(open), 0) FROM norq_segments
                        WHERE state = 'pending' AND next_attempt_at <= ?1 AND receipts = 0) AS due,
                    (SELECT coalesce(sum(open), 0) FROM norq_segments WHERE state = 'pending' AND receipts = 0) AS pending,
                    (SELECT coalesce(sum(open), 0) FROM norq_segments WHERE state = 'pending' AND receipts = 1) AS receipts,
                    (SELECT coalesce(sum(open), 0) FROM norq_segments WHERE state = 'leased' AND lease_expires_at > ?1) AS leased,
                    (SELECT coalesce(sum(open), 0) FROM norq_segments WHERE state = 'leased') AS held
                """, [.integer(Int(now))]).first
            func count(_ name: String) -> Int { row?.column(name)?.integer ?? 0 }
            // A lease without an expiry counts as expired, as in `DeliveryStoreRules.isClaimable`.
            return QueueDepth(due: count("due"), scheduled: count("pending") - count("due"), leased: count("leased"),
                              leaseExpired: count("held") - count("leased"), awaitingReceipts: count("receipts"))
        }
    }
}
