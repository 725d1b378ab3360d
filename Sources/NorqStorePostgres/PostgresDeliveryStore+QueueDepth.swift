public import NorqCore
import PostgresNIO

extension PostgresDeliveryStore {
    /// Four counts over the hot outbox in one scan (it holds only pending and leased rows: its cost follows the
    /// rows waiting or in flight, never the history; no partial index since schema version 3, where a claim
    /// became a HOT update). Within `settings.callTimeout` (and the server's `statement_timeout`), like every call.
    public func queueDepth(now: Int64) async throws(NorqError) -> QueueDepth {
        let logger = self.logger
        return try await call("reading the queue depth") { client in
            var depth = QueueDepth()
            for try await (due, pending, leased, allLeased) in try await client.query("""
                SELECT count(*) FILTER (WHERE state = 'pending' AND next_attempt_at <= \(now))::bigint,
                    count(*) FILTER (WHERE state = 'pending')::bigint,
                    count(*) FILTER (WHERE state = 'leased' AND lease_expires_at > \(now))::bigint,
                    count(*) FILTER (WHERE state = 'leased')::bigint
                FROM norq_outbox
                """, logger: logger).decode((Int64, Int64, Int64, Int64).self) {
                depth.due = Int(due)
                depth.scheduled = Int(pending - due)
                // A lease without an expiry counts as expired, as in `DeliveryStoreRules.isClaimable`.
                depth.leased = Int(leased)
                depth.leaseExpired = Int(allLeased - leased)
            }
            return depth
        }
    }
}
