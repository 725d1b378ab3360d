import NorqCore
import NorqStore
import Logging
import NIOCore
import PostgresNIO

/// Segments on PostgreSQL (issue 29): `norq_segments` (a hot segment's small mutable row; `fillfactor` leaves room
/// for HOT updates, and its blobs are TOASTed apart from it), `norq_segment_targets` (its immutable targets, one
/// bytea), `norq_segment_history` (a finished segment's summary and non-delivered targets). The decisions are
/// `SegmentLedger`'s; this file moves its values in and out of SQL.
extension PostgresDeliveryStore {
    typealias RecordColumns = (Int64, String, Int, Int, String, Int, Int64, String?, String?, Int64?, Bool, Int, Int,
                               Int, Int, ByteBuffer, ByteBuffer, Int64)
    static let recordColumns = """
        id, send_id, count, open, state, attempts, next_attempt_at, lease_owner, lease_token, lease_expires_at, \
        may_have_been_delivered, delivered, rejected, failed, skipped, progress, positions, created_at
        """
    static func qualifiedRecordColumns(_ alias: String) -> String {
        recordColumns.split(separator: ",").map { "\(alias).\($0.trimmingCharacters(in: .whitespaces))" }
            .joined(separator: ", ")
    }
    typealias HistoryColumns = (Int64, String, Int, Int, Int, Int, Int, Int, ByteBuffer, ByteBuffer, Int64)
    static let historyColumns =
        "id, send_id, count, attempts, delivered, rejected, failed, skipped, progress, positions, finished_at"

    static func record(_ c: RecordColumns) throws(NorqError) -> SegmentRecord {
        SegmentRecord(id: c.0, sendID: c.1, count: c.2, open: c.3, state: DeliveryState(rawValue: c.4), attempts: c.5,
                      nextAttemptAt: c.6, leaseOwner: c.7, leaseToken: c.8, leaseExpiresAt: c.9,
                      mayHaveBeenDelivered: c.10,
                      counts: SegmentCounts(delivered: c.11, rejected: c.12, failed: c.13, skipped: c.14),
                      progress: try SegmentCodec.decodeProgress(Array(c.15.readableBytesView)),
                      positions: try SegmentCodec.decodePositions(Array(c.16.readableBytesView)), createdAt: c.17)
    }

    static func history(_ c: HistoryColumns) throws(NorqError) -> SegmentHistoryRecord {
        SegmentHistoryRecord(id: c.0, sendID: c.1, count: c.2, attempts: c.3,
                             counts: SegmentCounts(delivered: c.4, rejected: c.5, failed: c.6, skipped: c.7),
                             progress: try SegmentCodec.decodeProgress(Array(c.8.readableBytesView)),
                             positions: try SegmentCodec.decodePositions(Array(c.9.readableBytesView)), finishedAt: c.10)
    }

    static func buffer(_ bytes: [UInt8]) -> ByteBuffer { ByteBuffer(bytes: bytes) }

    // MARK: writing

    /// Inserts new segments (hot, or straight into history when every target is done): ids from the sequence
    /// `norq_segment_ids`, then one `unnest` INSERT per table.
    static func insert(_ segments: [NewSegment], now: Int64, on connection: PostgresConnection,
                       logger: Logger) async throws {
        guard !segments.isEmpty else { return }
        var ids: [Int64] = []
        for try await id in try await connection.query(
            "SELECT nextval('norq_segment_ids') FROM generate_series(1, \(segments.count))", logger: logger)
            .decode(Int64.self) { ids.append(id) }
        ids.sort()
        var finished: [SegmentHistoryRecord] = []
        var hotIDs: [Int64] = [], sendIDs: [String] = [], counts: [Int] = [], opens: [Int] = [], due: [Int64] = []
        var delivered: [Int] = [], rejected: [Int] = [], failed: [Int] = [], skipped: [Int] = []
        var progress: [ByteBuffer] = [], positions: [ByteBuffer] = [], first: [Int] = [], last: [Int] = []
        var targets: [ByteBuffer] = []
        var receipts: [Bool] = []
        for (segment, id) in zip(segments, ids) {
            let ranges = segment.positions
            if segment.isFinished {
                finished.append(SegmentHistoryRecord(id: id, sendID: segment.sendID, count: segment.count,
                                                     counts: segment.counts, progress: segment.progress,
                                                     positions: ranges, finishedAt: now))
                continue
            }
            hotIDs.append(id); sendIDs.append(segment.sendID); counts.append(segment.count)
            opens.append(segment.open); due.append(segment.nextAttemptAt)
            delivered.append(segment.counts.delivered); rejected.append(segment.counts.rejected)
            failed.append(segment.counts.failed); skipped.append(segment.counts.skipped)
            progress.append(buffer(SegmentCodec.encode(progress: segment.progress)))
            positions.append(buffer(SegmentCodec.encode(positions: ranges)))
            first.append(ranges.lowest); last.append(ranges.highest)
            targets.append(buffer(segment.encodedTargets))
            receipts.append(segment.awaitsReceipts)
        }
        if !hotIDs.isEmpty {
            try await connection.query("""
                INSERT INTO norq_segments (id, send_id, count, open, state, attempts, next_attempt_at,
                    may_have_been_delivered, delivered, rejected, failed, skipped, progress, positions, first_position,
                    last_position, created_at, receipts)
                SELECT id, send_id, count, open, 'pending', 0, due, false, d, r, f, s, progress, positions, lo, hi, \(now),
                    receipts
                FROM unnest(\(hotIDs)::bigint[], \(sendIDs)::text[], \(counts)::int[], \(opens)::int[],
                    \(due)::bigint[], \(delivered)::int[], \(rejected)::int[], \(failed)::int[], \(skipped)::int[],
                    \(progress)::bytea[], \(positions)::bytea[], \(first)::int[], \(last)::int[], \(receipts)::boolean[])
                    AS v(id, send_id, count, open, due, d, r, f, s, progress, positions, lo, hi, receipts)
                """, logger: logger)
            try await connection.query("""
                INSERT INTO norq_segment_targets (segment_id, targets)
                SELECT * FROM unnest(\(hotIDs)::bigint[], \(targets)::bytea[])
                """, logger: logger)
        }
        try await insertHistory(finished, on: connection, logger: logger)
    }

    static func insertHistory(_ records: [SegmentHistoryRecord], on connection: PostgresConnection,
                              logger: Logger) async throws {
        guard !records.isEmpty else { return }
        _ = try await connection.execute(InsertHistoryStatement(records: records), logger: logger)
    }

    /// The registry entries of these tokens (every provider and environment), by token.
    static func registryEntries(_ tokens: [String], on connection: PostgresConnection,
                                logger: Logger) async throws -> [String: [InvalidTokenRecord]] {
        guard !tokens.isEmpty else { return [:] }
        var found: [String: [InvalidTokenRecord]] = [:]
        for try await (token, provider, environment, reason, since, recorded, registered) in try await connection.query("""
            SELECT token, provider, environment, reason, invalid_since, recorded_at, registered_at
            FROM norq_invalid_tokens WHERE token = ANY(\(tokens)::text[])
            """, logger: logger).decode((String, String, String, String, Int64, Int64, Int64?).self) {
            found[token, default: []].append(InvalidTokenRecord(
                token: token, provider: provider.isEmpty ? nil : provider,
                environment: environment.isEmpty ? nil : environment, reason: reason, invalidSince: since,
                recordedAt: recorded, registeredAt: registered))
        }
        return found
    }

    static func record(_ updates: [RegistryUpdate], now: Int64, on connection: PostgresConnection,
                       logger: Logger) async throws {
        for update in updates {
            try await connection.query("""
                INSERT INTO norq_invalid_tokens (token, provider, environment, reason, invalid_since, recorded_at)
                VALUES (\(update.token), \(update.provider ?? ""), \(update.environment ?? ""),
                    \(update.outcome.reason ?? "invalid"), \(update.outcome.invalidSince ?? now), \(now))
                ON CONFLICT (token, provider, environment) DO UPDATE SET reason = excluded.reason,
                    invalid_since = excluded.invalid_since, recorded_at = excluded.recorded_at
                WHERE excluded.invalid_since >= norq_invalid_tokens.invalid_since
                """, logger: logger)
        }
    }

    /// Inserts sends and their segments (the registry applied) in the caller's transaction: one statement for the
    /// sends, one registry lookup, the segments' ids, states and targets (three), and one notification, whatever
    /// the number of sends (a group commit of small sends costs a few statements, not a few per send).
    static func insert(_ requests: [EnqueueRequest], segmentSize: Int, on connection: PostgresConnection,
                       logger: Logger) async throws {
        guard !requests.isEmpty else { return }
        let sends = requests.map(\.send)
        try await connection.query("""
            INSERT INTO norq_sends (id, scope, idempotency_key, fingerprint, content, created_at, target_count)
            SELECT id, scope, nullif(key, ''), fingerprint, content, created_at, target_count
            FROM unnest(\(sends.map(\.id))::text[], \(sends.map(\.scope))::text[],
                \(sends.map { $0.idempotencyKey ?? "" })::text[], \(sends.map(\.fingerprint))::text[],
                \(sends.map(\.content))::text[], \(requests.map(\.now))::bigint[], \(sends.map(\.targets.count))::int[])
                AS v(id, scope, key, fingerprint, content, created_at, target_count)
            """, logger: logger)
        // The registry is read a group of targets at a time (`SegmentLedger.registryGroup`), small sends together,
        // and not at all while it is empty (no blob decoded either).
        var registryMayMatch = false
        for try await exists in try await connection.query(
            "SELECT EXISTS (SELECT 1 FROM norq_invalid_tokens)", logger: logger).decode(Bool.self) {
            registryMayMatch = exists
        }
        let segments = try await SegmentLedger.segments(of: requests.map { ($0.send, $0.now) }, size: segmentSize,
                                                        registryMayMatch: registryMayMatch) { tokens in
            try await registryEntries(tokens, on: connection, logger: logger)
        }
        try await insert(segments, now: requests.map(\.now).max() ?? 0, on: connection, logger: logger)
        if segments.contains(where: { !$0.isFinished }) {
            try await connection.query("SELECT pg_notify('norq_outbox', '')", logger: logger)
        }
    }

    // MARK: claim

    /// Claims due segments (pending and due, or leased with an expired lease; each partial index searched with
    /// `SKIP LOCKED`), oldest first, as many as hold up to `limit` open targets (at least one), with their targets,
    /// in one statement.
    static func claim(owner: String, limit: Int, now: Int64, leaseUntil: Int64, base: String,
                      on client: PostgresClient, logger: Logger) async throws -> [(SegmentRecord, [SegmentTarget])] {
        var claimed: [(SegmentRecord, [SegmentTarget])] = []
        let rows = try await client.execute(
            ClaimStatement(now: now, limit: Int64(limit), owner: owner, base: base, leaseUntil: leaseUntil), logger: logger)
        for try await (columns, targets) in rows {
            let record = try record(columns)
            claimed.append((record, try SegmentCodec.decodeTargets(targets.map { Array($0.readableBytesView) } ?? [])))
        }
        return claimed.sorted { $0.0.id < $1.0.id }
    }

    // MARK: completions

    /// Applies completions segment by segment in the caller's transaction: the segments' rows locked in id order
    /// (`FOR UPDATE`: one lock order for renewals and completions), `SegmentLedger.apply`, then the writes.
    static func complete(_ completions: [RowCompletion], now: Int64, on connection: PostgresConnection,
                         logger: Logger) async throws -> CompletionReport {
        var records: [Int64: SegmentRecord] = [:]
        for try await columns in try await connection.execute(
            LockSegmentsStatement(ids: SegmentLedger.bySegment(completions).map(\.segment)), logger: logger) {
            let record = try record(columns)
            records[record.id] = record
        }
        let needTargets = SegmentLedger.segmentsNeedingTargets(completions) { records[$0] != nil }
        var blobs: [Int64: [UInt8]] = [:]
        if !needTargets.isEmpty {
            for try await (id, targets) in try await connection.query(
                "SELECT segment_id, targets FROM norq_segment_targets WHERE segment_id = ANY(\(needTargets)::bigint[])",
                logger: logger).decode((Int64, ByteBuffer).self) {
                blobs[id] = Array(targets.readableBytesView)
            }
        }
        let checkpoint = try SegmentLedger.checkpoint(completions, records: records,
                                                      targets: SegmentLedger.decodedTargets(blobs), now: now)
        let updated = checkpoint.updated, finished = checkpoint.finished, newSegments = checkpoint.newSegments
        if !updated.isEmpty {
            _ = try await connection.execute(UpdateSegmentsStatement(records: updated), logger: logger)
        }
        if !finished.isEmpty {
            try await insertHistory(finished, on: connection, logger: logger)
            let ids = finished.map(\.id)
            // The targets stay until the send is pruned (status by position shows every token).
            _ = try await connection.execute(DeleteSegmentsStatement(ids: ids), logger: logger)
        }
        try await insert(newSegments, now: now, on: connection, logger: logger)
        try await record(checkpoint.registry, now: now, on: connection, logger: logger)
        if newSegments.contains(where: { !$0.isFinished }) {
            try await connection.query("SELECT pg_notify('norq_outbox', '')", logger: logger)
        }
        return checkpoint.report
    }

    // MARK: reading

    static func rows(ofSend id: String, positions: Range<Int>, on client: PostgresClient,
                     logger: Logger) async throws -> [OutboxRow] {
        let lower = positions.lowerBound, upper = min(positions.upperBound, Int(Int32.max))
        var result: [OutboxRow] = []
        for try await (c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, targets) in try await client.query("""
            SELECT \(unescaped: qualifiedRecordColumns("s")), t.targets
            FROM norq_segments s JOIN norq_segment_targets t ON t.segment_id = s.id
            WHERE s.send_id = \(id) AND s.last_position >= \(lower) AND s.first_position < \(upper)
            """, logger: logger).decode((Int64, String, Int, Int, String, Int, Int64, String?, String?, Int64?, Bool,
                                         Int, Int, Int, Int, ByteBuffer, ByteBuffer, Int64, ByteBuffer).self) {
            let record = try record((c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17))
            result += SegmentLedger.rows(record, targets: try SegmentCodec.decodeTargets(Array(targets.readableBytesView)),
                                         positions: positions)
        }
        for try await (c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, targets) in try await client.query("""
            SELECT \(unescaped: historyColumns), (SELECT t.targets FROM norq_segment_targets t WHERE t.segment_id = h.id)
            FROM norq_segment_history h
            WHERE send_id = \(id) AND last_position >= \(lower) AND first_position < \(upper)
            """, logger: logger).decode((Int64, String, Int, Int, Int, Int, Int, Int, ByteBuffer, ByteBuffer, Int64,
                                         ByteBuffer?).self) {
            let history = try history((c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10))
            let decoded = try targets.map { buffer throws(NorqError) in
                try SegmentCodec.decodeTargets(Array(buffer.readableBytesView))
            }
            result += SegmentLedger.rows(history, targets: decoded, positions: positions)
        }
        return result.sorted { $0.position < $1.position }
    }

    /// Counts by state over hot segments and history (a send's, or every one with `sendID` nil).
    static func stateCounts(sendID: String?, on client: PostgresClient,
                            logger: Logger) async throws -> [DeliveryState: Int] {
        var counts: [DeliveryState: Int] = [:]
        let rows = try await client.query("""
            SELECT CASE WHEN receipts THEN 'accepted' ELSE state END, sum(open)::bigint, sum(delivered)::bigint,
                sum(rejected)::bigint, sum(failed)::bigint, sum(skipped)::bigint
            FROM norq_segments WHERE \(sendID)::text IS NULL OR send_id = \(sendID)::text GROUP BY 1
            UNION ALL
            SELECT 'history', 0::bigint, coalesce(sum(delivered), 0)::bigint, coalesce(sum(rejected), 0)::bigint,
                coalesce(sum(failed), 0)::bigint, coalesce(sum(skipped), 0)::bigint
            FROM norq_segment_history WHERE \(sendID)::text IS NULL OR send_id = \(sendID)::text
            """, logger: logger)
        for try await (state, open, delivered, rejected, failed, skipped) in rows
            .decode((String, Int64, Int64, Int64, Int64, Int64).self) {
            // The open targets of a receipt segment have their outcome (`accepted`); the receipt decides the rest.
            if open > 0 { counts[DeliveryState(rawValue: state), default: 0] += Int(open) }
            SegmentCounts(delivered: Int(delivered), rejected: Int(rejected), failed: Int(failed), skipped: Int(skipped))
                .add(into: &counts)
        }
        return counts
    }

    // MARK: legacy rows

    /// Converts the rows of schema version 3 (a row per push) into one-target segments, in the migration's
    /// transaction (`SegmentLedger.legacy`).
    static func convertLegacyRows(on connection: PostgresConnection, logger: Logger) async throws {
        var hot: [OutboxRow] = []
        for try await row in try await connection.query(
            "SELECT \(unescaped: PostgresSchema.rowColumns), NULL::bigint FROM norq_outbox ORDER BY id", logger: logger) {
            hot.append(try PostgresSchema.outboxRow(row))
        }
        var done: [OutboxRow] = []
        for try await row in try await connection.query(
            "SELECT \(unescaped: PostgresSchema.rowColumns), finished_at FROM norq_history ORDER BY id", logger: logger) {
            done.append(try PostgresSchema.outboxRow(row))
        }
        let (segments, history) = SegmentLedger.legacy(hot: hot, finished: done)
        for (segment, row) in segments {
            var ids: [Int64] = []
            for try await id in try await connection.query("SELECT nextval('norq_segment_ids')", logger: logger)
                .decode(Int64.self) { ids.append(id) }
            guard let id = ids.first else { continue }
            let positions = segment.positions
            try await connection.query("""
                INSERT INTO norq_segments (id, send_id, count, open, state, attempts, next_attempt_at,
                    may_have_been_delivered, progress, positions, first_position, last_position, created_at)
                VALUES (\(id), \(segment.sendID), 1, 1, 'pending', 0, \(segment.nextAttemptAt), \(row.state == .leased),
                    \(buffer(SegmentCodec.encode(progress: segment.progress))),
                    \(buffer(SegmentCodec.encode(positions: positions))), \(positions.lowest), \(positions.highest),
                    \(segment.nextAttemptAt))
                """, logger: logger)
            try await connection.query(
                "INSERT INTO norq_segment_targets (segment_id, targets) VALUES (\(id), \(buffer(segment.encodedTargets)))",
                logger: logger)
        }
        var records: [SegmentHistoryRecord] = []
        for (var record, target) in history {
            for try await id in try await connection.query("SELECT nextval('norq_segment_ids')", logger: logger)
                .decode(Int64.self) { record.id = id }
            records.append(record)
            try await connection.query(
                "INSERT INTO norq_segment_targets (segment_id, targets) VALUES (\(record.id), \(buffer(SegmentCodec.encode(targets: [target]))))",
                logger: logger)
        }
        try await insertHistory(records, on: connection, logger: logger)
    }
}
