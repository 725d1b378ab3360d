public import NorqCore
public import NorqStore
import PostgresNIO

extension PostgresDeliveryStore {
    /// A page of a send's rows by target position, hot and finished: only the segments holding those positions
    /// are read (`norq_segments_send`, `norq_segment_history_send`).
    public func deliveries(ofSend id: String, positions: Range<Int>) async throws(NorqError) -> [OutboxRow] {
        guard !positions.isEmpty else { return [] }
        let logger = self.logger
        return try await call("reading a page of a send's rows") { client in
            try await Self.rows(ofSend: id, positions: positions, on: client, logger: logger)
        }
    }

    /// A send's targets counted by state, from its segments' counts (no blob read).
    public func stateCounts(ofSend id: String) async throws(NorqError) -> [DeliveryState: Int] {
        let logger = self.logger
        return try await call("counting a send's rows") { client in
            try await Self.stateCounts(sendID: id, on: client, logger: logger)
        }
    }
}
