import NorqStore
import NIOCore
import PostgresNIO

// The statements a worker runs for every claim, as prepared statements: each pooled connection parses and plans a
// claim once, not once per call (`pg_stat_statements` with `track_planning`, stop 31: planning a claim cost the
// server more than executing it, 64 against 46 ms per 237 claims). postgres-nio prepares a statement on a
// connection the first time it runs there. Behind PgBouncer in transaction mode, set its `max_prepared_statements`
// (PgBouncer 1.21+) as for any client that prepares.

extension PostgresDeliveryStore {
    /// Leases due segments (pending and due, or leased with an expired lease; each partial index searched with
    /// `SKIP LOCKED`), oldest first, as many as hold up to `limit` open targets (at least one), and returns their
    /// state rows with their targets.
    struct ClaimStatement: PostgresPreparedStatement {
        static let name = "norq_claim_segments_v1"
        static let sql = """
            WITH pending AS (
                SELECT id, open, next_attempt_at FROM norq_segments
                WHERE state = 'pending' AND next_attempt_at <= $1
                ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED),
            expired AS (
                SELECT id, open, next_attempt_at FROM norq_segments
                WHERE state = 'leased' AND lease_expires_at <= $1
                ORDER BY lease_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED),
            due AS (SELECT * FROM pending UNION ALL SELECT * FROM expired),
            pick AS (
                SELECT id FROM (SELECT id, open, sum(open) OVER (ORDER BY next_attempt_at, id) AS running FROM due) r
                WHERE running - open < $2)
            UPDATE norq_segments s SET
                may_have_been_delivered = s.may_have_been_delivered OR s.state = 'leased',
                state = 'leased', attempts = s.attempts + 1, lease_owner = $3,
                lease_token = $4 || '-' || s.id, lease_expires_at = $5
            FROM pick WHERE s.id = pick.id
            RETURNING \(qualifiedRecordColumns("s")),
                (SELECT t.targets FROM norq_segment_targets t WHERE t.segment_id = s.id)
            """
        static let bindingDataTypes: [PostgresDataType] = [.int8, .int8, .text, .text, .int8]
        typealias Row = (RecordColumns, ByteBuffer?)

        var now: Int64
        var limit: Int64
        var owner: String
        var base: String
        var leaseUntil: Int64

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 5)
            bindings.append(now)
            bindings.append(limit)
            bindings.append(owner)
            bindings.append(base)
            bindings.append(leaseUntil)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {
            let (c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, targets) = try row
                .decode((Int64, String, Int, Int, String, Int, Int64, String?, String?, Int64?, Bool, Int, Int, Int, Int,
                         ByteBuffer, ByteBuffer, Int64, ByteBuffer?).self)
            return ((c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17), targets)
        }
    }
}

extension PostgresDeliveryStore {
    /// Reads and locks segments' state rows in id order (`FOR UPDATE`: the one lock order renewals and completions
    /// share), for a checkpoint.
    struct LockSegmentsStatement: PostgresPreparedStatement {
        static let name = "norq_lock_segments_v1"
        static let sql = "SELECT \(recordColumns) FROM norq_segments WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE"
        static let bindingDataTypes: [PostgresDataType] = [.int8Array]
        typealias Row = RecordColumns

        var ids: [Int64]

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(ids)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(RecordColumns.self) }
    }
}

extension PostgresDeliveryStore {
    /// Writes finished segments into history (one row each, from parallel arrays).
    struct InsertHistoryStatement: PostgresPreparedStatement {
        static let name = "norq_insert_segment_history_v1"
        static let sql = """
            INSERT INTO norq_segment_history (id, send_id, count, attempts, delivered, rejected, failed, skipped,
                progress, positions, first_position, last_position, finished_at)
            SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], $4::int[], $5::int[], $6::int[], $7::int[],
                $8::int[], $9::bytea[], $10::bytea[], $11::int[], $12::int[], $13::bigint[])
            """
        typealias Row = Void

        var records: [SegmentHistoryRecord]

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 13)
            bindings.append(records.map(\.id))
            bindings.append(records.map(\.sendID))
            bindings.append(records.map(\.count))
            bindings.append(records.map(\.attempts))
            bindings.append(records.map(\.counts.delivered))
            bindings.append(records.map(\.counts.rejected))
            bindings.append(records.map(\.counts.failed))
            bindings.append(records.map(\.counts.skipped))
            bindings.append(records.map { buffer(SegmentCodec.encode(progress: $0.progress)) })
            bindings.append(records.map { buffer(SegmentCodec.encode(positions: $0.positions)) })
            bindings.append(records.map(\.positions.lowest))
            bindings.append(records.map(\.positions.highest))
            bindings.append(records.map(\.finishedAt))
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {}
    }

    /// Writes back the state rows of segments a checkpoint changed without finishing them (one row each, from
    /// parallel arrays; an empty owner or token and a lease expiry of -1 are NULL).
    struct UpdateSegmentsStatement: PostgresPreparedStatement {
        static let name = "norq_update_segments_v1"
        static let sql = """
            UPDATE norq_segments s SET open = v.open, state = v.state, attempts = v.attempts,
                next_attempt_at = v.due, lease_owner = nullif(v.owner, ''), lease_token = nullif(v.token, ''),
                lease_expires_at = nullif(v.expires, -1),
                delivered = v.d, rejected = v.r, failed = v.f, skipped = v.s, progress = v.progress
            FROM unnest($1::bigint[], $2::int[], $3::text[], $4::int[], $5::bigint[], $6::text[], $7::text[],
                $8::bigint[], $9::int[], $10::int[], $11::int[], $12::int[], $13::bytea[])
                AS v(id, open, state, attempts, due, owner, token, expires, d, r, f, s, progress)
            WHERE s.id = v.id
            """
        typealias Row = Void

        var records: [SegmentRecord]

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 13)
            bindings.append(records.map(\.id))
            bindings.append(records.map(\.open))
            bindings.append(records.map(\.state.rawValue))
            bindings.append(records.map(\.attempts))
            bindings.append(records.map(\.nextAttemptAt))
            bindings.append(records.map { $0.leaseOwner ?? "" })
            bindings.append(records.map { $0.leaseToken ?? "" })
            bindings.append(records.map { $0.leaseExpiresAt ?? -1 })
            bindings.append(records.map(\.counts.delivered))
            bindings.append(records.map(\.counts.rejected))
            bindings.append(records.map(\.counts.failed))
            bindings.append(records.map(\.counts.skipped))
            bindings.append(records.map { buffer(SegmentCodec.encode(progress: $0.progress)) })
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {}
    }

    /// Deletes finished segments' state rows (their targets stay until the send is pruned).
    struct DeleteSegmentsStatement: PostgresPreparedStatement {
        static let name = "norq_delete_segments_v1"
        static let sql = "DELETE FROM norq_segments WHERE id = ANY($1::bigint[])"
        typealias Row = Void

        var ids: [Int64]

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(ids)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {}
    }
}
