import NorqCore
import NorqStore
import NIOCore
import SQLiteNIO

/// Segments on SQLite (issue 29): `norq_segments` (a hot segment's small mutable row), `norq_segment_targets`
/// (its immutable targets, one blob), `norq_segment_history` (a finished segment's summary and non-delivered
/// targets). The decisions are `SegmentLedger`'s; this file moves its values in and out of SQL.
extension SQLiteDeliveryStore {
    static let recordColumns = """
        id, send_id, count, open, state, attempts, next_attempt_at, lease_owner, lease_token, lease_expires_at, \
        may_have_been_delivered, delivered, rejected, failed, skipped, progress, positions, created_at
        """
    static let historyColumns = "id, send_id, count, attempts, delivered, rejected, failed, skipped, progress, positions, finished_at"

    static func blob(_ bytes: [UInt8]) -> SQLiteData { .blob(ByteBuffer(bytes: bytes)) }

    static func bytes(_ data: SQLiteData?) -> [UInt8] {
        if case .blob(let buffer)? = data { return Array(buffer.readableBytesView) }
        return []
    }

    /// A `norq_segments` row selected as `recordColumns`.
    static func record(_ row: SQLiteRow) throws(NorqError) -> SegmentRecord {
        let columns = row.columns.map(\.data)
        func int(_ index: Int) -> Int64? { columns[index].integer.map(Int64.init) }
        return SegmentRecord(
            id: int(0) ?? 0, sendID: columns[1].string ?? "", count: Int(int(2) ?? 0), open: Int(int(3) ?? 0),
            state: DeliveryState(rawValue: columns[4].string ?? "pending"), attempts: Int(int(5) ?? 0),
            nextAttemptAt: int(6) ?? 0, leaseOwner: columns[7].string, leaseToken: columns[8].string,
            leaseExpiresAt: int(9), mayHaveBeenDelivered: int(10) == 1,
            counts: SegmentCounts(delivered: Int(int(11) ?? 0), rejected: Int(int(12) ?? 0), failed: Int(int(13) ?? 0),
                                  skipped: Int(int(14) ?? 0)),
            progress: try SegmentCodec.decodeProgress(bytes(columns[15])),
            positions: try SegmentCodec.decodePositions(bytes(columns[16])), createdAt: int(17) ?? 0)
    }

    static func history(_ row: SQLiteRow) throws(NorqError) -> SegmentHistoryRecord {
        let columns = row.columns.map(\.data)
        func int(_ index: Int) -> Int64? { columns[index].integer.map(Int64.init) }
        return SegmentHistoryRecord(
            id: int(0) ?? 0, sendID: columns[1].string ?? "", count: Int(int(2) ?? 0), attempts: Int(int(3) ?? 0),
            counts: SegmentCounts(delivered: Int(int(4) ?? 0), rejected: Int(int(5) ?? 0), failed: Int(int(6) ?? 0),
                                  skipped: Int(int(7) ?? 0)),
            progress: try SegmentCodec.decodeProgress(bytes(columns[8])),
            positions: try SegmentCodec.decodePositions(bytes(columns[9])), finishedAt: int(10) ?? 0)
    }

    // MARK: writing

    /// Reserves `count` segment ids (one statement; the counter row lives in `norq_segment_ids`).
    static func reserveIDs(_ count: Int, on connection: SQLiteConnection) async throws -> Int64 {
        let rows = try await connection.rows(
            "UPDATE norq_segment_ids SET next = next + ? WHERE id = 1 RETURNING next", [.integer(count)])
        guard let next = rows.first?.column("next")?.integer else {
            throw NorqError(.storeFailed, "the segment id counter is missing (run norq migrate)")
        }
        return Int64(next) - Int64(count)
    }

    /// Inserts new segments (hot, or straight into history when every target is done) in a few multi-row
    /// statements.
    static func insert(_ segments: [NewSegment], now: Int64, on connection: SQLiteConnection) async throws {
        guard !segments.isEmpty else { return }
        var id = try await reserveIDs(segments.count, on: connection)
        var hot: [(Int64, NewSegment)] = []
        var finished: [SegmentHistoryRecord] = []
        for segment in segments {
            id += 1
            if segment.isFinished {
                finished.append(SegmentHistoryRecord(id: id, sendID: segment.sendID, count: segment.count,
                                                     counts: segment.counts, progress: segment.progress,
                                                     positions: segment.positions, finishedAt: now))
            } else {
                hot.append((id, segment))
            }
        }
        for chunk in chunks(hot, 50) {
            var binds: [SQLiteData] = []
            var targetBinds: [SQLiteData] = []
            for (id, segment) in chunk {
                let positions = segment.positions
                binds += [.integer(Int(id)), .text(segment.sendID), .integer(segment.count), .integer(segment.open),
                          .integer(Int(segment.nextAttemptAt)), .integer(segment.counts.delivered),
                          .integer(segment.counts.rejected), .integer(segment.counts.failed),
                          .integer(segment.counts.skipped), blob(SegmentCodec.encode(progress: segment.progress)),
                          blob(SegmentCodec.encode(positions: positions)), .integer(positions.lowest),
                          .integer(positions.highest), .integer(Int(now)), .integer(segment.awaitsReceipts ? 1 : 0)]
                targetBinds += [.integer(Int(id)), blob(segment.encodedTargets)]
            }
            let values = Array(repeating: "(?,?,?,?,'pending',0,?,0,?,?,?,?,?,?,?,?,?,?)", count: chunk.count)
                .joined(separator: ",")
            try await connection.run("""
                INSERT INTO norq_segments (id, send_id, count, open, state, attempts, next_attempt_at,
                    may_have_been_delivered, delivered, rejected, failed, skipped, progress, positions, first_position,
                    last_position, created_at, receipts) VALUES \(values)
                """, binds)
            try await connection.run(
                "INSERT INTO norq_segment_targets (segment_id, targets) VALUES \(Array(repeating: "(?,?)", count: chunk.count).joined(separator: ","))",
                targetBinds)
        }
        try await insertHistory(finished, on: connection)
    }

    static func insertHistory(_ records: [SegmentHistoryRecord], on connection: SQLiteConnection) async throws {
        for chunk in chunks(records, 100) {
            var binds: [SQLiteData] = []
            for record in chunk {
                binds += [.integer(Int(record.id)), .text(record.sendID), .integer(record.count),
                          .integer(record.attempts), .integer(record.counts.delivered), .integer(record.counts.rejected),
                          .integer(record.counts.failed), .integer(record.counts.skipped),
                          blob(SegmentCodec.encode(progress: record.progress)),
                          blob(SegmentCodec.encode(positions: record.positions)), .integer(record.positions.lowest),
                          .integer(record.positions.highest), .integer(Int(record.finishedAt))]
            }
            try await connection.run("""
                INSERT INTO norq_segment_history (id, send_id, count, attempts, delivered, rejected, failed, skipped,
                    progress, positions, first_position, last_position, finished_at)
                VALUES \(Array(repeating: "(?,?,?,?,?,?,?,?,?,?,?,?,?)", count: chunk.count).joined(separator: ","))
                """, binds)
        }
    }

    static func chunks<T>(_ values: [T], _ size: Int) -> [ArraySlice<T>] {
        stride(from: 0, to: values.count, by: size).map { values[$0..<min(values.count, $0 + size)] }
    }

    /// The registry entries of these tokens (every provider and environment), by token.
    static func registryEntries(_ tokens: [String],
                                on connection: SQLiteConnection) async throws -> [String: [InvalidTokenRecord]] {
        var found: [String: [InvalidTokenRecord]] = [:]
        for chunk in chunks(tokens, 500) {
            for row in try await connection.rows("""
                SELECT token, provider, environment, reason, invalid_since, recorded_at, registered_at
                FROM norq_invalid_tokens WHERE token IN (\(Array(repeating: "?", count: chunk.count).joined(separator: ",")))
                """, chunk.map(SQLiteData.text)) {
                let record = registryRecord(row)
                found[record.token, default: []].append(record)
            }
        }
        return found
    }

    static func registryRecord(_ row: SQLiteRow) -> InvalidTokenRecord {
        InvalidTokenRecord(token: row.column("token")?.string ?? "",
                           provider: row.column("provider")?.string.flatMap { $0.isEmpty ? nil : $0 },
                           environment: row.column("environment")?.string.flatMap { $0.isEmpty ? nil : $0 },
                           reason: row.column("reason")?.string ?? "",
                           invalidSince: Int64(row.column("invalid_since")?.integer ?? 0),
                           recordedAt: Int64(row.column("recorded_at")?.integer ?? 0),
                           registeredAt: row.column("registered_at")?.integer.map(Int64.init))
    }

    static func record(_ updates: [RegistryUpdate], now: Int64, on connection: SQLiteConnection) async throws {
        for update in updates {
            try await connection.run("""
                INSERT INTO norq_invalid_tokens (token, provider, environment, reason, invalid_since, recorded_at)
                VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT(token, provider, environment) DO UPDATE SET reason = excluded.reason,
                    invalid_since = excluded.invalid_since, recorded_at = excluded.recorded_at
                WHERE excluded.invalid_since >= norq_invalid_tokens.invalid_since
                """, [.text(update.token), .text(update.provider ?? ""), .text(update.environment ?? ""),
                      .text(update.outcome.reason ?? "invalid"), .integer(Int(update.outcome.invalidSince ?? now)),
                      .integer(Int(now))])
        }
    }

    // MARK: claim

    /// The claiming UPDATE: due segments (pending and due, or leased with an expired lease), oldest first, as many
    /// as hold up to `limit` open targets (at least one segment). The limit is written into the text (see
    /// `claimStatement` of the row store, stop 26: a bound LIMIT made SQLite prepare every claim twice).
    static func claimSegments(limit: Int) -> String {
        let limit = String(max(1, limit))
        return """
            UPDATE norq_segments SET
                may_have_been_delivered = CASE WHEN state = 'leased' THEN 1 ELSE may_have_been_delivered END,
                state = 'leased', attempts = attempts + 1, lease_owner = ?1, lease_token = ?2 || '-' || id,
                lease_expires_at = ?3
            WHERE id IN (
                SELECT id FROM (
                    SELECT id, open, sum(open) OVER (ORDER BY next_attempt_at, id) AS running FROM (
                        SELECT id, open, next_attempt_at FROM norq_segments
                        WHERE state = 'pending' AND next_attempt_at <= ?4
                        UNION ALL
                        SELECT id, open, next_attempt_at FROM norq_segments
                        WHERE state = 'leased' AND lease_expires_at <= ?4
                        LIMIT \(limit)))
                WHERE running - open < \(limit))
            RETURNING \(recordColumns)
            """
    }

    /// The targets of these segments, by segment id.
    static func targets(of ids: [Int64], on connection: SQLiteConnection) async throws -> [Int64: [UInt8]] {
        var found: [Int64: [UInt8]] = [:]
        for chunk in chunks(ids, 500) {
            for row in try await connection.rows(
                "SELECT segment_id, targets FROM norq_segment_targets WHERE segment_id IN (\(Array(repeating: "?", count: chunk.count).joined(separator: ",")))",
                chunk.map { .integer(Int($0)) }) {
                if let id = row.column("segment_id")?.integer { found[Int64(id)] = bytes(row.column("targets")) }
            }
        }
        return found
    }

    static func records(_ ids: [Int64], on connection: SQLiteConnection) async throws -> [Int64: SegmentRecord] {
        var found: [Int64: SegmentRecord] = [:]
        for chunk in chunks(ids, 500) {
            for row in try await connection.rows(
                "SELECT \(recordColumns) FROM norq_segments WHERE id IN (\(Array(repeating: "?", count: chunk.count).joined(separator: ",")))",
                chunk.map { .integer(Int($0)) }) {
                let record = try record(row)
                found[record.id] = record
            }
        }
        return found
    }

    /// Applies completions segment by segment (read, `SegmentLedger.apply`, write), inside the caller's
    /// transaction.
    static func complete(_ completions: [RowCompletion], now: Int64,
                         on connection: SQLiteConnection) async throws -> CompletionReport {
        let records = try await records(SegmentLedger.bySegment(completions).map(\.segment), on: connection)
        let needTargets = SegmentLedger.segmentsNeedingTargets(completions) { records[$0] != nil }
        let blobs = needTargets.isEmpty ? [:] : try await targets(of: needTargets, on: connection)
        let checkpoint = try SegmentLedger.checkpoint(completions, records: records,
                                                      targets: SegmentLedger.decodedTargets(blobs), now: now)
        let finished = checkpoint.finished
        for record in checkpoint.updated {
            try await connection.run("""
                UPDATE norq_segments SET open = ?, state = ?, attempts = ?, next_attempt_at = ?, lease_owner = ?,
                    lease_token = ?, lease_expires_at = ?, delivered = ?, rejected = ?, failed = ?, skipped = ?,
                    progress = ?
                WHERE id = ?
                """, [.integer(record.open), .text(record.state.rawValue), .integer(record.attempts),
                      .integer(Int(record.nextAttemptAt)), record.leaseOwner.map(SQLiteData.text) ?? .null,
                      record.leaseToken.map(SQLiteData.text) ?? .null,
                      record.leaseExpiresAt.map { .integer(Int($0)) } ?? .null,
                      .integer(record.counts.delivered), .integer(record.counts.rejected),
                      .integer(record.counts.failed), .integer(record.counts.skipped),
                      blob(SegmentCodec.encode(progress: record.progress)), .integer(Int(record.id))])
        }
        if !finished.isEmpty {
            try await insertHistory(finished, on: connection)
            for chunk in chunks(finished.map(\.id), 500) {
                let list = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                let binds = chunk.map { SQLiteData.integer(Int($0)) }
                // The targets stay until the send is pruned (status by position shows every token).
                try await connection.run("DELETE FROM norq_segments WHERE id IN (\(list))", binds)
            }
        }
        try await insert(checkpoint.newSegments, now: now, on: connection)
        try await record(checkpoint.registry, now: now, on: connection)
        return checkpoint.report
    }

    // MARK: reading

    /// A send's segments (hot with their targets, and history) that hold positions in `positions`.
    static func rows(ofSend id: String, positions: Range<Int>, on connection: SQLiteConnection) async throws -> [OutboxRow] {
        let binds: [SQLiteData] = [.text(id), .integer(positions.lowerBound), .integer(min(positions.upperBound, Int(Int64.max - 1)))]
        let hot = try await connection.rows(
            "SELECT \(recordColumns) FROM norq_segments WHERE send_id = ? AND last_position >= ? AND first_position < ?",
            binds)
        let done = try await connection.rows(
            "SELECT \(historyColumns) FROM norq_segment_history WHERE send_id = ? AND last_position >= ? AND first_position < ?",
            binds)
        var records: [SegmentRecord] = []
        for row in hot { records.append(try record(row)) }
        var histories: [SegmentHistoryRecord] = []
        for row in done { histories.append(try history(row)) }
        let blobs = try await targets(of: records.map(\.id) + histories.map(\.id), on: connection)
        var result: [OutboxRow] = []
        for record in records {
            let targets = try SegmentCodec.decodeTargets(blobs[record.id] ?? [])
            result += SegmentLedger.rows(record, targets: targets, positions: positions)
        }
        for history in histories {
            let targets = try blobs[history.id].map { bytes throws(NorqError) in try SegmentCodec.decodeTargets(bytes) }
            result += SegmentLedger.rows(history, targets: targets, positions: positions)
        }
        return result.sorted { $0.position < $1.position }
    }

    /// Counts by state over `norq_segments` and `norq_segment_history` (a send's, or all with `sendID` nil).
    static func stateCounts(sendID: String?, on connection: SQLiteConnection) async throws -> [DeliveryState: Int] {
        let filter = sendID == nil ? "" : "WHERE send_id = ?"
        let binds: [SQLiteData] = sendID.map { [.text($0)] } ?? []
        var counts: [DeliveryState: Int] = [:]
        for row in try await connection.rows("""
            SELECT state, receipts, sum(open) AS open, sum(delivered) AS delivered, sum(rejected) AS rejected,
                sum(failed) AS failed, sum(skipped) AS skipped FROM norq_segments \(filter) GROUP BY state, receipts
            """, binds) {
            // The open targets of a receipt segment have their outcome (`accepted`); the receipt decides the rest.
            let open = row.column("open")?.integer ?? 0
            if open > 0, let state = row.column("state")?.string {
                let shown = row.column("receipts")?.integer == 1 ? DeliveryState.accepted : DeliveryState(rawValue: state)
                counts[shown, default: 0] += open
            }
            add(row, into: &counts)
        }
        for row in try await connection.rows("""
            SELECT sum(delivered) AS delivered, sum(rejected) AS rejected, sum(failed) AS failed, sum(skipped) AS skipped
            FROM norq_segment_history \(filter)
            """, binds) {
            add(row, into: &counts)
        }
        return counts
    }

    private static func add(_ row: SQLiteRow, into counts: inout [DeliveryState: Int]) {
        SegmentCounts(delivered: row.column("delivered")?.integer ?? 0, rejected: row.column("rejected")?.integer ?? 0,
                      failed: row.column("failed")?.integer ?? 0, skipped: row.column("skipped")?.integer ?? 0)
            .add(into: &counts)
    }

    // MARK: legacy rows

    /// Converts the rows of schema version 4 (a row per push) into segments of one target each: hot rows into
    /// pending segments (a leased one flagged may-have-been-delivered: its worker may have sent it), history rows
    /// into history segments. Part of the migration to version 5, in its transaction.
    static func convertLegacyRows(on connection: SQLiteConnection) async throws {
        let hot = try await connection.rows(
            "SELECT \(SQLiteSchema.rowColumns), NULL AS finished_at FROM norq_outbox ORDER BY id").map(SQLiteSchema.outboxRow)
        let done = try await connection.rows(
            "SELECT \(SQLiteSchema.rowColumns), finished_at FROM norq_history ORDER BY id").map(SQLiteSchema.outboxRow)
        let (segments, history) = SegmentLedger.legacy(hot: hot, finished: done)
        guard !segments.isEmpty || !history.isEmpty else { return }
        let first = try await reserveIDs(segments.count + history.count, on: connection)
        var id = first
        for (segment, row) in segments {
            id += 1
            let positions = segment.positions
            try await connection.run("""
                INSERT INTO norq_segments (id, send_id, count, open, state, attempts, next_attempt_at,
                    may_have_been_delivered, progress, positions, first_position, last_position, created_at)
                VALUES (?, ?, 1, 1, 'pending', 0, ?, ?, ?, ?, ?, ?, ?)
                """, [.integer(Int(id)), .text(segment.sendID), .integer(Int(segment.nextAttemptAt)),
                      .integer(row.state == .leased ? 1 : 0), blob(SegmentCodec.encode(progress: segment.progress)),
                      blob(SegmentCodec.encode(positions: positions)), .integer(positions.lowest),
                      .integer(positions.highest), .integer(Int(segment.nextAttemptAt))])
            try await connection.run("INSERT INTO norq_segment_targets (segment_id, targets) VALUES (?, ?)",
                                     [.integer(Int(id)), blob(segment.encodedTargets)])
        }
        var records: [SegmentHistoryRecord] = []
        for (var record, target) in history {
            id += 1
            record.id = id
            records.append(record)
            try await connection.run("INSERT INTO norq_segment_targets (segment_id, targets) VALUES (?, ?)",
                                     [.integer(Int(id)), blob(SegmentCodec.encode(targets: [target]))])
        }
        try await insertHistory(records, on: connection)
    }
}
