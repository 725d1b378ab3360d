public import NorqCore
public import NorqStore
import PostgresNIO

extension PostgresDeliveryStore {
    /// Two sums of open targets over each of the hot segments' partial indexes (`norq_segments_due` holds the
    /// pending segments, `norq_segments_leases` the leased ones), in one statement: its cost follows the rows waiting or in flight,
    /// never the history. Within `settings.callTimeout` (and the server's `statement_timeout`), like every call.
    public func queueDepth(now: Int64) async throws(NorqError) -> QueueDepth {
        let logger = self.logger
        return try await call("reading the queue depth") { client in
            var depth = QueueDepth()
            for try await (state, ready, all, receipts) in try await client.query("""
                SELECT 'pending',
                    coalesce(sum(open) FILTER (WHERE next_attempt_at <= \(now) AND NOT receipts), 0)::bigint,
                    coalesce(sum(open) FILTER (WHERE NOT receipts), 0)::bigint,
                    coalesce(sum(open) FILTER (WHERE receipts), 0)::bigint
                    FROM norq_segments WHERE state = 'pending'
                UNION ALL
                SELECT 'leased', coalesce(sum(open) FILTER (WHERE lease_expires_at > \(now)), 0)::bigint,
                    coalesce(sum(open), 0)::bigint, 0::bigint
                    FROM norq_segments WHERE state = 'leased'
                """, logger: logger).decode((String, Int64, Int64, Int64).self) {
                if state == "pending" {
                    depth.due = Int(ready)
                    depth.scheduled = Int(all - ready)
                    // Receipt segments: polls waiting for the service's receipts, not pushes to send.
                    depth.awaitingReceipts = Int(receipts)
                } else {
                    // A lease without an expiry counts as expired, as in `DeliveryStoreRules.isClaimable`.
                    depth.leased = Int(ready)
                    depth.leaseExpired = Int(all - ready)
                }
            }
            return depth
        }
    }
}
