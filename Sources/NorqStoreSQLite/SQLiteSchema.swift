import NorqCore
import SQLiteNIO

/// The SQLite schema, versioned: `migrations[n - 1]` takes the database from version n - 1 to n. Never edit a
/// released migration; append a new one.
enum SQLiteSchema {
    static let rowColumns = """
        id, send_id, position, target, identity, provider, recipient_id, state, attempts, next_attempt_at, \
        lease_owner, lease_token, lease_expires_at, message_id, may_have_been_delivered, last_state, last_status, \
        last_reason, last_code, last_classification, last_invalid_since, last_message_id
        """

    static let migrations: [[String]] = [
        // 1: sends, the hot outbox (pending and leased rows only), history, the token registry.
        [
            """
            CREATE TABLE norq_sends (
                id TEXT PRIMARY KEY, scope TEXT NOT NULL, idempotency_key TEXT, fingerprint TEXT NOT NULL,
                content TEXT NOT NULL, created_at INTEGER NOT NULL, target_count INTEGER NOT NULL)
            """,
            "CREATE UNIQUE INDEX norq_sends_key ON norq_sends (scope, idempotency_key) WHERE idempotency_key IS NOT NULL",
            "CREATE INDEX norq_sends_created ON norq_sends (created_at)",
            """
            CREATE TABLE norq_outbox (
                id INTEGER PRIMARY KEY AUTOINCREMENT, send_id TEXT NOT NULL, position INTEGER NOT NULL,
                target TEXT NOT NULL, identity TEXT NOT NULL, provider TEXT, recipient_id TEXT, state TEXT NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at INTEGER NOT NULL, lease_owner TEXT,
                lease_token TEXT, lease_expires_at INTEGER, message_id TEXT,
                may_have_been_delivered INTEGER NOT NULL DEFAULT 0, last_state TEXT, last_status INTEGER,
                last_reason TEXT, last_code TEXT, last_classification TEXT, last_invalid_since INTEGER,
                last_message_id TEXT)
            """,
            "CREATE INDEX norq_outbox_due ON norq_outbox (next_attempt_at) WHERE state = 'pending'",
            "CREATE INDEX norq_outbox_leases ON norq_outbox (lease_expires_at) WHERE state = 'leased'",
            "CREATE INDEX norq_outbox_send ON norq_outbox (send_id)",
            """
            CREATE TABLE norq_history (
                id INTEGER PRIMARY KEY, send_id TEXT NOT NULL, position INTEGER NOT NULL,
                target TEXT NOT NULL, identity TEXT NOT NULL, provider TEXT, recipient_id TEXT, state TEXT NOT NULL,
                attempts INTEGER NOT NULL, next_attempt_at INTEGER NOT NULL, lease_owner TEXT,
                lease_token TEXT, lease_expires_at INTEGER, message_id TEXT,
                may_have_been_delivered INTEGER NOT NULL, last_state TEXT, last_status INTEGER,
                last_reason TEXT, last_code TEXT, last_classification TEXT, last_invalid_since INTEGER,
                last_message_id TEXT, finished_at INTEGER NOT NULL)
            """,
            "CREATE INDEX norq_history_send ON norq_history (send_id)",
            "CREATE INDEX norq_history_finished ON norq_history (finished_at)",
            """
            CREATE TABLE norq_invalid_tokens (
                token TEXT PRIMARY KEY, provider TEXT, reason TEXT NOT NULL, invalid_since INTEGER NOT NULL,
                recorded_at INTEGER NOT NULL, registered_at INTEGER)
            """,
        ],
        // 2: a completion is one UPDATE. A row updated to a final state moves to history, and a token-invalid
        // outcome is recorded in the registry, by this trigger, inside the UPDATE's own statement (so atomically,
        // without a transaction of several statements). The completing UPDATE passes its finish time in
        // `lease_expires_at` (which a finished row does not need): it becomes the history row's `finished_at`.
        [
            """
            CREATE TRIGGER norq_outbox_finished AFTER UPDATE OF state ON norq_outbox
            WHEN NEW.state NOT IN ('pending', 'leased')
            BEGIN
                INSERT INTO norq_history (\(rowColumns), finished_at)
                VALUES (NEW.id, NEW.send_id, NEW.position, NEW.target, NEW.identity, NEW.provider, NEW.recipient_id,
                    NEW.state, NEW.attempts, NEW.next_attempt_at, NULL, NULL, NULL, NEW.message_id,
                    NEW.may_have_been_delivered, NEW.last_state, NEW.last_status, NEW.last_reason, NEW.last_code,
                    NEW.last_classification, NEW.last_invalid_since, NEW.last_message_id, NEW.lease_expires_at);
                INSERT INTO norq_invalid_tokens (token, provider, reason, invalid_since, recorded_at)
                SELECT NEW.identity, NEW.provider, coalesce(NEW.last_reason, 'invalid'),
                    coalesce(NEW.last_invalid_since, NEW.lease_expires_at), NEW.lease_expires_at
                WHERE NEW.last_classification = 'token-invalid'
                ON CONFLICT(token) DO UPDATE SET provider = excluded.provider, reason = excluded.reason,
                    invalid_since = excluded.invalid_since, recorded_at = excluded.recorded_at
                WHERE excluded.invalid_since >= norq_invalid_tokens.invalid_since;
                DELETE FROM norq_outbox WHERE id = NEW.id;
            END
            """,
        ],
    ]

    /// An outbox or history row (`finished_at` when the query selected it).
    @Sendable static func outboxRow(_ row: SQLiteRow) -> OutboxRow {
        func text(_ name: String) -> String? { row.column(name)?.string }
        func int(_ name: String) -> Int64? { row.column(name)?.integer.map(Int64.init) }
        let last = text("last_state").map {
            StoredOutcome(state: DeliveryState(rawValue: $0), status: int("last_status").map(Int.init),
                          reason: text("last_reason"), code: text("last_code"),
                          classification: text("last_classification"), invalidSince: int("last_invalid_since"),
                          messageID: text("last_message_id"), mayHaveBeenDelivered: int("may_have_been_delivered") == 1)
        }
        return OutboxRow(id: int("id") ?? 0, sendID: text("send_id") ?? "", position: Int(int("position") ?? 0),
                         target: text("target") ?? "", identity: text("identity") ?? "", provider: text("provider"),
                         recipientID: text("recipient_id"), state: DeliveryState(rawValue: text("state") ?? "pending"),
                         attempts: Int(int("attempts") ?? 0), nextAttemptAt: int("next_attempt_at") ?? 0,
                         leaseOwner: text("lease_owner"), leaseToken: text("lease_token"),
                         leaseExpiresAt: int("lease_expires_at"), messageID: text("message_id"),
                         mayHaveBeenDelivered: int("may_have_been_delivered") == 1, last: last,
                         finishedAt: int("finished_at"))
    }
}
