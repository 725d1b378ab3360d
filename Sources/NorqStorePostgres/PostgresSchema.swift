import NorqCore
import NorqStore
import PostgresNIO

/// The PostgreSQL schema, versioned: `migrations[n - 1]` takes the database from version n - 1 to n. Never edit a
/// released migration; append a new one.
enum PostgresSchema {
    static let columnNames = [
        "id", "send_id", "position", "target", "identity", "provider", "recipient_id", "state", "attempts",
        "next_attempt_at", "lease_owner", "lease_token", "lease_expires_at", "message_id", "may_have_been_delivered",
        "last_state", "last_status", "last_reason", "last_code", "last_classification", "last_invalid_since",
        "last_message_id",
    ]
    static let rowColumns = columnNames.joined(separator: ", ")
    static func qualifiedRowColumns(_ alias: String) -> String {
        columnNames.map { "\(alias).\($0)" }.joined(separator: ", ")
    }

    static let migrations: [[String]] = [
        // 1: sends, the hot outbox (pending and leased rows only; fillfactor leaves room for HOT updates), history,
        // the token registry.
        [
            """
            CREATE TABLE norq_sends (
                id text PRIMARY KEY, scope text NOT NULL, idempotency_key text, fingerprint text NOT NULL,
                content text NOT NULL, created_at bigint NOT NULL, target_count int NOT NULL)
            """,
            "CREATE UNIQUE INDEX norq_sends_key ON norq_sends (scope, idempotency_key) WHERE idempotency_key IS NOT NULL",
            "CREATE INDEX norq_sends_created ON norq_sends (created_at)",
            "CREATE SEQUENCE norq_rows_id",
            """
            CREATE TABLE norq_outbox (
                id bigint PRIMARY KEY DEFAULT nextval('norq_rows_id'), send_id text NOT NULL, position int NOT NULL,
                target text NOT NULL, identity text NOT NULL, provider text, recipient_id text, state text NOT NULL,
                attempts int NOT NULL DEFAULT 0, next_attempt_at bigint NOT NULL, lease_owner text, lease_token text,
                lease_expires_at bigint, message_id text, may_have_been_delivered boolean NOT NULL DEFAULT false,
                last_state text, last_status int, last_reason text, last_code text, last_classification text,
                last_invalid_since bigint, last_message_id text) WITH (fillfactor = 70)
            """,
            "CREATE INDEX norq_outbox_due ON norq_outbox (next_attempt_at) WHERE state = 'pending'",
            "CREATE INDEX norq_outbox_leases ON norq_outbox (lease_expires_at) WHERE state = 'leased'",
            "CREATE INDEX norq_outbox_send ON norq_outbox (send_id)",
            """
            CREATE TABLE norq_history (
                id bigint PRIMARY KEY, send_id text NOT NULL, position int NOT NULL,
                target text NOT NULL, identity text NOT NULL, provider text, recipient_id text, state text NOT NULL,
                attempts int NOT NULL, next_attempt_at bigint NOT NULL, lease_owner text, lease_token text,
                lease_expires_at bigint, message_id text, may_have_been_delivered boolean NOT NULL,
                last_state text, last_status int, last_reason text, last_code text, last_classification text,
                last_invalid_since bigint, last_message_id text, finished_at bigint NOT NULL)
            """,
            "CREATE INDEX norq_history_send ON norq_history (send_id)",
            "CREATE INDEX norq_history_finished ON norq_history (finished_at)",
            """
            CREATE TABLE norq_invalid_tokens (
                token text PRIMARY KEY, provider text, reason text NOT NULL, invalid_since bigint NOT NULL,
                recorded_at bigint NOT NULL, registered_at bigint)
            """,
        ],
        // 2: a send records the range of its rows' ids (every row of a send takes its id from `norq_rows_id` in
        // the enqueue's transaction and keeps it into history), and a send's rows are found through the primary
        // keys within that range: the two `send_id` indexes go. Each cost a B-tree insert per enqueued row, per
        // claim (a claim is not a HOT update) and per finished row, the most expensive of the hot path's indexes
        // (every key of a bulk send is the same text). Sends of version 1 get their range from their rows. Stop
        // instances of the older norq before migrating: one still running would insert sends without a range.
        [
            "ALTER TABLE norq_sends ADD COLUMN first_row_id bigint, ADD COLUMN last_row_id bigint",
            """
            UPDATE norq_sends s SET first_row_id = r.lo, last_row_id = r.hi
            FROM (SELECT send_id, min(id) AS lo, max(id) AS hi
                  FROM (SELECT send_id, id FROM norq_outbox UNION ALL SELECT send_id, id FROM norq_history) a
                  GROUP BY send_id) r
            WHERE r.send_id = s.id
            """,
            "DROP INDEX norq_outbox_send",
            "DROP INDEX norq_history_send",
        ],
        // 3: the token registry is keyed by (token, provider instance, environment) (issue 29): APNs answers
        // `BadDeviceToken` also for a token sent to the other environment, so an answer invalidates the token only
        // for the provider and environment it came from. '' is "none or unknown" and matches every provider or
        // environment (`DeliveryStoreRules.registryEntryMatches`): entries of version 2 keep their provider and get
        // environment '', so they keep skipping the token everywhere until it is registered again, as before.
        [
            "ALTER TABLE norq_invalid_tokens ADD COLUMN environment text NOT NULL DEFAULT ''",
            "UPDATE norq_invalid_tokens SET provider = '' WHERE provider IS NULL",
            "ALTER TABLE norq_invalid_tokens ALTER COLUMN provider SET DEFAULT '', ALTER COLUMN provider SET NOT NULL",
            "ALTER TABLE norq_invalid_tokens DROP CONSTRAINT norq_invalid_tokens_pkey",
            "ALTER TABLE norq_invalid_tokens ADD PRIMARY KEY (token, provider, environment)",
        ],
    ]

    /// The SQL condition that a registry entry `t` skips a pending target whose token, provider and environment
    /// are `token`, `provider` and `environment` (SQL text expressions, none NULL: '' for none): the same token, the
    /// entry's provider and environment equal or '' (it matches every one:
    /// `DeliveryStoreRules.registryEntryMatches`), and not registered again since it was reported.
    static func registryMatch(_ t: String, token: String, provider: String, environment: String) -> String {
        """
        \(t).token = \(token) AND \(t).provider IN ('', \(provider)) AND \(t).environment IN ('', \(environment))
            AND (\(t).registered_at IS NULL OR \(t).registered_at <= \(t).invalid_since)
        """
    }

    /// What a claim returns of each row it leased: the columns the claim did not set itself (it knows the state,
    /// the lease owner, token and expiry, and a leased row is not finished), in this order (`claimedRow`).
    static let claimedColumns = [
        "id", "send_id", "position", "target", "identity", "provider", "recipient_id", "attempts", "next_attempt_at",
        "message_id", "may_have_been_delivered", "last_state", "last_status", "last_reason", "last_code",
        "last_classification", "last_invalid_since", "last_message_id",
    ]

    /// The rows a claim returned (one cell: an array of records of `claimedColumns`, in order) with the lease the
    /// claim set: `lease_token` is `tokenBase-id` (`ClaimStatement`). No rows: the cell is NULL. Read field by
    /// field from the cell's bytes (`BinaryRecordArrayReader`).
    static func claimedRows(_ row: PostgresRow, owner: String, tokenBase: String,
                            leaseUntil: Int64) throws -> [OutboxRow] {
        var cells = row.makeIterator()
        guard let cell = cells.next() else {
            throw NorqError(.storeFailed, "a claim returned no column")
        }
        guard var records = try BinaryRecordArrayReader(cell) else { return [] }
        func required<T>(_ value: T?, _ name: String) throws(NorqError) -> T {
            guard let value else { throw NorqError(.storeFailed, "a claimed row has no \(name)") }
            return value
        }
        var rows: [OutboxRow] = []
        rows.reserveCapacity(records.count)
        for _ in 0..<records.count {
            try records.nextRecord(fields: claimedColumns.count)
            let id = try required(records.integer(), "id"), sendID = try required(records.text(), "send_id")
            let position = try required(records.integer(), "position")
            let target = try required(records.text(), "target"), identity = try required(records.text(), "identity")
            let provider = try records.text(), recipient = try records.text()
            let attempts = try required(records.integer(), "attempts")
            let nextAttempt = try required(records.integer(), "next_attempt_at")
            let message = try records.text(), maybe = try required(records.bool(), "may_have_been_delivered")
            let lastState = try records.text(), status = try records.integer(), reason = try records.text()
            let code = try records.text(), classification = try records.text(), since = try records.integer()
            let lastMessage = try records.text()
            let last = lastState.map {
                StoredOutcome(state: DeliveryState(rawValue: $0), status: status.map { Int($0) }, reason: reason,
                              code: code, classification: classification, invalidSince: since,
                              messageID: lastMessage, mayHaveBeenDelivered: maybe)
            }
            rows.append(OutboxRow(id: id, sendID: sendID, position: Int(position), target: target,
                                  identity: identity, provider: provider, recipientID: recipient, state: .leased,
                                  attempts: Int(attempts), nextAttemptAt: nextAttempt, leaseOwner: owner,
                                  leaseToken: "\(tokenBase)-\(id)", leaseExpiresAt: leaseUntil, messageID: message,
                                  mayHaveBeenDelivered: maybe, last: last))
        }
        return rows
    }

    /// A row selected with `rowColumns` followed by `finished_at`, decoded by position (in `columnNames` order).
    static func outboxRow(_ row: PostgresRow) throws -> OutboxRow {
        let r = row.makeRandomAccess()
        let maybe = try r[14].decode(Bool.self)
        let last = try r[15].decode(String?.self).map {
            StoredOutcome(state: DeliveryState(rawValue: $0), status: try r[16].decode(Int?.self),
                          reason: try r[17].decode(String?.self), code: try r[18].decode(String?.self),
                          classification: try r[19].decode(String?.self),
                          invalidSince: try r[20].decode(Int64?.self),
                          messageID: try r[21].decode(String?.self), mayHaveBeenDelivered: maybe)
        }
        return OutboxRow(id: try r[0].decode(Int64.self), sendID: try r[1].decode(String.self),
                         position: try r[2].decode(Int.self), target: try r[3].decode(String.self),
                         identity: try r[4].decode(String.self), provider: try r[5].decode(String?.self),
                         recipientID: try r[6].decode(String?.self),
                         state: DeliveryState(rawValue: try r[7].decode(String.self)),
                         attempts: try r[8].decode(Int.self), nextAttemptAt: try r[9].decode(Int64.self),
                         leaseOwner: try r[10].decode(String?.self), leaseToken: try r[11].decode(String?.self),
                         leaseExpiresAt: try r[12].decode(Int64?.self), messageID: try r[13].decode(String?.self),
                         mayHaveBeenDelivered: maybe, last: last, finishedAt: try r[22].decode(Int64?.self))
    }
}
