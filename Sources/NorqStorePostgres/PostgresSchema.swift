import NorqCore
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
    ]

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
