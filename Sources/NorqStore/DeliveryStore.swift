public import NorqCore
/// Durable delivery: the outbox, idempotency and token registry that survive restarts (issue 18).
///
/// A `DeliveryStore` holds three facts:
/// - the *send*: its scoped idempotency key, a fingerprint of what was asked, the rendered content (once per
///   send, not per token) and when it was created;
/// - one *outbox row* per target (token or channel): its state, attempts, next attempt time, lease, last answer,
///   message id and whether it may have been delivered already;
/// - the *token registry*: tokens a provider declared invalid, per (token, provider instance, environment), with
///   its timestamp, and re-registrations.
///
/// Every state change of a row is a compare-and-set on (row id, lease token): a worker whose lease expired cannot
/// finish or overwrite a row another worker has taken. Times are milliseconds since the UNIX epoch, passed in by
/// the caller (the decisions are pure functions in `DeliveryStoreRules`, tested without I/O).
public protocol DeliveryStore: Sendable {
    /// Creates or upgrades the schema. Safe when several instances start at once; a schema newer than the code
    /// throws `store/schema-too-new`.
    func migrate() async throws(NorqError)

    /// The size this store cuts a send's targets into (`DeliveryStoreSettings.effectiveSegmentSize`): targets
    /// handed to `enqueue` already cut to it (`SendTargets(segmentSize:)`) are written without being cut again.
    /// The default is `DeliveryStoreSettings().effectiveSegmentSize`.
    var segmentSize: Int { get }

    /// Commits a send and its outbox rows (one transaction per chunk of rows). A repeat of a scoped idempotency key
    /// within `idempotencyWindow` returns the original send; the same key with another fingerprint throws
    /// `idempotency/key-reused`. Targets whose token is in the registry for their provider and environment
    /// (`NewDelivery.environment`; `DeliveryStoreRules.registryEntryMatches`) and not registered again since are
    /// finished at once as skipped (`token/invalid`).
    func enqueue(_ send: NewSend, now: Int64, idempotencyWindow: Duration) async throws(NorqError) -> EnqueueResult

    /// Leases up to `limit` rows that are due (pending with `next_attempt_at <= now`, or leased with an expired
    /// lease) to `owner` until `leaseUntil`, with a fresh lease token each, and counts an attempt on each.
    func claim(owner: String, limit: Int, now: Int64, leaseUntil: Int64) async throws(NorqError) -> [OutboxRow]

    /// Extends leases still held (compare-and-set); returns the row ids whose lease was extended.
    func renew(_ leases: [Lease], until: Int64) async throws(NorqError) -> Set<Int64>

    /// Applies completions in one transaction, each a compare-and-set on its lease. Rows finished move to history;
    /// a token-invalid rejection records the token in the registry for the row's provider and the outcome's
    /// environment (`StoredOutcome.environment`), with the provider's timestamp (else `now`).
    func complete(_ completions: [RowCompletion], now: Int64) async throws(NorqError) -> CompletionReport

    /// The send with this id, or nil.
    func send(id: String) async throws(NorqError) -> StoredSend?

    /// The sends with these ids that exist, by id: what a worker reads once per claimed batch (one query for a
    /// batch of 1-recipient sends instead of one per row). The default asks `send(id:)` for each.
    func sends(ids: [String]) async throws(NorqError) -> [String: StoredSend]

    /// Every row of a send, hot and finished, in target order.
    func deliveries(ofSend id: String) async throws(NorqError) -> [OutboxRow]

    /// The rows of a send whose target position is in `positions`, hot and finished, in target order: one page of
    /// a large send without reading the rest. The default reads every row and keeps the page.
    func deliveries(ofSend id: String, positions: Range<Int>) async throws(NorqError) -> [OutboxRow]

    /// How many of a send's rows are in each state, hot and finished: its progress without reading its rows.
    /// The default reads every row.
    func stateCounts(ofSend id: String) async throws(NorqError) -> [DeliveryState: Int]

    /// The token registry: invalid tokens, newest first, at most `limit`.
    func invalidTokens(limit: Int) async throws(NorqError) -> [InvalidTokenRecord]

    /// Records that `token` was registered again at `at` (ms): later sends reach it again. With `provider` and/or
    /// `environment`, only the registry entries of that provider instance / environment (and entries recorded
    /// without one, which match every provider / environment) are re-registered; nil means every one.
    func registerToken(_ token: String, provider: String?, environment: String?, at: Int64) async throws(NorqError)

    /// `registerToken(_:provider:environment:at:)` for every token of `tokens` at once: the SQL stores run one
    /// statement for the whole batch (not one call per token). The default (`DeliveryStore+TokenBatch.swift`)
    /// registers them one by one.
    func registerTokens(_ tokens: [String], provider: String?, environment: String?, at: Int64) async throws(NorqError)

    /// Deletes at most `limit` finished rows (and sends whose rows are all gone and whose key expired) finished
    /// before `before`; returns how many rows were deleted. Callers loop while it returns `limit`.
    func prune(finishedBefore before: Int64, limit: Int) async throws(NorqError) -> Int

    /// Counts of rows by state (hot and history), for status and tests. It reads the whole history: for a queue
    /// depth use ``queueDepth(now:)``.
    func counts() async throws(NorqError) -> [DeliveryState: Int]

    /// The hot outbox only (pending and leased rows, never history), split by when each row can run at `now` (ms):
    /// cheap at any history size (the SQL stores count ranges of the partial indexes the claims use). For queue
    /// depth gauges (`/metrics`).
    func queueDepth(now: Int64) async throws(NorqError) -> QueueDepth

    /// Releases connections. Calls after `close` fail.
    func close() async
}

/// The state of one outbox row. An open set.
public struct DeliveryState: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Waiting for `next_attempt_at`.
    public static let pending = DeliveryState(rawValue: "pending")
    /// Held by a worker until its lease expires.
    public static let leased = DeliveryState(rawValue: "leased")
    public static let delivered = DeliveryState(rawValue: "delivered")
    public static let rejected = DeliveryState(rawValue: "rejected")
    public static let failed = DeliveryState(rawValue: "failed")
    public static let skipped = DeliveryState(rawValue: "skipped")
    /// The service accepted it and answers later with a receipt (an Expo ticket): a *receipt segment* holds it
    /// until the worker fetches its receipt (`ReceiptFetchingProvider`), which decides its final state. It has an
    /// outcome already (reports show it as `accepted`), so it counts as final for `DurableDelivery.wait`.
    public static let accepted = DeliveryState(rawValue: "accepted")
    /// Whether the row is finished (it lives in history, not in the hot outbox).
    public var isFinal: Bool { self != .pending && self != .leased }
    public var description: String { rawValue }
}

/// One target of a send to enqueue.
public struct NewDelivery: Sendable, Hashable {
    /// Its place in the send (report order).
    public var position: Int
    /// The target, serialized (`DeliveryTarget.storedJSON`).
    public var target: String
    /// The token or channel id: the token registry's key.
    public var identity: String
    /// The routed provider instance (nil when routing failed).
    public var provider: String?
    public var recipientID: String?
    /// The stable message id every attempt carries (`apns-id`).
    public var messageID: String?
    /// Set when routing already decided the outcome: the row is finished at enqueue.
    public var outcome: StoredOutcome? {
        get { boxedOutcome?.value }
        set { boxedOutcome = newValue.map(Indirect.init) }
    }
    /// Held out of line: almost every target has none, and a million of them should not carry its ~140 bytes.
    private var boxedOutcome: Indirect<StoredOutcome>?
    /// The environment the routed provider sends this target to (`PushProvider.environment(for:options:)`: APNs
    /// `sandbox` / `production`), nil when the provider has none. The token registry is keyed by (token,
    /// provider, environment): enqueue skips the target only when its token is invalid for this provider and
    /// environment. Not stored in the row.
    public var environment: String?

    public init(position: Int, target: String, identity: String, provider: String?, recipientID: String? = nil,
                messageID: String? = nil, outcome: StoredOutcome? = nil, environment: String? = nil) {
        self.position = position
        self.target = target
        self.identity = identity
        self.provider = provider
        self.recipientID = recipientID
        self.messageID = messageID
        self.outcome = outcome
        self.environment = environment
    }
}

/// A send to enqueue.
public struct NewSend: Sendable, Hashable {
    /// A new unique id (`RequestID.random()`).
    public var id: String
    /// The idempotency scope (keys are unique per scope).
    public var scope: String
    /// The caller's idempotency key, when given (only then is the send deduplicated).
    public var idempotencyKey: String?
    /// Hex digest of (template, data, recipients, options): a repeat must match it.
    public var fingerprint: String
    /// The rendered content and the send options, serialized once per send.
    public var content: String
    /// The targets, held as encoded segments (`SendTargets`).
    public var targets: SendTargets

    public init(id: String, scope: String = "", idempotencyKey: String?, fingerprint: String, content: String,
                targets: SendTargets) {
        self.id = id
        self.scope = scope
        self.idempotencyKey = idempotencyKey
        self.fingerprint = fingerprint
        self.content = content
        self.targets = targets
    }

    /// A send of these targets, cut to the default segment size (a store cuts them to its own).
    public init(id: String, scope: String = "", idempotencyKey: String?, fingerprint: String, content: String,
                targets: [NewDelivery]) {
        self.init(id: id, scope: scope, idempotencyKey: idempotencyKey, fingerprint: fingerprint, content: content,
                  targets: SendTargets(targets))
    }
}

/// What `enqueue` did.
public enum EnqueueResult: Sendable, Hashable {
    /// A new send was committed.
    case created(sendID: String)
    /// A repeat of an idempotency key: the original send.
    case existing(sendID: String)

    public var sendID: String {
        switch self {
        case .created(let id), .existing(let id): id
        }
    }
}

/// A stored send.
public struct StoredSend: Sendable, Hashable {
    public var id: String
    public var scope: String
    public var idempotencyKey: String?
    public var fingerprint: String
    public var content: String
    public var createdAt: Int64
    public var targetCount: Int

    public init(id: String, scope: String, idempotencyKey: String?, fingerprint: String, content: String,
                createdAt: Int64, targetCount: Int) {
        self.id = id
        self.scope = scope
        self.idempotencyKey = idempotencyKey
        self.fingerprint = fingerprint
        self.content = content
        self.createdAt = createdAt
        self.targetCount = targetCount
    }
}

/// The final (or last) answer of a row, as stored.
public struct StoredOutcome: Sendable, Hashable {
    /// The classification of a `delivered` outcome the service only accepted (a ticket, as Expo's: its receipt
    /// comes later): reports show it as `accepted`, not `delivered`.
    public static let acceptedClassification = "accepted"
    /// A delivered outcome the service only accepted (`acceptedClassification`).
    public var isAccepted: Bool { state == .delivered && classification == Self.acceptedClassification }

    public var state: DeliveryState
    /// HTTP status of the last answer.
    public var status: Int?
    /// The provider's reason, or the error message.
    public var reason: String?
    /// A `NorqError` code (`token/invalid`, `provider/transport-failed`, ...).
    public var code: String?
    /// The provider's classification of the answer (`token-invalid`, ...).
    public var classification: String?
    /// The provider's invalid-since timestamp (APNs 410), ms.
    public var invalidSince: Int64?
    /// The message id of the answer (or the one sent).
    public var messageID: String?
    /// An attempt may have reached the provider without a definitive answer.
    public var mayHaveBeenDelivered: Bool
    /// The environment the attempt was sent to (`PreparedRequest.environment`), nil when the provider has none:
    /// a `token-invalid` finish records the token in the registry for (provider, this environment) only. Not
    /// stored in the row (only in the registry).
    public var environment: String?

    public init(state: DeliveryState, status: Int? = nil, reason: String? = nil, code: String? = nil,
                classification: String? = nil, invalidSince: Int64? = nil, messageID: String? = nil,
                mayHaveBeenDelivered: Bool = false, environment: String? = nil) {
        self.environment = environment
        self.state = state
        self.status = status
        self.reason = reason
        self.code = code
        self.classification = classification
        self.invalidSince = invalidSince
        self.messageID = messageID
        self.mayHaveBeenDelivered = mayHaveBeenDelivered
    }

    /// This outcome with the environment its attempt was sent to (`PreparedRequest.environment`).
    public func attempted(in environment: PushEnvironment?) -> StoredOutcome {
        var outcome = self
        outcome.environment = environment?.rawValue
        return outcome
    }
}

/// One outbox row (hot or finished).
public struct OutboxRow: Sendable, Hashable {
    public var id: Int64
    public var sendID: String
    public var position: Int
    public var target: String
    public var identity: String
    public var provider: String?
    public var recipientID: String?
    public var state: DeliveryState
    /// Attempts counted so far (each claim counts one).
    public var attempts: Int
    public var nextAttemptAt: Int64
    public var leaseOwner: String?
    public var leaseToken: String?
    public var leaseExpiresAt: Int64?
    public var messageID: String?
    public var mayHaveBeenDelivered: Bool
    /// The last (or final) answer.
    public var last: StoredOutcome?
    public var finishedAt: Int64?
    /// When the service accepted it (ms; an Expo ticket): a row in a receipt segment (state `accepted`) fetches its
    /// receipt from then on, up to the provider's `receiptRetention`. Nil for every other row.
    public var acceptedAt: Int64?

    public init(id: Int64, sendID: String, position: Int, target: String, identity: String, provider: String?,
                recipientID: String?, state: DeliveryState, attempts: Int, nextAttemptAt: Int64,
                leaseOwner: String? = nil, leaseToken: String? = nil, leaseExpiresAt: Int64? = nil,
                messageID: String?, mayHaveBeenDelivered: Bool = false, last: StoredOutcome? = nil,
                finishedAt: Int64? = nil, acceptedAt: Int64? = nil) {
        self.id = id
        self.sendID = sendID
        self.position = position
        self.target = target
        self.identity = identity
        self.provider = provider
        self.recipientID = recipientID
        self.state = state
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.leaseOwner = leaseOwner
        self.leaseToken = leaseToken
        self.leaseExpiresAt = leaseExpiresAt
        self.messageID = messageID
        self.mayHaveBeenDelivered = mayHaveBeenDelivered
        self.last = last
        self.finishedAt = finishedAt
        self.acceptedAt = acceptedAt
    }

    /// The lease this row is held under (nil when not leased).
    public var lease: Lease? { leaseToken.map { Lease(rowID: id, token: $0) } }
}

/// A row's lease: the compare-and-set key of every change a worker makes.
public struct Lease: Sendable, Hashable {
    public var rowID: Int64
    public var token: String
    public init(rowID: Int64, token: String) {
        self.rowID = rowID
        self.token = token
    }
}

/// A change a worker makes to a leased row.
public enum RowCompletion: Sendable, Hashable {
    /// The row is finished with this outcome (moves to history).
    case finish(Lease, StoredOutcome)
    /// Try again at `at` (ms); `last` is the answer of the failed attempt.
    case retry(Lease, at: Int64, last: StoredOutcome)
    /// Give the row back without counting the attempt (graceful shutdown before it was sent).
    case release(Lease)

    public var lease: Lease {
        switch self {
        case .finish(let lease, _), .retry(let lease, _, _), .release(let lease): lease
        }
    }
}

/// What `complete` applied.
public struct CompletionReport: Sendable, Hashable {
    /// Rows changed.
    public var applied: Set<Int64>
    /// Rows whose lease was no longer held (another worker took them, or they finished): nothing changed.
    public var lost: Set<Int64>
    public init(applied: Set<Int64> = [], lost: Set<Int64> = []) {
        self.applied = applied
        self.lost = lost
    }
}

/// An entry of the token registry, keyed by (token, provider instance, environment).
public struct InvalidTokenRecord: Sendable, Hashable {
    public var token: String
    /// The provider instance that answered; nil for an entry recorded without one (before schema version 4 of
    /// the SQL stores' registry when the row had no provider): it matches every provider.
    public var provider: String?
    /// The environment the answer came from (APNs `sandbox` / `production`); nil when the provider has no
    /// environments, or for an entry recorded before the registry was per environment: it matches every
    /// environment (`DeliveryStoreRules.registryEntryMatches`).
    public var environment: String?
    /// The provider's reason (`Unregistered`, `BadDeviceToken`, ...).
    public var reason: String
    /// The provider's timestamp (APNs 410), else the time the answer was recorded (ms).
    public var invalidSince: Int64
    public var recordedAt: Int64
    /// The last re-registration (ms), if any.
    public var registeredAt: Int64?

    public init(token: String, provider: String?, environment: String? = nil, reason: String, invalidSince: Int64,
                recordedAt: Int64, registeredAt: Int64? = nil) {
        self.token = token
        self.provider = provider
        self.environment = environment
        self.reason = reason
        self.invalidSince = invalidSince
        self.recordedAt = recordedAt
        self.registeredAt = registeredAt
    }

    /// Whether sends to this token are skipped now (`DeliveryStoreRules.isInvalid`).
    public var isInvalid: Bool { DeliveryStoreRules.isInvalid(invalidSince: invalidSince, registeredAt: registeredAt) }
}

extension DeliveryStore {
    public var segmentSize: Int { DeliveryStoreSettings().effectiveSegmentSize }

    /// Records that `token` was registered again at `at` (ms) for every provider and environment.
    public func registerToken(_ token: String, at: Int64) async throws(NorqError) {
        try await registerToken(token, provider: nil, environment: nil, at: at)
    }

    public func deliveries(ofSend id: String, positions: Range<Int>) async throws(NorqError) -> [OutboxRow] {
        try await deliveries(ofSend: id).filter { positions.contains($0.position) }
    }

    public func stateCounts(ofSend id: String) async throws(NorqError) -> [DeliveryState: Int] {
        var counts: [DeliveryState: Int] = [:]
        for row in try await deliveries(ofSend: id) { counts[row.state, default: 0] += 1 }
        return counts
    }

    public func sends(ids: [String]) async throws(NorqError) -> [String: StoredSend] {
        var found: [String: StoredSend] = [:]
        for id in Set(ids) {
            if let send = try await send(id: id) { found[id] = send }
        }
        return found
    }
}

/// A value held out of line (a reference to an immutable box): keeps a rarely set optional field from growing
/// every element of a large array. Equal and hashed by its value.
package final class Indirect<Value: Sendable & Hashable>: Sendable, Hashable {
    package let value: Value

    package init(_ value: Value) { self.value = value }

    package static func == (lhs: Indirect, rhs: Indirect) -> Bool { lhs === rhs || lhs.value == rhs.value }

    package func hash(into hasher: inout Hasher) { hasher.combine(value) }
}
