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
        // 4: segments instead of a row per push (issue 29): `norq_segments` (a hot segment's small mutable state;
        // fillfactor for HOT updates of its progress), `norq_segment_targets` (its immutable targets, one bytea),
        // `norq_segment_history` (a finished segment's summary and non-delivered targets), ids from
        // `norq_segment_ids` (a history row keeps its segment's id; target ids derive from it). The rows of
        // version 3 are converted by `convertLegacyRows` after these statements, then `dropLegacy` runs.
        [
            "CREATE SEQUENCE norq_segment_ids",
            """
            CREATE TABLE norq_segments (
                id bigint PRIMARY KEY, send_id text NOT NULL, count int NOT NULL, open int NOT NULL,
                state text NOT NULL, attempts int NOT NULL DEFAULT 0, next_attempt_at bigint NOT NULL,
                lease_owner text, lease_token text, lease_expires_at bigint,
                may_have_been_delivered boolean NOT NULL DEFAULT false, delivered int NOT NULL DEFAULT 0,
                rejected int NOT NULL DEFAULT 0, failed int NOT NULL DEFAULT 0, skipped int NOT NULL DEFAULT 0,
                progress bytea NOT NULL, positions bytea NOT NULL, first_position int NOT NULL,
                last_position int NOT NULL, created_at bigint NOT NULL) WITH (fillfactor = 70)
            """,
            "CREATE INDEX norq_segments_due ON norq_segments (next_attempt_at) WHERE state = 'pending'",
            "CREATE INDEX norq_segments_leases ON norq_segments (lease_expires_at) WHERE state = 'leased'",
            "CREATE INDEX norq_segments_send ON norq_segments (send_id, first_position)",
            "CREATE TABLE norq_segment_targets (segment_id bigint PRIMARY KEY, targets bytea NOT NULL)",
            """
            CREATE TABLE norq_segment_history (
                id bigint PRIMARY KEY, send_id text NOT NULL, count int NOT NULL, attempts int NOT NULL,
                delivered int NOT NULL,
                rejected int NOT NULL, failed int NOT NULL, skipped int NOT NULL, progress bytea NOT NULL,
                positions bytea NOT NULL, first_position int NOT NULL, last_position int NOT NULL,
                finished_at bigint NOT NULL)
            """,
            "CREATE INDEX norq_segment_history_send ON norq_segment_history (send_id, first_position)",
            "CREATE INDEX norq_segment_history_finished ON norq_segment_history (finished_at)",
        ],
        // 5: receipt segments (issue 31): a segment whose targets the service accepted and whose receipts the
        // worker fetches (`NewSegment.awaitsReceipts`); `stateCounts` counts their open targets as `accepted`.
        [
            "ALTER TABLE norq_segments ADD COLUMN receipts boolean NOT NULL DEFAULT false",
        ],
    ]

    /// The version whose migration converts a row per push into segments.
    static let segmentsVersion = 4

    /// Run after `PostgresDeliveryStore.convertLegacyRows` in the migration to version 4.
    static let dropLegacy = [
        "DROP TABLE IF EXISTS norq_outbox",
        "DROP TABLE IF EXISTS norq_history",
        "DROP SEQUENCE IF EXISTS norq_rows_id",
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
