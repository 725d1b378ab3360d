public import NorqCore
import Synchronization

/// A `DeliveryStore` in this process's memory: for tests, and for code that wants the durable API without a
/// database (nothing survives the process). It applies `DeliveryStoreRules` literally; the SQL stores are held to
/// the same behaviour by the shared conformance tests. Bounded only by what is enqueued and `prune`.
public final class InMemoryDeliveryStore: DeliveryStore {
    private struct State {
        var sends: [String: StoredSend] = [:]
        /// (scope, key) -> send id, for live keys.
        var keys: [String: String] = [:]
        var rows: [Int64: OutboxRow] = [:]
        var rowsBySend: [String: [Int64]] = [:]
        /// The token registry by (token, provider, environment) (`registryKey`).
        var registry: [String: InvalidTokenRecord] = [:]
        var nextRowID: Int64 = 1
        var closed = false
    }

    private let state = Mutex(State())
    private let makeLeaseToken: @Sendable () -> String

    public init(makeLeaseToken: @escaping @Sendable () -> String = { RequestID.random() }) {
        self.makeLeaseToken = makeLeaseToken
    }

    private static func keyOf(scope: String, key: String) -> String { scope + "\u{0}" + key }

    /// The registry's key: (token, provider, environment), nil as empty.
    private static func registryKey(token: String, provider: String?, environment: String?) -> String {
        token + "\u{0}" + (provider ?? "") + "\u{0}" + (environment ?? "")
    }

    /// The newest entry of the registry that skips a send of `token` routed to `provider` in `environment`.
    private static func invalidEntry(_ state: State, token: String, provider: String?,
                                     environment: String?) -> InvalidTokenRecord? {
        // The entries that can match: the exact key, and those without a provider and/or an environment.
        var found: InvalidTokenRecord?
        for (entryProvider, entryEnvironment) in [(provider, environment), (provider, nil), (nil, environment), (nil, nil)] {
            guard let record = state.registry[registryKey(token: token, provider: entryProvider, environment: entryEnvironment)],
                  record.isInvalid,
                  DeliveryStoreRules.registryEntryMatches(entryProvider: record.provider, entryEnvironment: record.environment,
                                                          provider: provider, environment: environment) else { continue }
            if found.map({ record.invalidSince > $0.invalidSince }) ?? true { found = record }
        }
        return found
    }

    private func checkOpen() throws(NorqError) {
        if state.withLock({ $0.closed }) { throw NorqError(.storeFailed, "the in-memory store is closed") }
    }

    public func migrate() async throws(NorqError) { try checkOpen() }

    public func enqueue(_ send: NewSend, now: Int64, idempotencyWindow: Duration) async throws(NorqError) -> EnqueueResult {
        try checkOpen()
        return try state.withLock { state throws(NorqError) -> EnqueueResult in
            if let key = send.idempotencyKey {
                let holder = state.keys[Self.keyOf(scope: send.scope, key: key)].flatMap { state.sends[$0] }
                switch DeliveryStoreRules.idempotency(existingSendID: holder?.id, existingFingerprint: holder?.fingerprint,
                                                      existingCreatedAt: holder?.createdAt, fingerprint: send.fingerprint,
                                                      now: now, window: idempotencyWindow) {
                case .existing(let id): return .existing(sendID: id)
                case .reused(let id): throw DeliveryStoreRules.keyReusedError(key: key, sendID: id)
                case .expired(let id): state.sends[id]?.idempotencyKey = nil
                case .create: break
                }
                state.keys[Self.keyOf(scope: send.scope, key: key)] = send.id
            }
            state.sends[send.id] = StoredSend(id: send.id, scope: send.scope, idempotencyKey: send.idempotencyKey,
                                              fingerprint: send.fingerprint, content: send.content, createdAt: now,
                                              targetCount: send.targets.count)
            var ids: [Int64] = []
            ids.reserveCapacity(send.targets.count)
            for target in send.targets {
                let id = state.nextRowID
                state.nextRowID += 1
                var outcome = target.outcome
                if outcome == nil, let record = Self.invalidEntry(state, token: target.identity, provider: target.provider,
                                                                  environment: target.environment) {
                    outcome = DeliveryStoreRules.invalidTokenOutcome(record)
                }
                state.rows[id] = OutboxRow(id: id, sendID: send.id, position: target.position, target: target.target,
                                           identity: target.identity, provider: target.provider,
                                           recipientID: target.recipientID, state: outcome?.state ?? .pending,
                                           attempts: 0, nextAttemptAt: now, messageID: target.messageID,
                                           last: outcome, finishedAt: outcome == nil ? nil : now)
                ids.append(id)
            }
            state.rowsBySend[send.id] = ids
            return .created(sendID: send.id)
        }
    }

    public func claim(owner: String, limit: Int, now: Int64, leaseUntil: Int64) async throws(NorqError) -> [OutboxRow] {
        try checkOpen()
        return state.withLock { state in
            let due = state.rows.values
                .filter { DeliveryStoreRules.isClaimable(state: $0.state, nextAttemptAt: $0.nextAttemptAt,
                                                          leaseExpiresAt: $0.leaseExpiresAt, now: now) }
                .sorted { ($0.nextAttemptAt, $0.id) < ($1.nextAttemptAt, $1.id) }
                .prefix(max(0, limit))
            var claimed: [OutboxRow] = []
            for var row in due {
                row.mayHaveBeenDelivered = DeliveryStoreRules.mayHaveBeenDelivered(afterClaimingFrom: row.state,
                                                                                    previously: row.mayHaveBeenDelivered)
                row.state = .leased
                row.attempts += 1
                row.leaseOwner = owner
                row.leaseToken = makeLeaseToken()
                row.leaseExpiresAt = leaseUntil
                state.rows[row.id] = row
                claimed.append(row)
            }
            return claimed
        }
    }

    public func renew(_ leases: [Lease], until: Int64) async throws(NorqError) -> Set<Int64> {
        try checkOpen()
        return state.withLock { state in
            var renewed: Set<Int64> = []
            for lease in leases {
                guard var row = state.rows[lease.rowID], row.state == .leased, row.leaseToken == lease.token else { continue }
                row.leaseExpiresAt = until
                state.rows[lease.rowID] = row
                renewed.insert(lease.rowID)
            }
            return renewed
        }
    }

    public func complete(_ completions: [RowCompletion], now: Int64) async throws(NorqError) -> CompletionReport {
        try checkOpen()
        return state.withLock { state in
            var report = CompletionReport()
            for completion in completions {
                let lease = completion.lease
                guard var row = state.rows[lease.rowID], row.state == .leased, row.leaseToken == lease.token else {
                    report.lost.insert(lease.rowID)
                    continue
                }
                row.leaseOwner = nil
                row.leaseToken = nil
                row.leaseExpiresAt = nil
                switch completion {
                case .finish(_, var outcome):
                    let environment = outcome.environment
                    outcome.environment = nil  // the registry's, not the row's
                    row.state = outcome.state
                    row.last = outcome
                    row.mayHaveBeenDelivered = row.mayHaveBeenDelivered || outcome.mayHaveBeenDelivered
                    row.finishedAt = now
                    if outcome.classification == "token-invalid" {
                        Self.recordInvalid(&state, token: row.identity, provider: row.provider,
                                           environment: environment, outcome: outcome, now: now)
                    }
                case .retry(_, let at, var last):
                    last.environment = nil
                    row.state = .pending
                    row.nextAttemptAt = at
                    row.last = last
                    row.mayHaveBeenDelivered = row.mayHaveBeenDelivered || last.mayHaveBeenDelivered
                case .release:
                    row.state = .pending
                    row.attempts = max(0, row.attempts - 1)
                }
                state.rows[lease.rowID] = row
                report.applied.insert(lease.rowID)
            }
            return report
        }
    }

    private static func recordInvalid(_ state: inout State, token: String, provider: String?, environment: String?,
                                      outcome: StoredOutcome, now: Int64) {
        let since = outcome.invalidSince ?? now
        let provider = provider.flatMap { $0.isEmpty ? nil : $0 }
        let environment = environment.flatMap { $0.isEmpty ? nil : $0 }
        let key = registryKey(token: token, provider: provider, environment: environment)
        var record = state.registry[key] ?? InvalidTokenRecord(token: token, provider: provider, environment: environment,
                                                                reason: outcome.reason ?? "invalid",
                                                                invalidSince: since, recordedAt: now)
        if since >= record.invalidSince {
            record.invalidSince = since
            record.reason = outcome.reason ?? record.reason
            record.recordedAt = now
        }
        state.registry[key] = record
    }

    public func send(id: String) async throws(NorqError) -> StoredSend? {
        try checkOpen()
        return state.withLock { $0.sends[id] }
    }

    public func sends(ids: [String]) async throws(NorqError) -> [String: StoredSend] {
        try checkOpen()
        return state.withLock { state in
            var found: [String: StoredSend] = [:]
            for id in ids { if let send = state.sends[id] { found[id] = send } }
            return found
        }
    }

    public func deliveries(ofSend id: String) async throws(NorqError) -> [OutboxRow] {
        try checkOpen()
        return state.withLock { state in
            (state.rowsBySend[id] ?? []).compactMap { state.rows[$0] }.sorted { $0.position < $1.position }
        }
    }

    public func invalidTokens(limit: Int) async throws(NorqError) -> [InvalidTokenRecord] {
        try checkOpen()
        return state.withLock { state in
            Array(state.registry.values.sorted {
                ($0.recordedAt, $0.token, $0.provider ?? "", $0.environment ?? "")
                    > ($1.recordedAt, $1.token, $1.provider ?? "", $1.environment ?? "")
            }.prefix(limit))
        }
    }

    public func registerToken(_ token: String, provider: String?, environment: String?, at: Int64) async throws(NorqError) {
        try checkOpen()
        state.withLock { state in
            for (key, var record) in state.registry where record.token == token
                && DeliveryStoreRules.registrationApplies(entryProvider: record.provider,
                                                          entryEnvironment: record.environment,
                                                          provider: provider, environment: environment) {
                record.registeredAt = max(record.registeredAt ?? at, at)
                state.registry[key] = record
            }
        }
    }

    public func prune(finishedBefore before: Int64, limit: Int) async throws(NorqError) -> Int {
        try checkOpen()
        return state.withLock { state in
            let old = state.rows.values.filter { ($0.finishedAt ?? Int64.max) < before }.prefix(max(0, limit))
            for row in old {
                state.rows[row.id] = nil
                state.rowsBySend[row.sendID]?.removeAll { $0 == row.id }
            }
            for (sendID, ids) in state.rowsBySend where ids.isEmpty {
                guard let send = state.sends[sendID], send.createdAt < before else { continue }
                state.rowsBySend[sendID] = nil
                state.sends[sendID] = nil
                if let key = send.idempotencyKey, state.keys[Self.keyOf(scope: send.scope, key: key)] == sendID {
                    state.keys[Self.keyOf(scope: send.scope, key: key)] = nil
                }
            }
            return old.count
        }
    }

    public func counts() async throws(NorqError) -> [DeliveryState: Int] {
        try checkOpen()
        return state.withLock { state in
            var counts: [DeliveryState: Int] = [:]
            for row in state.rows.values { counts[row.state, default: 0] += 1 }
            return counts
        }
    }

    public func queueDepth(now: Int64) async throws(NorqError) -> QueueDepth {
        try checkOpen()
        return state.withLock { state in
            var depth = QueueDepth()
            for row in state.rows.values where !row.state.isFinal {
                depth.count(state: row.state, nextAttemptAt: row.nextAttemptAt, leaseExpiresAt: row.leaseExpiresAt, now: now)
            }
            return depth
        }
    }

    public func close() async { state.withLock { $0.closed = true } }
}
