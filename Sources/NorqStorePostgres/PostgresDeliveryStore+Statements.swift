import NorqCore
import NorqStore
import Logging
import NIOCore
import PostgresNIO

// The hot-path statements as prepared statements: each is parsed once per connection (postgres-nio prepares it by
// name on first use) and takes its rows as arrays for `unnest`, so a batch of any size is one Bind/Execute. Each
// is a single statement that is its own transaction when run alone (one round trip, no BEGIN/COMMIT).
//
// Prepared statements run with PostgreSQL's generic plan after a few executions, planned without the arrays'
// lengths (`unnest` of a parameter is estimated at 10 rows). So every compare-and-set on (row id, lease token)
// finds its rows through the primary key, one probe per array element. It does not also test
// `state = 'leased'`: that predicate lets the planner scan the partial index of leased rows and compare each with
// every element (measured: 40 ms instead of 3 ms for 256 rows with 256 leased), and it is implied: a row has a
// lease token exactly while it is leased (a claim sets a fresh random one; every other change clears it, and a
// finished row leaves the outbox).

/// Leases up to `limit` due rows: expired leases first, then due pending rows, each an index scan of its partial
/// index in its own order, `FOR UPDATE SKIP LOCKED` so concurrent workers neither wait nor take the same row.
/// Returns only what the claim did not set itself (`PostgresSchema.claimedColumns`), as one cell: an array of one
/// record per row (one `DataRow` per claim, not one per row: postgres-nio hops executors once per row it yields).
struct ClaimStatement: PostgresPreparedStatement {
    static let name = "norq_claim_5"
    static let sql = """
        WITH expired AS (
            SELECT id FROM norq_outbox WHERE state = 'leased' AND lease_expires_at <= $1
            ORDER BY lease_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED),
        pending AS (
            SELECT id FROM norq_outbox WHERE state = 'pending' AND next_attempt_at <= $1
            ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED),
        due AS (SELECT id FROM expired UNION ALL SELECT id FROM pending LIMIT $2),
        leased AS (
            UPDATE norq_outbox o SET
                may_have_been_delivered = o.may_have_been_delivered OR o.state = 'leased',
                state = 'leased', attempts = o.attempts + 1, lease_owner = $3,
                lease_token = $4 || '-' || o.id, lease_expires_at = $5
            FROM due WHERE o.id = due.id
            RETURNING \(PostgresSchema.claimedColumns.map { "o.\($0)" }.joined(separator: ", ")))
        SELECT array_agg(ROW(\(PostgresSchema.claimedColumns.joined(separator: ", "))))
        FROM leased
        """
    static let bindingDataTypes: [PostgresDataType] = [.int8, .int8, .text, .text, .int8]
    typealias Row = [OutboxRow]

    var now: Int64, limit: Int, owner: String, tokenBase: String, leaseUntil: Int64

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 5)
        bindings.append(now)
        bindings.append(limit)
        bindings.append(owner)
        bindings.append(tokenBase)
        bindings.append(leaseUntil)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> [OutboxRow] {
        try PostgresSchema.claimedRows(row, owner: owner, tokenBase: tokenBase, leaseUntil: leaseUntil)
    }
}

/// Extends the leases still held (compare-and-set on row id and lease token); returns the renewed ids.
///
/// Every statement that changes leased rows (renew, finish, update) locks them first in one order, by id
/// (`LockedRows`): two of them over the same rows (a worker's heartbeat and its own checkpoint, or a worker that
/// lost a lease and the one that took it) then wait for each other instead of deadlocking. (Locking in the order
/// of the `unnest` join deadlocked the renew and the finish under load; each lost its transaction, and the leases
/// of live workers expired.) Claims never wait (`SKIP LOCKED`).
struct RenewStatement: PostgresPreparedStatement {
    static let name = "norq_renew_3"
    static let sql = """
        WITH i AS (SELECT * FROM unnest($1::bigint[], $2::text[]) AS i(id, token)),
        \(LockedRows.sql)
        UPDATE norq_outbox o SET lease_expires_at = $3
        FROM locked WHERE o.id = locked.id
        RETURNING o.id
        """
    static let bindingDataTypes: [PostgresDataType] = [.int8Array, .textArray, .int8]
    typealias Row = Int64

    var ids: [Int64], tokens: [String], until: Int64

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 3)
        bindings.append(ids)
        bindings.append(tokens)
        bindings.append(until)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Int64 { try row.decode(Int64.self) }
}

/// The CTE `locked`: the inputs `i` (id, token, ...) whose row is still leased with that token, with every column
/// of `i`, their rows locked in id order (see `RenewStatement`). The change then joins `locked` alone with the table
/// by id: joining `locked` and `i` again let a generic plan (prepared statements) rescan `i` once per row
/// (estimated at 10 rows), 60 ms for a batch of 500 instead of 3.
enum LockedRows {
    static let sql = """
        locked AS (
            SELECT i.* FROM norq_outbox o JOIN i ON o.id = i.id AND o.lease_token = i.token
            ORDER BY o.id FOR UPDATE OF o)
        """
}

/// Finished rows go straight from the hot outbox to history (one `DELETE … RETURNING` into an `INSERT`: the row is
/// not updated first), a compare-and-set on (row id, lease token); returns the moved rows' ids, and with
/// `withIdentity` their token and provider too (what the registry needs of a `token-invalid` outcome), one row
/// each; without it, one row: the moved ids as one array (one `DataRow` per batch, not one per row).
struct FinishSQL {
    static func sql(withIdentity: Bool) -> String {
        withIdentity ? "\(moved)\n\(insert)\nRETURNING id, identity, provider" : """
            \(moved),
            moved_ids AS (
            \(insert)
            RETURNING id)
            SELECT coalesce(array_agg(id), '{}') FROM moved_ids
            """
    }

    /// The finishes as rows, and the rows they move out of the outbox.
    static let moved = """
        WITH i AS (
            SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[],
                $7::text[], $8::bigint[], $9::text[], $10::bool[])
                AS i(id, token, state, l_status, l_reason, l_code, l_class, l_since, l_message, maybe)),
        \(LockedRows.sql),
        moved AS (
            DELETE FROM norq_outbox o USING locked i
            WHERE o.id = i.id AND o.lease_token = i.token
            RETURNING o.id, o.send_id, o.position, o.target, o.identity, o.provider, o.recipient_id,
                i.state, o.attempts, o.next_attempt_at, o.message_id,
                o.may_have_been_delivered OR i.maybe AS maybe, NULLIF(i.l_status, -1)::int AS l_status,
                NULLIF(i.l_reason, '') AS l_reason, NULLIF(i.l_code, '') AS l_code,
                NULLIF(i.l_class, '') AS l_class, NULLIF(i.l_since, -1) AS l_since,
                NULLIF(i.l_message, '') AS l_message)
        """

    /// The moved rows into history.
    static let insert = """
        INSERT INTO norq_history (\(PostgresSchema.rowColumns), finished_at)
        SELECT id, send_id, position, target, identity, provider, recipient_id, state, attempts,
            next_attempt_at, NULL, NULL, NULL, message_id, maybe, state, l_status, l_reason, l_code,
            l_class, l_since, l_message, $11
        FROM moved
        """

    static let bindingDataTypes: [PostgresDataType] = [
        .int8Array, .textArray, .textArray, .int8Array, .textArray, .textArray, .textArray, .int8Array, .textArray,
        .boolArray, .int8,
    ]

    static func bindings(_ arrays: PostgresDeliveryStore.FinishArrays, now: Int64) -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 11)
        bindings.append(arrays.ids)
        bindings.append(arrays.tokens)
        bindings.append(arrays.states)
        bindings.append(arrays.statuses)
        bindings.append(arrays.reasons)
        bindings.append(arrays.codes)
        bindings.append(arrays.classes)
        bindings.append(arrays.sinces)
        bindings.append(arrays.messages)
        bindings.append(arrays.maybes)
        bindings.append(now)
        return bindings
    }
}

/// `FinishSQL` returning each moved row's id, token and provider (a batch with a `token-invalid` outcome).
struct FinishStatement: PostgresPreparedStatement {
    static let name = "norq_finish_5"
    static let sql = FinishSQL.sql(withIdentity: true)
    static let bindingDataTypes = FinishSQL.bindingDataTypes
    typealias Row = (Int64, String, String?)

    var arrays: PostgresDeliveryStore.FinishArrays, now: Int64

    func makeBindings() -> PostgresBindings { FinishSQL.bindings(arrays, now: now) }

    func decodeRow(_ row: PostgresRow) throws -> (Int64, String, String?) {
        try row.decode((Int64, String, String?).self)
    }
}

/// `FinishSQL` returning the moved rows' ids as one array (the usual batch: nothing for the registry).
struct FinishIDsStatement: PostgresPreparedStatement {
    static let name = "norq_finish_ids_5"
    static let sql = FinishSQL.sql(withIdentity: false)
    static let bindingDataTypes = FinishSQL.bindingDataTypes
    typealias Row = [Int64]

    var arrays: PostgresDeliveryStore.FinishArrays, now: Int64

    func makeBindings() -> PostgresBindings { FinishSQL.bindings(arrays, now: now) }

    func decodeRow(_ row: PostgresRow) throws -> [Int64] { try row.decode([Int64].self) }
}

/// Retries, releases and finishes to a state that is not final: the row goes back to pending (compare-and-set on
/// row id and lease token); returns the changed ids.
struct UpdateStatement: PostgresPreparedStatement {
    static let name = "norq_update_3"
    static let sql = """
        WITH i AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[],
            $7::bigint[], $8::text[], $9::text[], $10::text[], $11::bigint[], $12::text[], $13::bool[])
            AS i(id, token, kind, state, at, l_state, l_status, l_reason, l_code, l_class, l_since, l_message, maybe)),
        \(LockedRows.sql)
        UPDATE norq_outbox o SET
            state = i.state,
            next_attempt_at = CASE WHEN i.kind = 'retry' THEN i.at ELSE o.next_attempt_at END,
            attempts = CASE WHEN i.kind = 'release' THEN greatest(0, o.attempts - 1) ELSE o.attempts END,
            lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,
            may_have_been_delivered = o.may_have_been_delivered OR i.maybe,
            last_state = CASE WHEN i.kind = 'release' THEN o.last_state ELSE NULLIF(i.l_state, '') END,
            last_status = CASE WHEN i.kind = 'release' THEN o.last_status ELSE NULLIF(i.l_status, -1)::int END,
            last_reason = CASE WHEN i.kind = 'release' THEN o.last_reason ELSE NULLIF(i.l_reason, '') END,
            last_code = CASE WHEN i.kind = 'release' THEN o.last_code ELSE NULLIF(i.l_code, '') END,
            last_classification = CASE WHEN i.kind = 'release' THEN o.last_classification ELSE NULLIF(i.l_class, '') END,
            last_invalid_since = CASE WHEN i.kind = 'release' THEN o.last_invalid_since ELSE NULLIF(i.l_since, -1) END,
            last_message_id = CASE WHEN i.kind = 'release' THEN o.last_message_id ELSE NULLIF(i.l_message, '') END
        FROM locked i
        WHERE o.id = i.id AND o.lease_token = i.token
        RETURNING o.id
        """
    static let bindingDataTypes: [PostgresDataType] = [
        .int8Array, .textArray, .textArray, .textArray, .int8Array, .textArray, .int8Array, .textArray, .textArray,
        .textArray, .int8Array, .textArray, .boolArray,
    ]
    typealias Row = Int64

    var arrays: PostgresDeliveryStore.UpdateArrays

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 13)
        bindings.append(arrays.ids)
        bindings.append(arrays.tokens)
        bindings.append(arrays.kinds)
        bindings.append(arrays.states)
        bindings.append(arrays.ats)
        bindings.append(arrays.lastStates)
        bindings.append(arrays.statuses)
        bindings.append(arrays.reasons)
        bindings.append(arrays.codes)
        bindings.append(arrays.classes)
        bindings.append(arrays.sinces)
        bindings.append(arrays.messages)
        bindings.append(arrays.maybes)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Int64 { try row.decode(Int64.self) }
}

/// The rows of one enqueue chunk as column arrays for `unnest`.
struct EnqueueArrays: Sendable {
    var positions: [Int] = [], targets: [String] = [], identities: [String] = [], providers: [String] = []
    var recipients: [String] = [], messages: [String] = [], states: [String] = [], lastStates: [String] = []
    var statuses: [Int] = [], reasons: [String] = [], codes: [String] = [], classes: [String] = []
    /// Not in `append(to:)`: only the one-statement send matches the registry with them ($20).
    var environments: [String] = []

    init(_ chunk: ArraySlice<NewDelivery>) {
        for row in chunk {
            environments.append(row.environment ?? "")
            positions.append(row.position)
            targets.append(row.target)
            identities.append(row.identity)
            providers.append(row.provider ?? "")
            recipients.append(row.recipientID ?? "")
            messages.append(row.messageID ?? "")
            states.append((row.outcome?.state ?? .pending).rawValue)
            lastStates.append(row.outcome?.state.rawValue ?? "")
            statuses.append(row.outcome?.status ?? -1)
            reasons.append(row.outcome?.reason ?? "")
            codes.append(row.outcome?.code ?? "")
            classes.append(row.outcome?.classification ?? "")
        }
    }

    func append(to bindings: inout PostgresBindings) {
        bindings.append(positions)
        bindings.append(targets)
        bindings.append(identities)
        bindings.append(providers)
        bindings.append(recipients)
        bindings.append(messages)
        bindings.append(states)
        bindings.append(lastStates)
        bindings.append(statuses)
        bindings.append(reasons)
        bindings.append(codes)
        bindings.append(classes)
    }

    static let bindingDataTypes: [PostgresDataType] = [
        .int8Array, .textArray, .textArray, .textArray, .textArray, .textArray, .textArray, .textArray, .int8Array,
        .textArray, .textArray, .textArray,
    ]

    /// One statement for a whole send of at most `PostgresDeliveryStore.insertChunk` targets ($1 send id, $2 now,
    /// $3…$14 the arrays, $15…$19 the send, $20 the targets' environments, which only match the token registry:
    /// the newest entry for the token, provider and environment, `PostgresSchema.registryMatch`): the send is
    /// inserted, the token registry read at insert time, rows
    /// still to deliver go to the hot outbox, rows already finished (routing outcomes; tokens reported invalid and
    /// not registered again since: `token/invalid`) straight to history, the send with the range of its rows' ids;
    /// one `NOTIFY` when rows are pending.
    static let sendSQL = """
        WITH u AS (
            SELECT * FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
                $9::text[], $10::text[], $11::bigint[], $12::text[], $13::text[], $14::text[], $20::text[])
                AS u(position, target, identity, provider, recipient, message, state, last_state, status, reason,
                    code, class, environment)),
        j AS (
            SELECT u.*, b.invalid_since AS bad_since, b.reason AS bad_reason
            FROM u LEFT JOIN LATERAL (
                SELECT t.invalid_since, t.reason FROM norq_invalid_tokens t
                WHERE u.state = 'pending' AND \(PostgresSchema.registryMatch("t", token: "u.identity",
                    provider: "u.provider", environment: "u.environment"))
                ORDER BY t.invalid_since DESC LIMIT 1) b ON true),
        hot AS (
            INSERT INTO norq_outbox (send_id, position, target, identity, provider, recipient_id, message_id,
                state, next_attempt_at, last_state, last_status, last_reason, last_code, last_classification)
            SELECT $1, position::int, target, identity, NULLIF(provider, ''), NULLIF(recipient, ''),
                NULLIF(message, ''), state, $2, NULLIF(last_state, ''), NULLIF(status, -1)::int,
                NULLIF(reason, ''), NULLIF(code, ''), NULLIF(class, '')
            FROM j WHERE bad_since IS NULL AND state IN ('pending', 'leased')
            ORDER BY position
            RETURNING id),
        finished AS (
            INSERT INTO norq_history (\(PostgresSchema.rowColumns), finished_at)
            SELECT nextval('norq_rows_id'), $1, position::int, target, identity, NULLIF(provider, ''),
                NULLIF(recipient, ''),
                CASE WHEN bad_since IS NULL THEN state ELSE 'skipped' END, 0, $2, NULL, NULL, NULL,
                NULLIF(message, ''), false,
                CASE WHEN bad_since IS NULL THEN NULLIF(last_state, '') ELSE 'skipped' END,
                NULLIF(status, -1)::int,
                CASE WHEN bad_since IS NULL THEN NULLIF(reason, '')
                    ELSE 'the token was reported invalid (' || bad_reason || ') and not registered again since' END,
                CASE WHEN bad_since IS NULL THEN NULLIF(code, '') ELSE 'token/invalid' END,
                CASE WHEN bad_since IS NULL THEN NULLIF(class, '') ELSE 'token-invalid' END,
                bad_since, NULL, $2
            FROM j WHERE NOT (bad_since IS NULL AND state IN ('pending', 'leased'))
            ORDER BY position
            RETURNING id),
        ids AS (SELECT id FROM hot UNION ALL SELECT id FROM finished),
        sent AS (
            INSERT INTO norq_sends (id, scope, idempotency_key, fingerprint, content, created_at, target_count,
                first_row_id, last_row_id)
            SELECT $1, $15, $16, $17, $18, $2, $19::int, (SELECT min(id) FROM ids), (SELECT max(id) FROM ids))
        SELECT (SELECT count(*) FROM hot),
            (SELECT count(*) FROM (SELECT pg_notify('norq_outbox', '') WHERE EXISTS (SELECT 1 FROM hot)) n)
        """
}

/// A send of at most `PostgresDeliveryStore.insertChunk` targets in one statement (`EnqueueArrays.sendSQL`).
struct EnqueueSendStatement: PostgresPreparedStatement {
    static let name = "norq_enqueue_send_3"
    static let sql = EnqueueArrays.sendSQL
    static let bindingDataTypes: [PostgresDataType] = [.text, .int8] + EnqueueArrays.bindingDataTypes
        + [.text, .text, .text, .text, .int8, .textArray]
    typealias Row = (Int64, Int64)

    var send: NewSend, now: Int64, arrays: EnqueueArrays

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 20)
        bindings.append(send.id)
        bindings.append(now)
        arrays.append(to: &bindings)
        bindings.append(send.scope)
        bindings.append(send.idempotencyKey)
        bindings.append(send.fingerprint)
        bindings.append(send.content)
        bindings.append(send.targets.count)
        bindings.append(arrays.environments)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> (Int64, Int64) { try row.decode((Int64, Int64).self) }
}

/// One chunk of a bulk send (more than `PostgresDeliveryStore.insertChunk` targets): a plain insert into the hot
/// outbox, returning the first and last row id; the registry check, the move of finished rows and the send (with
/// its rows' id range) follow once per send, in the same transaction.
struct EnqueueChunkStatement: PostgresPreparedStatement {
    static let name = "norq_enqueue_chunk_2"
    static let sql = """
        WITH ins AS (
        INSERT INTO norq_outbox (send_id, position, target, identity, provider, recipient_id, message_id,
            state, next_attempt_at, last_state, last_status, last_reason, last_code, last_classification)
        SELECT $1, u.position::int, u.target, u.identity, NULLIF(u.provider, ''), NULLIF(u.recipient, ''),
            NULLIF(u.message, ''), u.state, $2, NULLIF(u.last_state, ''), NULLIF(u.status, -1)::int,
            NULLIF(u.reason, ''), NULLIF(u.code, ''), NULLIF(u.class, '')
        FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
            $10::text[], $11::bigint[], $12::text[], $13::text[], $14::text[])
            AS u(position, target, identity, provider, recipient, message, state, last_state, status, reason, code,
                class)
        RETURNING id)
        SELECT min(id), max(id) FROM ins
        """
    static let bindingDataTypes: [PostgresDataType] = [.text, .int8] + EnqueueArrays.bindingDataTypes
    typealias Row = (Int64, Int64)

    /// Encoded when the statement is made (`BulkChunk`).
    let bindings: PostgresBindings

    init(sendID: String, now: Int64, arrays: EnqueueArrays) {
        var bindings = PostgresBindings(capacity: 14)
        bindings.append(sendID)
        bindings.append(now)
        arrays.append(to: &bindings)
        self.bindings = bindings
    }

    func makeBindings() -> PostgresBindings { bindings }

    func decodeRow(_ row: PostgresRow) throws -> (Int64, Int64) { try row.decode((Int64, Int64).self) }
}

/// A chunk of a bulk send whose rows all wait for delivery (none has a routing outcome: the usual case): only the
/// six columns that vary from row to row are sent, the state is `pending`. Returns the first and last row id.
struct EnqueuePendingChunkStatement: PostgresPreparedStatement {
    static let name = "norq_enqueue_pending_chunk_2"
    static let sql = """
        WITH ins AS (
        INSERT INTO norq_outbox (send_id, position, target, identity, provider, recipient_id, message_id, state,
            next_attempt_at)
        SELECT $1, u.position::int, u.target, u.identity, NULLIF(u.provider, ''), NULLIF(u.recipient, ''),
            NULLIF(u.message, ''), 'pending', $2
        FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
            AS u(position, target, identity, provider, recipient, message)
        RETURNING id)
        SELECT min(id), max(id) FROM ins
        """
    static let bindingDataTypes: [PostgresDataType] = [
        .text, .int8, .int8Array, .textArray, .textArray, .textArray, .textArray, .textArray,
    ]
    typealias Row = (Int64, Int64)

    /// Encoded when the statement is made (`BulkChunk`).
    let bindings: PostgresBindings

    init(sendID: String, now: Int64, chunk: ArraySlice<NewDelivery>) {
        var bindings = PostgresBindings(capacity: 8)
        bindings.append(sendID)
        bindings.append(now)
        bindings.append(chunk.map(\.position))
        for field in [ChunkTextColumn.Field.target, .identity, .provider, .recipient, .message] {
            bindings.append(ChunkTextColumn(rows: chunk, field: field))
        }
        self.bindings = bindings
    }

    func makeBindings() -> PostgresBindings { bindings }

    func decodeRow(_ row: PostgresRow) throws -> (Int64, Int64) { try row.decode((Int64, Int64).self) }
}

/// One chunk of a bulk send, encoded (on the caller's task) before it is sent: the store encodes the next chunk
/// while the server inserts this one.
enum BulkChunk: Sendable {
    case pending(EnqueuePendingChunkStatement)
    case mixed(EnqueueChunkStatement)

    /// Whether a row of the chunk is finished at enqueue (a routing outcome).
    var hasOutcomes: Bool {
        if case .mixed = self { return true }
        return false
    }

    init(sendID: String, now: Int64, chunk: ArraySlice<NewDelivery>) {
        if chunk.contains(where: { $0.outcome != nil }) {
            self = .mixed(EnqueueChunkStatement(sendID: sendID, now: now, arrays: EnqueueArrays(chunk)))
        } else {
            self = .pending(EnqueuePendingChunkStatement(sendID: sendID, now: now, chunk: chunk))
        }
    }

    /// Inserts the chunk; returns its first and last row id.
    func insert(on connection: PostgresConnection, logger: Logger) async throws -> (first: Int64, last: Int64) {
        var range = (first: Int64.max, last: Int64.min)
        switch self {
        case .pending(let statement):
            for try await (first, last) in try await connection.execute(statement, logger: logger) {
                range = (first, last)
            }
        case .mixed(let statement):
            for try await (first, last) in try await connection.execute(statement, logger: logger) {
                range = (first, last)
            }
        }
        return range
    }
}

/// One text column of a chunk's rows as a PostgreSQL `text[]` in the binary format, written straight from the rows
/// (no intermediate array of strings; NULL is the empty string, turned back by `NULLIF` in the statement).
struct ChunkTextColumn: PostgresNonThrowingEncodable {
    enum Field: Sendable { case target, identity, provider, recipient, message }

    static var psqlType: PostgresDataType { .textArray }
    static var psqlFormat: PostgresFormat { .binary }

    let rows: ArraySlice<NewDelivery>
    let field: Field

    func encode<JSONEncoder: PostgresJSONEncoder>(into buffer: inout ByteBuffer,
                                                  context: PostgresEncodingContext<JSONEncoder>) {
        // Dimensions, the has-nulls flag, the element type; then the length and lower bound of the one dimension.
        buffer.writeInteger(rows.isEmpty ? 0 : 1, as: UInt32.self)
        buffer.writeInteger(0, as: Int32.self)
        buffer.writeInteger(PostgresDataType.text.rawValue)
        guard !rows.isEmpty else { return }
        buffer.writeInteger(Int32(rows.count))
        buffer.writeInteger(1, as: Int32.self)
        for row in rows {
            let value: String
            switch field {
            case .target: value = row.target
            case .identity: value = row.identity
            case .provider: value = row.provider ?? ""
            case .recipient: value = row.recipientID ?? ""
            case .message: value = row.messageID ?? ""
            }
            buffer.writeInteger(Int32(value.utf8.count))
            buffer.writeString(value)
        }
    }
}
