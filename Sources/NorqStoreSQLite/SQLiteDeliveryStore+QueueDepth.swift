public import NorqCore
public import NorqStore
import SQLiteNIO

extension SQLiteDeliveryStore {
    /// One statement of four counts over the hot outbox's partial indexes (`norq_outbox_due` holds the pending
    /// rows, `norq_outbox_leases` the leased ones): its cost follows the rows waiting or in flight, never the
    /// history. Within `settings.callTimeout`, like every call.
    public func queueDepth(now: Int64) async throws(NorqError) -> QueueDepth {
        try await call("reading the queue depth") { connection in
            let row = try await connection.rows("""
                SELECT
                    (SELECT count(*) FROM norq_outbox WHERE state = 'pending' AND next_attempt_at <= ?1) AS due,
                    (SELECT count(*) FROM norq_outbox WHERE state = 'pending') AS pending,
                    (SELECT count(*) FROM norq_outbox WHERE state = 'leased' AND lease_expires_at > ?1) AS leased,
                    (SELECT count(*) FROM norq_outbox WHERE state = 'leased') AS held
                """, [.integer(Int(now))]).first
            func count(_ name: String) -> Int { row?.column(name)?.integer ?? 0 }
            // A lease without an expiry counts as expired, as in `DeliveryStoreRules.isClaimable`.
            return QueueDepth(due: count("due"), scheduled: count("pending") - count("due"), leased: count("leased"),
                              leaseExpired: count("held") - count("leased"))
        }
    }
}
