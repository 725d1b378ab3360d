import NorqCore
import NorqStore
import SQLiteNIO

/// The completing UPDATEs: compare-and-sets on (row id, lease token) of rows still leased.
extension SQLiteDeliveryStore {
    /// What a completion does to its row, which decides the UPDATE's `SET` list and the parameters of each row.
    enum CompletionKind: Hashable, Sendable {
        /// Sets a final state: inserts the finished row into history (`norq_history_moved` deletes it from the hot
        /// outbox).
        case move
        /// Sets a final state whose outcome goes to the token registry: updates the row (`norq_outbox_finished`
        /// moves it to history and records the token). Rare: a token-invalid answer.
        case finish
        /// Back to pending at a retry time, with its last answer.
        case retry
        /// Back to pending at once, the attempt not counted.
        case release
    }

    /// What a completion sets apart from the row's own values (its retry time and message id): completions
    /// that share it share one UPDATE.
    struct CompletionEffect: Hashable {
        var kind: CompletionKind
        var state: DeliveryState
        var last: StoredOutcome?
    }

    /// The statements completing `completions`, one per effect (a batch of like outcomes is one statement) and
    /// per 500 rows, each a compare-and-set on (row id, lease token) of rows still leased, the rows given as
    /// `VALUES` (a move's as one JSON text), the effect as parameters, the rows it applied to returned. Each kind has its own statement, which
    /// sets only what that kind changes and takes only the row values it needs (a move or finish: id, token,
    /// message id; a retry: also the retry time; a release: id and token): SQLite prepares every statement again
    /// (SQLiteNIO keeps none), so a shorter text and no `CASE` on the kind are cheaper to prepare and to run.
    /// A move inserts the finished rows into history (its trigger deletes them from the outbox); a finish of a
    /// token-invalid outcome updates the rows, and the `norq_outbox_finished` trigger (`SQLiteSchema`) moves them
    /// and records the token, taking the finish time from `lease_expires_at`. (Not one statement joining a
    /// `VALUES` of effects: with the trigger, SQLite runs that join twice as slowly as the statements apart.)
    static func completions(_ completions: [RowCompletion], now: Int64) -> [(sql: String, binds: [SQLiteData])] {
        completionStatements(completions, now: now).statements
    }

    /// `completions(_:now:)` and the distinct rows the statements complete. A row completed twice in one call
    /// applies once (the first): a move of a repeated row would insert it into history twice.
    static func completionStatements(_ completions: [RowCompletion],
                                     now: Int64) -> (statements: [(sql: String, binds: [SQLiteData])], rows: Set<Int64>) {
        var rows = Set<Int64>(minimumCapacity: completions.count)
        // The effects in their first order, and the completions (indexes) of each.
        var order: [CompletionEffect] = []
        var groups: [[Int]] = []
        var numbers: [CompletionEffect: Int] = [:]
        var previous: (index: Int, number: Int)?
        for index in completions.indices {
            guard rows.insert(completions[index].lease.rowID).inserted else { continue }
            // A batch's outcomes come in runs of like ones: compared with the last in place, without building
            // its effect.
            let number: Int
            if let previous, sameEffect(completions[previous.index], completions[index]) {
                number = previous.number
            } else {
                let effect = self.effect(of: completions[index])
                if let known = numbers[effect] {
                    number = known
                } else {
                    number = order.count
                    numbers[effect] = number
                    order.append(effect)
                    groups.append([])
                }
            }
            previous = (index, number)
            groups[number].append(index)
        }
        var statements: [(sql: String, binds: [SQLiteData])] = []
        for (effect, members) in zip(order, groups) {
            var start = 0
            while start < members.count {
                let chunk = members[start..<min(members.count, start + insertChunk)]
                start += chunk.count
                var binds: [SQLiteData] = []
                binds.reserveCapacity(10 + (effect.kind == .move ? 0 : chunk.count * 4))
                let last = effect.last
                func appendLast() {
                    binds.append(last.map { .text($0.state.rawValue) } ?? .null)
                    binds.append(last?.status.map(SQLiteData.integer) ?? .null)
                    binds.append(last?.reason.map(SQLiteData.text) ?? .null)
                    binds.append(last?.code.map(SQLiteData.text) ?? .null)
                    binds.append(last?.classification.map(SQLiteData.text) ?? .null)
                    binds.append(last?.invalidSince.map { .integer(Int($0)) } ?? .null)
                    binds.append(.integer(last?.mayHaveBeenDelivered == true ? 1 : 0))
                }
                switch effect.kind {
                case .move:
                    binds.append(.text(effect.state.rawValue))
                    appendLast()
                    binds.append(.integer(Int(now)))
                    binds.append(.text(moveRows(completions, chunk)))
                case .finish:
                    binds.append(.text(effect.state.rawValue))
                    appendLast()
                    binds.append(.integer(Int(now)))
                    binds.append(last?.environment.map(SQLiteData.text) ?? .null)
                    for index in chunk {
                        guard case .finish(let lease, let outcome) = completions[index] else { continue }
                        binds.append(.integer(Int(lease.rowID)))
                        binds.append(.text(lease.token))
                        binds.append(outcome.messageID.map(SQLiteData.text) ?? .null)
                    }
                case .retry:
                    appendLast()
                    for index in chunk {
                        guard case .retry(let lease, let at, let outcome) = completions[index] else { continue }
                        binds.append(.integer(Int(lease.rowID)))
                        binds.append(.text(lease.token))
                        binds.append(.integer(Int(at)))
                        binds.append(outcome.messageID.map(SQLiteData.text) ?? .null)
                    }
                case .release:
                    for index in chunk {
                        let lease = completions[index].lease
                        binds.append(.integer(Int(lease.rowID)))
                        binds.append(.text(lease.token))
                    }
                }
                statements.append((completionUpdate(effect.kind, rows: chunk.count), binds))
            }
        }
        return (statements, rows)
    }

    /// What `completion` sets apart from its row's own values (its retry time and message id).
    private static func effect(of completion: RowCompletion) -> CompletionEffect {
        switch completion {
        case .finish(_, let outcome):
            var last = outcome
            last.messageID = nil
            let invalid = outcome.classification == tokenInvalidClassification
            // Only a token-invalid finish records its environment (in the registry): moves of two environments
            // share a statement.
            if !invalid { last.environment = nil }
            return CompletionEffect(kind: invalid ? .finish : .move, state: outcome.state, last: last)
        case .retry(_, _, let outcome):
            var last = outcome
            last.messageID = nil
            last.environment = nil
            return CompletionEffect(kind: .retry, state: .pending, last: last)
        case .release:
            return CompletionEffect(kind: .release, state: .pending, last: nil)
        }
    }

    /// Whether `a` and `b` have the same effect (`effect(of:)`), compared field by field.
    private static func sameEffect(_ a: RowCompletion, _ b: RowCompletion) -> Bool {
        switch a {
        case .finish(_, let x):
            guard case .finish(_, let y) = b else { return false }
            return sameAnswer(x, y)
        case .retry(_, _, let x):
            guard case .retry(_, _, let y) = b else { return false }
            return sameAnswer(x, y)
        case .release:
            if case .release = b { return true }
            return false
        }
    }

    /// Two answers equal apart from their message id (the kind of a finish follows the classification), and for
    /// a token-invalid finish their environment (the registry records it).
    private static func sameAnswer(_ x: StoredOutcome, _ y: StoredOutcome) -> Bool {
        x.status == y.status && x.invalidSince == y.invalidSince && x.mayHaveBeenDelivered == y.mayHaveBeenDelivered
            && x.state == y.state && x.classification == y.classification && x.code == y.code && x.reason == y.reason
            && (x.classification != tokenInvalidClassification || x.environment == y.environment)
    }

    /// The `VALUES` rows of the largest completing UPDATE of a kind, e.g. `(?10,?11,?12),(?13,…)`, and where each
    /// row ends: a statement of n rows takes the first n. Numbered, since the rows' parameters come first in the
    /// text but are bound after the effect's.
    private struct CompletionRows: Sendable {
        var text = ""
        var ends: [String.Index] = []

        /// `arity` parameters per row, the first numbered `first`.
        init(arity: Int, first: Int) {
            for row in 0..<insertChunk {
                text += row == 0 ? "(" : ",("
                for column in 0..<arity {
                    text += "\(column == 0 ? "" : ",")?\(first + row * arity + column)"
                }
                text += ")"
                ends.append(text.endIndex)
            }
        }

        func prefix(rows: Int) -> Substring { text[..<ends[min(max(rows, 1), insertChunk) - 1]] }
    }

    /// The rows of a move as the JSON text its `json_each` reads: one object, a member per row,
    /// `{"<id>:<token>":"<message id>" or null,…}`. One text parameter instead of three per row (SQLite parses a
    /// short statement, SQLiteNIO binds one value), and flat: `json_each` gives each member's key and value as SQL
    /// values, where an array per row made SQLite write each row's array back to text and parse it again for each
    /// of its three fields. The id leads the key (`CAST(key AS INTEGER)` reads it; the first `:` ends it), the
    /// token is the rest. Ids are unique within a statement (`completions` drops repeats), so the keys are too.
    static func moveRows(_ completions: [RowCompletion], _ members: ArraySlice<Int>) -> String {
        var json: [UInt8] = [UInt8(ascii: "{")]
        json.reserveCapacity(members.count * 104)
        for index in members {
            guard case .finish(let lease, let outcome) = completions[index] else { continue }
            if json.count > 1 { json.append(UInt8(ascii: ",")) }
            json.append(UInt8(ascii: "\""))
            json.append(contentsOf: String(lease.rowID).utf8)
            json.append(UInt8(ascii: ":"))
            // The token as a JSON string without its opening quote: it continues the key.
            let quote = json.count
            JSONValue.writeString(lease.token, into: &json)
            json.remove(at: quote)
            json.append(UInt8(ascii: ":"))
            if let messageID = outcome.messageID {
                JSONValue.writeString(messageID, into: &json)
            } else {
                json.append(contentsOf: "null".utf8)
            }
        }
        json.append(UInt8(ascii: "}"))
        return String(decoding: json, as: UTF8.self)
    }

    /// The classification whose finish is recorded in the token registry (by `norq_outbox_finished`).
    static let tokenInvalidClassification = "token-invalid"

    /// A move or a finish: parameters 1-9 are the state, the last answer (state, status, reason, code, classification,
    /// invalid-since), may-have-been-delivered and now; a move's rows are parameter 10 (`moveRows`); a finish's
    /// parameter 10 is the attempt's environment (`norq_outbox_finished` records the token for it), then its (id,
    /// token, message id) per row.
    private static let finishRows = CompletionRows(arity: 3, first: 11)
    /// A retry: parameters 1-7 are the last answer and may-have-been-delivered; then (id, token, retry time,
    /// message id) per row.
    private static let retryRows = CompletionRows(arity: 4, first: 8)
    /// A release: (id, token) per row.
    private static let releaseRows = CompletionRows(arity: 2, first: 1)

    /// A move of any number of rows: they come as one JSON object (`moveRows`) that `json_each` splits. CROSS
    /// JOIN: the given rows drive, each finds its outbox row by primary key (the trigger deletes that row while the
    /// statement runs: never a scan of the outbox). Built once: it does not depend on the number of rows.
    private static let moveStatement = """
        WITH i(id, token, l_message) AS (
            SELECT CAST(key AS INTEGER), substr(key, instr(key, ':') + 1), value FROM json_each(?10))
        INSERT INTO norq_history (\(SQLiteSchema.rowColumns), finished_at)
        SELECT norq_outbox.id, send_id, position, target, identity, provider, recipient_id, ?1, attempts,
            next_attempt_at, NULL, NULL, NULL, message_id, max(may_have_been_delivered, ?8), ?2, ?3, ?4, ?5, ?6,
            ?7, i.l_message, ?9
        FROM i CROSS JOIN norq_outbox ON norq_outbox.id = i.id
        WHERE norq_outbox.lease_token = i.token AND norq_outbox.state = 'leased'
        RETURNING id
        """

    /// The completing UPDATE of `rows` rows (1 to `insertChunk`) of one kind (parameters: see `finishRows`,
    /// `retryRows`, `releaseRows`).
    static func completionUpdate(_ kind: CompletionKind, rows: Int) -> String {
        let (columns, values, set): (String, Substring, String)
        switch kind {
        case .move:
            return moveStatement
        case .finish:
            (columns, values) = ("id, token, l_message", finishRows.prefix(rows: rows))
            set = """
                state = ?1, lease_owner = NULL, lease_token = NULL, lease_expires_at = ?9,
                    may_have_been_delivered = max(norq_outbox.may_have_been_delivered, ?8),
                    last_state = ?2, last_status = ?3, last_reason = ?4, last_code = ?5, last_classification = ?6,
                    last_invalid_since = ?7, last_message_id = i.l_message, environment = ?10
                """
        case .retry:
            (columns, values) = ("id, token, at, l_message", retryRows.prefix(rows: rows))
            set = """
                state = 'pending', next_attempt_at = i.at, lease_owner = NULL, lease_token = NULL,
                    lease_expires_at = NULL, may_have_been_delivered = max(norq_outbox.may_have_been_delivered, ?7),
                    last_state = ?1, last_status = ?2, last_reason = ?3, last_code = ?4, last_classification = ?5,
                    last_invalid_since = ?6, last_message_id = i.l_message
                """
        case .release:
            (columns, values) = ("id, token", releaseRows.prefix(rows: rows))
            set = """
                state = 'pending', attempts = max(0, norq_outbox.attempts - 1), lease_owner = NULL,
                    lease_token = NULL, lease_expires_at = NULL
                """
        }
        return """
            WITH i(\(columns)) AS (VALUES \(values))
            UPDATE norq_outbox SET \(set)
            FROM i
            WHERE norq_outbox.id = i.id AND norq_outbox.lease_token = i.token AND norq_outbox.state = 'leased'
            RETURNING norq_outbox.id
            """
    }
}
