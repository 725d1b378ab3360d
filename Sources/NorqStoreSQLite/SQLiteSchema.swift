import NorqCore
import NorqStore
import SQLiteNIO

/// The SQLite schema, versioned: `migrations[n - 1]` takes the database from version n - 1 to n. Never edit a
/// released migration; append a new one.
enum SQLiteSchema {
    static let rowColumns = """
        id, send_id, position, target, identity, provider, recipient_id, state, attempts, next_attempt_at, \
        lease_owner, lease_token, lease_expires_at, message_id, may_have_been_delivered, last_state, last_status, \
        last_reason, last_code, last_classification, last_invalid_since, last_message_id
        """

    /// What a claim returns of each row: what the claim does not know itself (it set the state, lease owner and
    /// expiry, and the token is `<base>-<id>`), and the last answer as one JSON array, NULL for a row never tried
    /// (most): SQLite and SQLiteNIO copy 12 columns per row instead of 22 (SQLiteNIO asks SQLite for each
    /// column's type and value under SQLite's connection mutex). Decoded by `claimedRow`.
    static let claimColumns = """
        id, send_id, position, target, identity, provider, recipient_id, attempts, next_attempt_at, message_id, \
        may_have_been_delivered, CASE WHEN last_state IS NULL THEN NULL ELSE json_array(last_state, last_status, \
        last_reason, last_code, last_classification, last_invalid_since, last_message_id) END
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
        // 2: a completion is one UPDATE, and the send indexes include the target position.
        // A completion is one UPDATE. A row updated to a final state moves to history, and a token-invalid
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
            // A send's rows by target position: a page of a large send reads only its rows.
            "DROP INDEX norq_outbox_send",
            "CREATE INDEX norq_outbox_send ON norq_outbox (send_id, position)",
            "DROP INDEX norq_history_send",
            "CREATE INDEX norq_history_send ON norq_history (send_id, position)",
        ],
        // 3: a finish moves its row by inserting it into history (`norq_history_moved` deletes it from the hot
        // outbox), instead of updating the row and letting a trigger on the outbox insert it and delete it: the
        // outbox row is no longer written once before it is deleted. A finish that records a token-invalid outcome
        // in the registry still updates the row (rare), and `norq_outbox_finished` moves it and records the
        // token; that trigger now fires on `UPDATE OF last_state`, not `OF state`: every statement that updates
        // a column a trigger names compiles that trigger's program when SQLite prepares it (SQLiteNIO prepares
        // every statement again) and checks its WHEN for every row, and a claim sets `state` (to leased) but never
        // `last_state`. A retry sets `last_state` to a non-final state (the WHEN is false), a release does not
        // set it. The rows an enqueue finishes at once (`moveFinished`) are deleted by `norq_history_moved` too.
        [
            "DROP TRIGGER norq_outbox_finished",
            """
            CREATE TRIGGER norq_outbox_finished AFTER UPDATE OF last_state ON norq_outbox
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
            """
            CREATE TRIGGER norq_history_moved AFTER INSERT ON norq_history
            BEGIN
                DELETE FROM norq_outbox WHERE id = NEW.id;
            END
            """,
        ],
        // 4: the token registry is keyed by (token, provider instance, environment) (issue 29): APNs answers
        // `BadDeviceToken` also for a token sent to the other environment, so an answer invalidates the token only
        // for the provider and environment it came from. '' is "none or unknown" and matches every provider or
        // environment (`DeliveryStoreRules.registryEntryMatches`): entries of version 3 keep their provider and get
        // environment '', so they keep skipping the token everywhere until it is registered again, as before. A
        // token-invalid finish (an UPDATE of the row, rare) sets the outbox's new `environment` column to the
        // attempt's environment for `norq_outbox_finished` to record; no other statement writes or reads it (the
        // enqueue matches the registry with the environment it is given, and history does not keep it).
        [
            "ALTER TABLE norq_outbox ADD COLUMN environment TEXT",
            """
            CREATE TABLE norq_invalid_tokens_4 (
                token TEXT NOT NULL, provider TEXT NOT NULL DEFAULT '', environment TEXT NOT NULL DEFAULT '',
                reason TEXT NOT NULL, invalid_since INTEGER NOT NULL, recorded_at INTEGER NOT NULL,
                registered_at INTEGER, PRIMARY KEY (token, provider, environment))
            """,
            """
            INSERT INTO norq_invalid_tokens_4 (token, provider, environment, reason, invalid_since, recorded_at,
                registered_at)
            SELECT token, coalesce(provider, ''), '', reason, invalid_since, recorded_at, registered_at
            FROM norq_invalid_tokens
            """,
            "DROP TRIGGER norq_outbox_finished",
            "DROP TABLE norq_invalid_tokens",
            "ALTER TABLE norq_invalid_tokens_4 RENAME TO norq_invalid_tokens",
            """
            CREATE TRIGGER norq_outbox_finished AFTER UPDATE OF last_state ON norq_outbox
            WHEN NEW.state NOT IN ('pending', 'leased')
            BEGIN
                INSERT INTO norq_history (\(rowColumns), finished_at)
                VALUES (NEW.id, NEW.send_id, NEW.position, NEW.target, NEW.identity, NEW.provider, NEW.recipient_id,
                    NEW.state, NEW.attempts, NEW.next_attempt_at, NULL, NULL, NULL, NEW.message_id,
                    NEW.may_have_been_delivered, NEW.last_state, NEW.last_status, NEW.last_reason, NEW.last_code,
                    NEW.last_classification, NEW.last_invalid_since, NEW.last_message_id, NEW.lease_expires_at);
                INSERT INTO norq_invalid_tokens (token, provider, environment, reason, invalid_since, recorded_at)
                SELECT NEW.identity, coalesce(NEW.provider, ''), coalesce(NEW.environment, ''),
                    coalesce(NEW.last_reason, 'invalid'), coalesce(NEW.last_invalid_since, NEW.lease_expires_at),
                    NEW.lease_expires_at
                WHERE NEW.last_classification = 'token-invalid'
                ON CONFLICT(token, provider, environment) DO UPDATE SET reason = excluded.reason,
                    invalid_since = excluded.invalid_since, recorded_at = excluded.recorded_at
                WHERE excluded.invalid_since >= norq_invalid_tokens.invalid_since;
                DELETE FROM norq_outbox WHERE id = NEW.id;
            END
            """,
        ],
        // 5: segments instead of a row per push (issue 29). A send's targets are stored in segments (the claim
        // unit): `norq_segments` holds a hot segment's small mutable state (lease, attempts, counts by outcome, the
        // progress blob), `norq_segment_targets` its immutable targets (one blob, read at a claim and by a
        // completion that keeps a non-delivered target), `norq_segment_history` a finished segment's summary and
        // only its non-delivered targets. Segment ids come from `norq_segment_ids` (a history row keeps its
        // segment's id; target ids are derived from it, `SegmentLedger.targetID`). The rows of version 4 are
        // converted by `convertLegacyRows` after these statements, and then `dropLegacy` runs.
        [
            "CREATE TABLE norq_segment_ids (id INTEGER PRIMARY KEY CHECK (id = 1), next INTEGER NOT NULL)",
            "INSERT INTO norq_segment_ids (id, next) VALUES (1, 0)",
            """
            CREATE TABLE norq_segments (
                id INTEGER PRIMARY KEY, send_id TEXT NOT NULL, count INTEGER NOT NULL, open INTEGER NOT NULL,
                state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at INTEGER NOT NULL,
                lease_owner TEXT, lease_token TEXT, lease_expires_at INTEGER,
                may_have_been_delivered INTEGER NOT NULL DEFAULT 0, delivered INTEGER NOT NULL DEFAULT 0,
                rejected INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0,
                skipped INTEGER NOT NULL DEFAULT 0, progress BLOB NOT NULL, positions BLOB NOT NULL,
                first_position INTEGER NOT NULL, last_position INTEGER NOT NULL, created_at INTEGER NOT NULL)
            """,
            "CREATE INDEX norq_segments_due ON norq_segments (next_attempt_at) WHERE state = 'pending'",
            "CREATE INDEX norq_segments_leases ON norq_segments (lease_expires_at) WHERE state = 'leased'",
            "CREATE INDEX norq_segments_send ON norq_segments (send_id, first_position)",
            "CREATE TABLE norq_segment_targets (segment_id INTEGER PRIMARY KEY, targets BLOB NOT NULL)",
            """
            CREATE TABLE norq_segment_history (
                id INTEGER PRIMARY KEY, send_id TEXT NOT NULL, count INTEGER NOT NULL, attempts INTEGER NOT NULL,
                delivered INTEGER NOT NULL,
                rejected INTEGER NOT NULL, failed INTEGER NOT NULL, skipped INTEGER NOT NULL, progress BLOB NOT NULL,
                positions BLOB NOT NULL, first_position INTEGER NOT NULL, last_position INTEGER NOT NULL,
                finished_at INTEGER NOT NULL)
            """,
            "CREATE INDEX norq_segment_history_send ON norq_segment_history (send_id, first_position)",
            "CREATE INDEX norq_segment_history_finished ON norq_segment_history (finished_at)",
        ],
        // 6: receipt segments (issue 31): a segment whose targets the service accepted and whose receipts the
        // worker fetches (`NewSegment.awaitsReceipts`); `stateCounts` counts their open targets as `accepted`.
        [
            "ALTER TABLE norq_segments ADD COLUMN receipts INTEGER NOT NULL DEFAULT 0",
        ],
    ]

    /// The version whose migration converts a row per push into segments.
    static let segmentsVersion = 5

    /// Run after `SQLiteDeliveryStore.convertLegacyRows` in the migration to version 5.
    static let dropLegacy = [
        "DROP TRIGGER IF EXISTS norq_outbox_finished",
        "DROP TRIGGER IF EXISTS norq_history_moved",
        "DROP TABLE IF EXISTS norq_outbox",
        "DROP TABLE IF EXISTS norq_history",
    ]

    /// The SQL condition that a registry entry `t` skips a pending target whose token, provider and environment
    /// are `token`, `provider` and `environment` (SQL expressions; NULL provider or environment as ''): the same
    /// token, the entry's provider and environment equal or '' (it matches every one:
    /// `DeliveryStoreRules.registryEntryMatches`), and not registered again since it was reported.
    static func registryMatch(_ t: String, token: String, provider: String, environment: String) -> String {
        """
        \(t).token = \(token) AND \(t).provider IN ('', coalesce(\(provider), ''))
            AND \(t).environment IN ('', coalesce(\(environment), ''))
            AND (\(t).registered_at IS NULL OR \(t).registered_at <= \(t).invalid_since)
        """
    }

    /// An outbox or history row, from a query that selected `rowColumns` in their order (then, for history,
    /// `finished_at`). Read by position: a lookup by name hashes each of the 22 names again for every row.
    @Sendable static func outboxRow(_ row: SQLiteRow) -> OutboxRow {
        let data = row.columns.map(\.data)
        func text(_ index: Int) -> String? { index < data.count ? data[index].string : nil }
        func int(_ index: Int) -> Int64? { index < data.count ? data[index].integer.map(Int64.init) : nil }
        // The positions in `rowColumns`.
        let last = text(15).map {
            StoredOutcome(state: DeliveryState(rawValue: $0), status: int(16).map(Int.init), reason: text(17),
                          code: text(18), classification: text(19), invalidSince: int(20), messageID: text(21),
                          mayHaveBeenDelivered: int(14) == 1)
        }
        return OutboxRow(id: int(0) ?? 0, sendID: text(1) ?? "", position: Int(int(2) ?? 0), target: text(3) ?? "",
                         identity: text(4) ?? "", provider: text(5), recipientID: text(6),
                         state: DeliveryState(rawValue: text(7) ?? "pending"), attempts: Int(int(8) ?? 0),
                         nextAttemptAt: int(9) ?? 0, leaseOwner: text(10), leaseToken: text(11),
                         leaseExpiresAt: int(12), messageID: text(13), mayHaveBeenDelivered: int(14) == 1, last: last,
                         finishedAt: int(22))
    }

    /// A row a claim leased (`claimColumns`, in their order) under `owner` until `leaseUntil`, with the token
    /// `<base>-<id>` the claim set.
    static func claimedRow(_ row: SQLiteRow, owner: String, base: String, leaseUntil: Int64) -> OutboxRow {
        let columns = row.columns
        func text(_ index: Int) -> String? { index < columns.count ? columns[index].data.string : nil }
        func int(_ index: Int) -> Int64? { index < columns.count ? columns[index].data.integer.map(Int64.init) : nil }
        let id = int(0) ?? 0
        // The positions in `claimColumns`; the last answer's array in the order of `json_array` there.
        var last: StoredOutcome?
        if let json = text(11), case .array(let values)? = try? JSONValue(parsing: json), values.count == 7,
           case .string(let state) = values[0] {
            func string(_ value: JSONValue) -> String? { if case .string(let text) = value { text } else { nil } }
            func integer(_ value: JSONValue) -> Int64? { if case .int(let int) = value { int } else { nil } }
            last = StoredOutcome(state: DeliveryState(rawValue: state), status: integer(values[1]).map(Int.init),
                                 reason: string(values[2]), code: string(values[3]),
                                 classification: string(values[4]), invalidSince: integer(values[5]),
                                 messageID: string(values[6]), mayHaveBeenDelivered: int(10) == 1)
        }
        return OutboxRow(id: id, sendID: text(1) ?? "", position: Int(int(2) ?? 0), target: text(3) ?? "",
                         identity: text(4) ?? "", provider: text(5), recipientID: text(6), state: .leased,
                         attempts: Int(int(7) ?? 0), nextAttemptAt: int(8) ?? 0, leaseOwner: owner,
                         leaseToken: "\(base)-\(id)", leaseExpiresAt: leaseUntil, messageID: text(9),
                         mayHaveBeenDelivered: int(10) == 1, last: last)
    }
}
