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
        /// Hot segments and their targets.
        var segments: [Int64: SegmentRecord] = [:]
        var targets: [Int64: [SegmentTarget]] = [:]
        var history: [Int64: SegmentHistoryRecord] = [:]
        var segmentsBySend: [String: [Int64]] = [:]
        /// Hot receipt segments (`NewSegment.awaitsReceipts`): their open targets count as `accepted`.
        var receiptSegments: Set<Int64> = []
        /// The token registry by (token, provider, environment) (`registryKey`).
        var registry: [String: InvalidTokenRecord] = [:]
        var nextSegmentID: Int64 = 1
        var closed = false
    }

    private let state = Mutex(State())
    private let makeLeaseToken: @Sendable () -> String
    /// Targets per segment (`DeliveryStoreSettings.segmentSize`).
    public let segmentSize: Int

    public init(segmentSize: Int = DeliveryStoreSettings().segmentSize,
                makeLeaseToken: @escaping @Sendable () -> String = { RequestID.random() }) {
        self.segmentSize = segmentSize
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
        let segmentSize = self.segmentSize
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
            let registry = state
            let segments = SegmentLedger.segments(
                of: send, now: now, size: segmentSize,
                invalid: state.registry.isEmpty ? nil : { target, environment in
                    Self.invalidEntry(registry, token: target.identity, provider: target.provider,
                                      environment: environment)
                })
            state.segmentsBySend[send.id] = []
            for segment in segments { Self.insert(segment, into: &state, now: now) }
            return .created(sendID: send.id)
        }
    }

    private static func insert(_ segment: NewSegment, into state: inout State, now: Int64) {
        let id = state.nextSegmentID
        state.nextSegmentID += 1
        state.segmentsBySend[segment.sendID, default: []].append(id)
        let record = SegmentRecord(id: id, sendID: segment.sendID, count: segment.count, open: segment.open,
                                   state: .pending, attempts: 0, nextAttemptAt: segment.nextAttemptAt,
                                   counts: segment.counts, progress: segment.progress, positions: segment.positions,
                                   createdAt: now)
        if segment.isFinished {
            state.history[id] = SegmentLedger.history(of: record, finishedAt: now)
        } else {
            state.segments[id] = record
            state.targets[id] = segment.targets
            if segment.awaitsReceipts { state.receiptSegments.insert(id) }
        }
    }

    public func claim(owner: String, limit: Int, now: Int64, leaseUntil: Int64) async throws(NorqError) -> [OutboxRow] {
        try checkOpen()
        guard limit > 0 else { return [] }
        return state.withLock { state in
            let due = state.segments.values
                .filter { DeliveryStoreRules.isClaimable(state: $0.state, nextAttemptAt: $0.nextAttemptAt,
                                                          leaseExpiresAt: $0.leaseExpiresAt, now: now) }
                .sorted { ($0.nextAttemptAt, $0.id) < ($1.nextAttemptAt, $1.id) }
            var claimed: [OutboxRow] = []
            for var record in due {
                guard claimed.count < limit else { break }
                record.mayHaveBeenDelivered = DeliveryStoreRules.mayHaveBeenDelivered(
                    afterClaimingFrom: record.state, previously: record.mayHaveBeenDelivered)
                record.state = .leased
                record.attempts += 1
                record.leaseOwner = owner
                record.leaseToken = makeLeaseToken()
                record.leaseExpiresAt = leaseUntil
                state.segments[record.id] = record
                claimed += SegmentLedger.claimedRows(record, targets: state.targets[record.id] ?? [])
            }
            return claimed
        }
    }

    public func renew(_ leases: [Lease], until: Int64) async throws(NorqError) -> Set<Int64> {
        try checkOpen()
        return state.withLock { state in
            var renewed: Set<Int64> = []
            for group in SegmentLedger.bySegment(leases) {
                guard var record = state.segments[group.segment], record.state == .leased,
                      record.leaseToken == group.token else { continue }
                record.leaseExpiresAt = until
                state.segments[group.segment] = record
                renewed.formUnion(group.rows)
            }
            return renewed
        }
    }

    public func complete(_ completions: [RowCompletion], now: Int64) async throws(NorqError) -> CompletionReport {
        try checkOpen()
        return try state.withLock { state throws(NorqError) -> CompletionReport in
            let targets = state.targets
            let checkpoint = try SegmentLedger.checkpoint(completions, records: state.segments,
                                                          targets: { targets[$0] }, now: now)
            for update in checkpoint.registry {
                Self.recordInvalid(&state, token: update.token, provider: update.provider,
                                   environment: update.environment, outcome: update.outcome, now: now)
            }
            for segment in checkpoint.newSegments { Self.insert(segment, into: &state, now: now) }
            for record in checkpoint.updated { state.segments[record.id] = record }
            for history in checkpoint.finished {
                state.segments[history.id] = nil
                state.receiptSegments.remove(history.id)
                state.history[history.id] = history
            }
            return checkpoint.report
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
        try await deliveries(ofSend: id, positions: 0..<Int.max)
    }

    public func deliveries(ofSend id: String, positions: Range<Int>) async throws(NorqError) -> [OutboxRow] {
        try checkOpen()
        return state.withLock { state in
            var rows: [OutboxRow] = []
            for segment in state.segmentsBySend[id] ?? [] {
                if let record = state.segments[segment] {
                    rows += SegmentLedger.rows(record, targets: state.targets[segment] ?? [], positions: positions)
                } else if let history = state.history[segment] {
                    rows += SegmentLedger.rows(history, targets: state.targets[segment], positions: positions)
                }
            }
            return rows.sorted { $0.position < $1.position }
        }
    }

    public func stateCounts(ofSend id: String) async throws(NorqError) -> [DeliveryState: Int] {
        try checkOpen()
        return state.withLock { state in
            var counts: [DeliveryState: Int] = [:]
            for segment in state.segmentsBySend[id] ?? [] { Self.count(segment, state, into: &counts) }
            return counts
        }
    }

    private static func count(_ segment: Int64, _ state: State, into counts: inout [DeliveryState: Int]) {
        if let record = state.segments[segment] {
            record.counts.add(into: &counts)
            if record.open > 0 {
                counts[state.receiptSegments.contains(segment) ? .accepted : record.state, default: 0] += record.open
            }
        } else if let history = state.history[segment] {
            history.counts.add(into: &counts)
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
            let old = state.history.values.filter { $0.finishedAt < before }.sorted { $0.finishedAt < $1.finishedAt }
                .prefix(max(0, limit))
            for history in old {
                state.history[history.id] = nil
                state.targets[history.id] = nil
                state.segmentsBySend[history.sendID]?.removeAll { $0 == history.id }
            }
            for (sendID, ids) in state.segmentsBySend where ids.isEmpty {
                guard let send = state.sends[sendID], send.createdAt < before else { continue }
                state.segmentsBySend[sendID] = nil
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
            for segment in Array(state.segments.keys) + Array(state.history.keys) {
                Self.count(segment, state, into: &counts)
            }
            return counts
        }
    }

    public func queueDepth(now: Int64) async throws(NorqError) -> QueueDepth {
        try checkOpen()
        return state.withLock { state in
            var depth = QueueDepth()
            for (id, record) in state.segments where record.open > 0 {
                depth.count(state: record.state, nextAttemptAt: record.nextAttemptAt,
                            leaseExpiresAt: record.leaseExpiresAt, now: now, rows: record.open,
                            awaitsReceipt: state.receiptSegments.contains(id))
            }
            return depth
        }
    }

    public func close() async { state.withLock { $0.closed = true } }
}
