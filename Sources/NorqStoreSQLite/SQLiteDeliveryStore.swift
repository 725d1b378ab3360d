public import NorqCore
public import NorqStore
public import Logging
import NIOCore
import NIOPosix
import SQLiteNIO

/// The embedded durable store: one SQLite file in WAL mode (`sqlite-nio`, which vendors SQLite).
///
/// One connection per store, used by one transaction at a time (an in-process lock); writers start with
/// `BEGIN IMMEDIATE`, so two processes on one file serialize on SQLite's lock and wait at most `busy_timeout`
/// (the call timeout) for it. Claims are one `UPDATE … RETURNING`. Completions are compare-and-sets on (row id,
/// lease token), one statement per kind of outcome and batch (up to 500 rows) of the rows still leased under
/// their token: a finished row is inserted into `norq_history` (`INSERT … SELECT`) and deleted from the hot
/// `norq_outbox` by a trigger, within that statement (a token-invalid finish updates the row, and a trigger moves it
/// and records the token); a retry or release is an `UPDATE … FROM (VALUES …)`. A single statement runs without `BEGIN` and
/// `COMMIT`: SQLite's autocommit takes the write lock up front and waits for it like `BEGIN IMMEDIATE` does, and
/// the statement is atomic.
///
/// Deadlines: every call has `settings.callTimeout`. Waiting for this process's lock is cancelled at the
/// deadline; a statement waiting for another process's lock gives up at `busy_timeout` (the same value), so a
/// call returns within about twice the timeout in the worst case.
public final class SQLiteDeliveryStore: DeliveryStore {
    /// The database file.
    public let path: String
    public let settings: DeliveryStoreSettings
    public var segmentSize: Int { settings.effectiveSegmentSize }
    private let connection: SQLiteConnection
    private let lock = AsyncExclusiveLock()
    /// The connection's event loop as the executor of its calls.
    private let executor: EventLoopTaskExecutor
    private let enqueueGroup = GroupCommit<EnqueueRequest, EnqueueResult>(maxRequests: groupSends, maxWeight: groupRows)
    private let logger: Logger

    /// Opens (creating when missing) the database at `path`. Does not migrate: call `migrate()`.
    /// Throws `store/unreachable` when the file cannot be opened, `store/corrupt` when it is not a database.
    public static func open(path: String, settings: DeliveryStoreSettings = DeliveryStoreSettings(),
                            logger: Logger = Logger(label: "norq.store.sqlite")) async throws(NorqError) -> SQLiteDeliveryStore {
        let connection: SQLiteConnection
        do {
            connection = try await SQLiteConnection.open(storage: .file(path: path), logger: logger)
        } catch {
            throw NorqError(.storeUnreachable, "cannot open the SQLite database \(path): \(Self.describe(error))")
        }
        let store = SQLiteDeliveryStore(path: path, settings: settings, connection: connection, logger: logger)
        do throws(NorqError) {
            try await store.configure()
        } catch {
            try? await connection.close()
            throw error
        }
        return store
    }

    /// A store dropped without `close()` still closes its connection (on SQLite's thread pool).
    deinit {
        if !connection.isClosed { _ = connection.close() }
    }

    private init(path: String, settings: DeliveryStoreSettings, connection: SQLiteConnection, logger: Logger) {
        self.path = path
        self.settings = settings
        self.connection = connection
        self.executor = EventLoopTaskExecutor(connection.eventLoop)
        self.logger = logger
    }

    /// WAL, busy timeout, the page size of a new file, and a first read that tells a corrupt file apart.
    private func configure() async throws(NorqError) {
        let busy = max(1, settings.callTimeout.wholeMilliseconds)
        try await call("opening the database") { connection in
            try await connection.run("PRAGMA busy_timeout = \(busy)")
            try await connection.run("PRAGMA page_size = \(Self.pageSize)")
            try await connection.run("PRAGMA journal_mode = WAL")
            try await connection.run("PRAGMA synchronous = NORMAL")
            try await connection.run("SELECT count(*) FROM sqlite_master")
        }
    }

    /// The page size of a database file this store creates (SQLite's default is 4096). An outbox row is ~300 bytes
    /// and grows when claimed, so 4 KiB pages split and merge often as rows are claimed and moved; 8 KiB pages
    /// cost less CPU per row (`Benchmarks/README.md`, "SQLite store CPU, stop 25"). SQLite fixes the page size
    /// when it creates the file: an existing database keeps its own (the PRAGMA is then ignored; `VACUUM` would
    /// convert it).
    static let pageSize = 8192

    // MARK: - Calls

    static func describe(_ error: any Error) -> String {
        if let error = error as? SQLiteError { return error.message }
        return "\(error)"
    }

    private func mapError(_ error: any Error) -> NorqError {
        if let error = error as? NorqError { return error }
        guard let sqlite = error as? SQLiteError else {
            return NorqError(.storeFailed, "SQLite database \(path): \(error)")
        }
        switch sqlite.reason {
        case .corrupt, .notADatabase, .corruptIndex, .corruptSequenceSchema, .corruptVirtualTable:
            return NorqError(.storeCorrupt, "the SQLite file \(path) is not a database or is damaged: \(sqlite.message)",
                             hint: "restore it from a backup or move it away to start empty")
        case .busy, .locked, .busyTimeout, .busyInRecovery, .busyInSnapshot:
            return NorqError(.storeDeadlineExceeded,
                             "the SQLite database \(path) stayed locked by another process for \(settings.callTimeout)")
        case .cantOpen, .cantOpenDirectory, .cantOpenInvalidPath, .permission, .readOnly:
            return NorqError(.storeUnreachable, "cannot use the SQLite database \(path): \(sqlite.message)")
        default:
            return NorqError(.storeFailed, "SQLite database \(path): \(sqlite.message)")
        }
    }

    /// One database call: the in-process lock, the deadline and the error mapping.
    func call<T: Sendable>(_ what: String,
                                   _ body: @escaping @Sendable (SQLiteConnection) async throws -> T) async throws(NorqError) -> T {
        let connection = self.connection
        let lock = self.lock
        let path = self.path
        return try await Self.withDeadline(settings.callTimeout, "\(what) (SQLite \(path))", on: connection.eventLoop,
                                           executor: executor, mapError: { [self] in mapError($0) }) {
            try await lock.withLock { try await body(connection) }
        }
    }

    /// One write transaction (`BEGIN IMMEDIATE` … `COMMIT`, rolled back on error).
    private func transaction<T: Sendable>(_ what: String,
                                          _ body: @escaping @Sendable (SQLiteConnection) async throws -> T) async throws(NorqError) -> T {
        try await call(what) { connection in
            try await connection.run("BEGIN IMMEDIATE")
            do {
                let value = try await body(connection)
                try await connection.run("COMMIT")
                return value
            } catch {
                _ = try? await connection.run("ROLLBACK")
                throw error
            }
        }
    }

    // MARK: - Schema

    public func migrate() async throws(NorqError) {
        let path = self.path
        try await transaction("migrating the schema") { connection in
            try await connection.run(
                "CREATE TABLE IF NOT EXISTS norq_schema (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)")
            let rows = try await connection.rows("SELECT version FROM norq_schema WHERE id = 1")
            let current = rows.first?.column("version")?.integer ?? 0
            let known = SQLiteSchema.migrations.count
            if current > known {
                throw NorqError(.storeSchemaTooNew,
                                "the SQLite database \(path) has schema version \(current); this norq knows up to \(known)",
                                hint: "upgrade norq, or use another database file")
            }
            for version in (current + 1)..<(known + 1) {
                for statement in SQLiteSchema.migrations[version - 1] {
                    try await connection.run(statement)
                }
                if version == SQLiteSchema.segmentsVersion && current > 0 {
                    try await Self.convertLegacyRows(on: connection)
                }
                if version == SQLiteSchema.segmentsVersion {
                    for statement in SQLiteSchema.dropLegacy { try await connection.run(statement) }
                }
            }
            try await connection.run(
                "INSERT INTO norq_schema (id, version) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET version = excluded.version",
                [.integer(known)])
        }
    }

    /// The schema version in the file (0 when none).
    public func schemaVersion() async throws(NorqError) -> Int {
        try await call("reading the schema version") { connection in
            let exists = try await connection.rows(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'norq_schema'")
            guard !exists.isEmpty else { return 0 }
            return try await connection.rows("SELECT version FROM norq_schema WHERE id = 1").first?
                .column("version")?.integer ?? 0
        }
    }

    // MARK: - Enqueue

    /// Rows per multi-row INSERT (at most 15 values each, far below SQLite's 32,766 bound parameters).
    static let insertChunk = 500
    /// Sends and outbox rows one group-committed enqueue transaction takes at most (a single larger send still
    /// goes alone).
    static let groupSends = 256
    static let groupRows = 10_000

    /// One caller's enqueue, as the group commit carries it.
    struct EnqueueRequest: Sendable {
        var send: NewSend
        var now: Int64
        var idempotencyWindow: Duration
    }

    /// Concurrent enqueues share a transaction (group commit): while one batch commits, the next gathers.
    public func enqueue(_ send: NewSend, now: Int64, idempotencyWindow: Duration) async throws(NorqError) -> EnqueueResult {
        try await enqueueGroup.submit(EnqueueRequest(send: send, now: now, idempotencyWindow: idempotencyWindow),
                                      weight: max(1, send.targets.count)) { [self] batch in
            await enqueueBatch(batch)
        }
    }

    /// Commits a batch of sends in one transaction. When that fails for a reason other than the database being
    /// unreachable or locked, each send is tried alone, so one bad send does not fail the others.
    private func enqueueBatch(_ batch: [EnqueueRequest]) async -> [Result<EnqueueResult, NorqError>] {
        do {
            return try await transaction("enqueueing \(batch.count == 1 ? "a send" : "\(batch.count) sends")") { connection in
                try await Self.enqueue(batch, segmentSize: self.settings.effectiveSegmentSize, on: connection)
            }
        } catch {
            let alone = batch.count > 1 && ![.storeUnreachable, .storeDeadlineExceeded, .storeCorrupt].contains(error.code)
            guard alone else { return Array(repeating: .failure(error), count: batch.count) }
            var results: [Result<EnqueueResult, NorqError>] = []
            for request in batch { results += await enqueueBatch([request]) }
            return results
        }
    }

    /// The statements of one enqueue transaction: idempotency lookups, then one multi-row INSERT of the sends,
    /// of their outbox rows, one registry UPDATE and one move of the rows already final. A send refused
    /// (`idempotency/key-reused`) gets its error and writes nothing.
    private static func enqueue(_ batch: [EnqueueRequest], segmentSize: Int,
                                on connection: SQLiteConnection) async throws -> [Result<EnqueueResult, NorqError>] {
        var results = [Result<EnqueueResult, NorqError>?](repeating: nil, count: batch.count)
        // Idempotency: the holders of every key in the batch, read at once; keys taken earlier in this batch
        // count as holders too (their send is written below, in the same transaction).
        var holders: [String: (id: String, fingerprint: String, createdAt: Int64)] = [:]
        let keyed = batch.compactMap { request in request.send.idempotencyKey.map { (request.send.scope, $0) } }
        var seen = Set<String>()
        let lookups = keyed.filter { seen.insert(holderKey($0.0, $0.1)).inserted }
        var start = 0
        while start < lookups.count {
            let chunk = lookups[start..<min(lookups.count, start + insertChunk)]
            start += chunk.count
            let rows = try await connection.rows(holderLookup(count: chunk.count),
                                                  chunk.flatMap { [SQLiteData.text($0.0), .text($0.1)] })
            for row in rows {
                guard let id = row.column("id")?.string, let key = row.column("idempotency_key")?.string else { continue }
                holders[holderKey(row.column("scope")?.string ?? "", key)] =
                    (id, row.column("fingerprint")?.string ?? "", Int64(row.column("created_at")?.integer ?? 0))
            }
        }
        var created: [NewSend] = []
        var createdAt: [Int64] = []
        for (index, request) in batch.enumerated() {
            let send = request.send
            if let key = send.idempotencyKey {
                let holder = holders[holderKey(send.scope, key)]
                switch DeliveryStoreRules.idempotency(
                    existingSendID: holder?.id, existingFingerprint: holder?.fingerprint,
                    existingCreatedAt: holder?.createdAt, fingerprint: send.fingerprint, now: request.now,
                    window: request.idempotencyWindow) {
                case .existing(let id):
                    results[index] = .success(.existing(sendID: id))
                    continue
                case .reused(let id):
                    results[index] = .failure(DeliveryStoreRules.keyReusedError(key: key, sendID: id))
                    continue
                case .expired(let id):
                    try await connection.run("UPDATE norq_sends SET idempotency_key = NULL WHERE id = ?", [.text(id)])
                case .create: break
                }
                holders[holderKey(send.scope, key)] = (send.id, send.fingerprint, request.now)
            }
            created.append(send)
            createdAt.append(request.now)
            results[index] = .success(.created(sendID: send.id))
        }
        if !created.isEmpty {
            try await insert(created, createdAt: createdAt, segmentSize: segmentSize, on: connection)
        }
        return results.map { $0 ?? .failure(NorqError(.storeFailed, "an enqueue of the batch got no result")) }
    }

    private static func holderKey(_ scope: String, _ key: String) -> String { "\(scope)\u{0}\(key)" }

    /// The sends holding `count` (scope, key) pairs. A join, not `(scope, idempotency_key) IN (VALUES …)`: SQLite
    /// answers that one by scanning every send, this one with one search of the key index per pair.
    static func holderLookup(count: Int) -> String {
        let values = Array(repeating: "(?,?)", count: count).joined(separator: ",")
        return """
            WITH k(scope, key) AS (VALUES \(values))
            SELECT s.id, s.scope, s.idempotency_key, s.fingerprint, s.created_at
            FROM k JOIN norq_sends AS s ON s.scope = k.scope AND s.idempotency_key = k.key
            """
    }

    /// Inserts new sends and their segments; targets whose token the registry holds as invalid for their provider
    /// and environment are finished at once as skipped (`token/invalid`).
    private static func insert(_ sends: [NewSend], createdAt: [Int64], segmentSize: Int,
                               on connection: SQLiteConnection) async throws {
        var start = 0
        while start < sends.count {
            let chunk = start..<min(sends.count, start + insertChunk)
            start = chunk.upperBound
            let values = Array(repeating: "(?,?,?,?,?,?,?)", count: chunk.count).joined(separator: ",")
            var binds: [SQLiteData] = []
            binds.reserveCapacity(chunk.count * 7)
            for index in chunk {
                let send = sends[index]
                binds += [.text(send.id), .text(send.scope), send.idempotencyKey.map(SQLiteData.text) ?? .null,
                          .text(send.fingerprint), .text(send.content), .integer(Int(createdAt[index])),
                          .integer(send.targets.count)]
            }
            try await connection.run(
                "INSERT INTO norq_sends (id, scope, idempotency_key, fingerprint, content, created_at, target_count) VALUES \(values)",
                binds)
        }
        // Every send's segments with one id reservation and a few multi-row statements for the whole batch; the
        // registry is read a group of segments at a time, and not at all while it is empty.
        let registryMayMatch = try await !connection.rows("SELECT 1 FROM norq_invalid_tokens LIMIT 1").isEmpty
        let segments = try await SegmentLedger.segments(of: Array(zip(sends, createdAt)), size: segmentSize,
                                                        registryMayMatch: registryMayMatch) { tokens in
            try await registryEntries(tokens, on: connection)
        }
        try await insert(segments, now: createdAt.max() ?? 0, on: connection)
    }

    // MARK: - Workers

    public func claim(owner: String, limit: Int, now: Int64, leaseUntil: Int64) async throws(NorqError) -> [OutboxRow] {
        guard limit > 0 else { return [] }
        let base = RequestID.random()
        // The claiming UPDATE is one statement, atomic by itself; the targets are immutable (read after it).
        let (records, blobs) = try await call("claiming rows") { connection in
            let rows = try await connection.rows(Self.claimSegments(limit: limit),
                                                 [.text(owner), .text(base), .integer(Int(leaseUntil)), .integer(Int(now))])
            var records: [SegmentRecord] = []
            for row in rows { records.append(try Self.record(row)) }
            let blobs = records.isEmpty ? [:] : try await Self.targets(of: records.map(\.id), on: connection)
            return (records, blobs)
        }
        var claimed: [OutboxRow] = []
        for record in records.sorted(by: { $0.id < $1.id }) {
            let targets = try SegmentCodec.decodeTargets(blobs[record.id] ?? [])
            claimed += SegmentLedger.claimedRows(record, targets: targets)
        }
        return claimed
    }

    public func renew(_ leases: [Lease], until: Int64) async throws(NorqError) -> Set<Int64> {
        guard !leases.isEmpty else { return [] }
        let groups = SegmentLedger.bySegment(leases)
        let renew: @Sendable (SQLiteConnection) async throws -> Set<Int64> = { connection in
            var renewed: Set<Int64> = []
            for chunk in Self.chunks(groups, Self.insertChunk) {
                let values = Array(repeating: "(?,?)", count: chunk.count).joined(separator: ",")
                var binds: [SQLiteData] = []
                for group in chunk { binds += [.integer(Int(group.segment)), .text(group.token)] }
                binds.append(.integer(Int(until)))
                let rows = try await connection.rows("""
                    WITH i(id, token) AS (VALUES \(values))
                    UPDATE norq_segments SET lease_expires_at = ? FROM i
                    WHERE norq_segments.id = i.id AND norq_segments.lease_token = i.token
                        AND norq_segments.state = 'leased'
                    RETURNING norq_segments.id
                    """, binds)
                let ids = Set(rows.compactMap { $0.column("id")?.integer.map(Int64.init) })
                for group in chunk where ids.contains(group.segment) { renewed.formUnion(group.rows) }
            }
            return renewed
        }
        // One statement is atomic by itself (see `complete`).
        return groups.count <= Self.insertChunk
            ? try await call("renewing leases", renew) : try await transaction("renewing leases", renew)
    }

    public func complete(_ completions: [RowCompletion], now: Int64) async throws(NorqError) -> CompletionReport {
        guard !completions.isEmpty else { return CompletionReport() }
        return try await transaction("completing rows") { connection in
            try await Self.complete(completions, now: now, on: connection)
        }
    }

    // MARK: - Reading

    public func send(id: String) async throws(NorqError) -> StoredSend? {
        try await sends(ids: [id])[id]
    }

    public func sends(ids: [String]) async throws(NorqError) -> [String: StoredSend] {
        let unique = Array(Set(ids))
        guard !unique.isEmpty else { return [:] }
        return try await call(unique.count == 1 ? "reading a send" : "reading \(unique.count) sends") { connection in
            var found: [String: StoredSend] = [:]
            var start = 0
            while start < unique.count {
                let chunk = unique[start..<min(unique.count, start + Self.insertChunk)]
                start += chunk.count
                let list = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                for row in try await connection.rows(
                    "SELECT id, scope, idempotency_key, fingerprint, content, created_at, target_count FROM norq_sends WHERE id IN (\(list))",
                    chunk.map(SQLiteData.text)) {
                    guard let id = row.column("id")?.string else { continue }
                    found[id] = StoredSend(id: id, scope: row.column("scope")?.string ?? "",
                                           idempotencyKey: row.column("idempotency_key")?.string,
                                           fingerprint: row.column("fingerprint")?.string ?? "",
                                           content: row.column("content")?.string ?? "",
                                           createdAt: Int64(row.column("created_at")?.integer ?? 0),
                                           targetCount: row.column("target_count")?.integer ?? 0)
                }
            }
            return found
        }
    }

    public func deliveries(ofSend id: String) async throws(NorqError) -> [OutboxRow] {
        try await deliveries(ofSend: id, positions: 0..<Int.max)
    }

    public func deliveries(ofSend id: String, positions: Range<Int>) async throws(NorqError) -> [OutboxRow] {
        guard !positions.isEmpty else { return [] }
        return try await call("reading a send's rows") { connection in
            try await Self.rows(ofSend: id, positions: positions, on: connection)
        }
    }

    public func stateCounts(ofSend id: String) async throws(NorqError) -> [DeliveryState: Int] {
        try await call("counting a send's rows") { connection in
            try await Self.stateCounts(sendID: id, on: connection)
        }
    }

    public func invalidTokens(limit: Int) async throws(NorqError) -> [InvalidTokenRecord] {
        try await call("reading the token registry") { connection in
            try await connection.rows(
                "SELECT token, provider, environment, reason, invalid_since, recorded_at, registered_at FROM norq_invalid_tokens ORDER BY recorded_at DESC, token DESC, provider DESC, environment DESC LIMIT ?",
                [.integer(limit)]).map { row in
                    InvalidTokenRecord(token: row.column("token")?.string ?? "",
                                       provider: row.column("provider")?.string.flatMap { $0.isEmpty ? nil : $0 },
                                       environment: row.column("environment")?.string.flatMap { $0.isEmpty ? nil : $0 },
                                       reason: row.column("reason")?.string ?? "",
                                       invalidSince: Int64(row.column("invalid_since")?.integer ?? 0),
                                       recordedAt: Int64(row.column("recorded_at")?.integer ?? 0),
                                       registeredAt: row.column("registered_at")?.integer.map(Int64.init))
                }
        }
    }

    public func registerToken(_ token: String, provider: String?, environment: String?, at: Int64) async throws(NorqError) {
        // An entry without a provider or environment ('') applies everywhere: any filter re-registers it
        // (`DeliveryStoreRules.registrationApplies`).
        try await transaction("recording a token registration") { connection in
            try await connection.run("""
                UPDATE norq_invalid_tokens SET registered_at = max(coalesce(registered_at, ?1), ?1)
                WHERE token = ?2 AND (?3 IS NULL OR provider IN ('', ?3)) AND (?4 IS NULL OR environment IN ('', ?4))
                """, [.integer(Int(at)), .text(token), provider.map(SQLiteData.text) ?? .null,
                      environment.map(SQLiteData.text) ?? .null])
        }
    }

    public func prune(finishedBefore before: Int64, limit: Int) async throws(NorqError) -> Int {
        try await transaction("pruning history") { connection in
            let deleted = try await connection.rows("""
                DELETE FROM norq_segment_history WHERE id IN (
                    SELECT id FROM norq_segment_history WHERE finished_at < ? ORDER BY finished_at LIMIT ?)
                RETURNING id
                """, [.integer(Int(before)), .integer(limit)])
            let ids = deleted.compactMap { $0.column("id")?.integer }
            for chunk in Self.chunks(ids, 500) {
                try await connection.run(
                    "DELETE FROM norq_segment_targets WHERE segment_id IN (\(Array(repeating: "?", count: chunk.count).joined(separator: ",")))",
                    chunk.map { SQLiteData.integer($0) })
            }
            try await connection.run("""
                DELETE FROM norq_sends WHERE id IN (
                    SELECT s.id FROM norq_sends AS s WHERE s.created_at < ?
                    AND NOT EXISTS (SELECT 1 FROM norq_segments AS o WHERE o.send_id = s.id)
                    AND NOT EXISTS (SELECT 1 FROM norq_segment_history AS h WHERE h.send_id = s.id)
                    LIMIT ?)
                """, [.integer(Int(before)), .integer(limit)])
            return deleted.count
        }
    }

    public func counts() async throws(NorqError) -> [DeliveryState: Int] {
        try await call("counting rows") { connection in
            try await Self.stateCounts(sendID: nil, on: connection)
        }
    }

    public func close() async {
        try? await lock.withLock { try await connection.close() }
    }
}
