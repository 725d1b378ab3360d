public import NorqCore
public import NorqStore
import PostgresNIO

extension PostgresDeliveryStore {
    /// A page of a send's rows by target position, hot and finished: found through the send's row-id range (as
    /// `deliveries(ofSend:)` finds them), never by reading the whole send into the process.
    public func deliveries(ofSend id: String, positions: Range<Int>) async throws(NorqError) -> [OutboxRow] {
        guard !positions.isEmpty else { return [] }
        let logger = self.logger
        let low = positions.lowerBound, high = positions.upperBound
        return try await call("reading a page of a send's rows") { client in
            var rows: [OutboxRow] = []
            for try await row in try await client.query("""
                SELECT \(unescaped: PostgresSchema.qualifiedRowColumns("o")), NULL::bigint AS finished_at
                FROM norq_sends s JOIN norq_outbox o ON o.id BETWEEN s.first_row_id AND s.last_row_id AND o.send_id = s.id
                WHERE s.id = \(id) AND o.position >= \(low) AND o.position < \(high)
                UNION ALL
                SELECT \(unescaped: PostgresSchema.qualifiedRowColumns("h")), h.finished_at
                FROM norq_sends s JOIN norq_history h ON h.id BETWEEN s.first_row_id AND s.last_row_id AND h.send_id = s.id
                WHERE s.id = \(id) AND h.position >= \(low) AND h.position < \(high)
                """, logger: logger) {
                rows.append(try PostgresSchema.outboxRow(row))
            }
            return rows.sorted { $0.position < $1.position }
        }
    }

    /// A send's rows counted by state, hot and finished, by the server.
    public func stateCounts(ofSend id: String) async throws(NorqError) -> [DeliveryState: Int] {
        let logger = self.logger
        return try await call("counting a send's rows") { client in
            var counts: [DeliveryState: Int] = [:]
            for try await (state, count) in try await client.query("""
                SELECT o.state, count(*) FROM norq_sends s
                JOIN norq_outbox o ON o.id BETWEEN s.first_row_id AND s.last_row_id AND o.send_id = s.id
                WHERE s.id = \(id) GROUP BY o.state
                UNION ALL
                SELECT h.state, count(*) FROM norq_sends s
                JOIN norq_history h ON h.id BETWEEN s.first_row_id AND s.last_row_id AND h.send_id = s.id
                WHERE s.id = \(id) GROUP BY h.state
                """, logger: logger).decode((String, Int64).self) {
                counts[DeliveryState(rawValue: state), default: 0] += Int(count)
            }
            return counts
        }
    }
}
