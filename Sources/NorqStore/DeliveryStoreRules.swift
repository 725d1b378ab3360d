public import NorqCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a durable store and its workers behave (the `store:` block of `norq.yaml` beyond the connection).
public struct DeliveryStoreSettings: Sendable, Hashable {
    /// How long a claimed row is held before another worker may take it. Workers renew leases at a third of it.
    /// It bounds crash recovery: a killed instance's rows are re-sent about this long after the crash (10 s by
    /// default, so recovery stays within 15 s); one attempt's deadline is at most half of it.
    public var leaseDuration: Duration
    /// How long an idempotency key protects against a repeat (24 h by default).
    public var idempotencyWindow: Duration
    /// How long finished rows and their sends are kept before pruning (7 days by default).
    public var retention: Duration
    /// The deadline of every database call.
    public var callTimeout: Duration
    /// Rows a worker lane claims at once (at most: a claim takes what is due), and the most rows a lane has taken
    /// (sent, or ended) without their outcome recorded. 1,000 by default (500 until stop 34): about a third of a
    /// store's CPU per row is per call (a statement to prepare, a commit, thread hand-overs), so claims and
    /// completions of more rows cost less per row (SQLite's store phase: 0.0875 against 0.0983 CPU s per 10,000 at
    /// 500 against 256, `Benchmarks/README.md`, "SQLite store CPU, stop 26"), and a lane whose window
    /// (`maxInFlight / lanes`) is a quarter of it writes its outcomes about once per 600-700 answers instead of
    /// about once per 250 (stop 34: a lane starts its next batch's rows while the last answers of the current one arrive, within
    /// this bound). The price: a lane holds up to this many rows under its leases (plus the next claim's), and a
    /// crash re-sends up to this many per lane once the leases expire (those sent and not recorded), each flagged
    /// may-have-been-delivered.
    public var claimBatchSize: Int
    /// How often an idle worker looks for due rows (also the backstop of PostgreSQL's LISTEN/NOTIFY hint).
    public var pollInterval: Duration
    /// Connections in the pool (PostgreSQL).
    public var poolSize: Int
    /// Targets per segment (the claim unit): a send is stored as segments of up to this many targets (1,000 by
    /// default, at most 100,000). A worker claims whole segments, up to `claimBatchSize` targets at once (at least
    /// one segment), and checkpoints each with one update; a crash re-sends at most what was in flight.
    public var segmentSize: Int

    /// The size segments are cut to: `segmentSize`, at most `claimBatchSize` (a claim then holds at most that many
    /// targets of one send, and a crash re-sends at most what was in flight of them).
    public var effectiveSegmentSize: Int { max(1, min(segmentSize, claimBatchSize)) }

    public init(leaseDuration: Duration = .seconds(10), idempotencyWindow: Duration = .seconds(24 * 3600),
                retention: Duration = .seconds(7 * 24 * 3600), callTimeout: Duration = .seconds(10),
                claimBatchSize: Int = 1_000, pollInterval: Duration = .milliseconds(250), poolSize: Int = 4,
                segmentSize: Int = 1_000) {
        self.segmentSize = segmentSize
        self.leaseDuration = leaseDuration
        self.idempotencyWindow = idempotencyWindow
        self.retention = retention
        self.callTimeout = callTimeout
        self.claimBatchSize = claimBatchSize
        self.pollInterval = pollInterval
        self.poolSize = poolSize
    }
}

/// The store's time: milliseconds since the UNIX epoch. Tests inject one they move by hand.
public struct StoreClock: Sendable {
    public var nowMillis: @Sendable () -> Int64
    public init(nowMillis: @escaping @Sendable () -> Int64) { self.nowMillis = nowMillis }

    /// The wall clock.
    public static let system = StoreClock {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }
}

extension Duration {
    /// Whole milliseconds (rounded down).
    public var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}

/// The decisions of durable delivery, as pure functions of their inputs (no I/O, no clock): every store applies
/// them (the in-memory store literally, the SQL stores in their WHERE clauses, which the shared conformance tests
/// hold to the same behaviour).
public enum DeliveryStoreRules {
    /// The lease expiry of a claim at `now`.
    public static func leaseExpiry(now: Int64, leaseDuration: Duration) -> Int64 {
        now + max(1, leaseDuration.wholeMilliseconds)
    }

    /// Whether a row may be claimed at `now`: pending and due, or leased with an expired lease.
    public static func isClaimable(state: DeliveryState, nextAttemptAt: Int64, leaseExpiresAt: Int64?,
                                   now: Int64) -> Bool {
        switch state {
        case .pending: nextAttemptAt <= now
        case .leased: (leaseExpiresAt ?? Int64.min) <= now
        default: false
        }
    }

    /// A row taken over from an expired lease may already have been sent by the worker that held it: the flag
    /// is set, and the re-send carries the same message id.
    public static func mayHaveBeenDelivered(afterClaimingFrom state: DeliveryState, previously: Bool) -> Bool {
        previously || state == .leased
    }

    /// When a worker should renew a lease expiring at `expiresAt`: once a third of the duration is left or less.
    public static func needsRenewal(expiresAt: Int64, now: Int64, leaseDuration: Duration) -> Bool {
        expiresAt - now <= leaseDuration.wholeMilliseconds / 3 * 2
    }

    /// What a repeat of an idempotency key means.
    public enum IdempotencyDecision: Sendable, Hashable {
        /// No live send has the key: create one.
        case create
        /// The key's send exists and matches: return it.
        case existing(sendID: String)
        /// The key's send is older than the window: it gives up the key, then a new send is created.
        case expired(sendID: String)
        /// Same key, other request: `idempotency/key-reused`.
        case reused(sendID: String)
    }

    /// Decides what an enqueue with `fingerprint` does given the send that holds its key (if any).
    public static func idempotency(existingSendID: String?, existingFingerprint: String?, existingCreatedAt: Int64?,
                                   fingerprint: String, now: Int64, window: Duration) -> IdempotencyDecision {
        guard let existingSendID, let existingCreatedAt else { return .create }
        if existingCreatedAt + window.wholeMilliseconds <= now { return .expired(sendID: existingSendID) }
        return existingFingerprint == fingerprint ? .existing(sendID: existingSendID) : .reused(sendID: existingSendID)
    }

    /// Whether a token in the registry is skipped: invalid since `invalidSince` and not registered again after it.
    public static func isInvalid(invalidSince: Int64, registeredAt: Int64?) -> Bool {
        guard let registeredAt else { return true }
        return registeredAt <= invalidSince
    }

    /// Whether a registry entry recorded for (`entryProvider`, `entryEnvironment`) applies to a target of the same
    /// token routed to `provider` and sent to `environment`. The registry is keyed by (token, provider instance,
    /// environment): APNs answers `BadDeviceToken` both for a bad token and for a token sent to the other
    /// environment, so an answer invalidates the token only where it was sent. An entry without a provider or an
    /// environment (nil or empty: recorded before the registry was per environment, or by a provider without
    /// environments) matches every provider or environment, as every entry did before.
    public static func registryEntryMatches(entryProvider: String?, entryEnvironment: String?, provider: String?,
                                            environment: String?) -> Bool {
        let entryProvider = entryProvider ?? "", entryEnvironment = entryEnvironment ?? ""
        return (entryProvider.isEmpty || entryProvider == (provider ?? ""))
            && (entryEnvironment.isEmpty || entryEnvironment == (environment ?? ""))
    }

    /// Whether `registerToken(_:provider:environment:at:)` with these filters (nil: any) re-registers an entry:
    /// an entry without a provider or environment is re-registered by any filter (it applies everywhere).
    public static func registrationApplies(entryProvider: String?, entryEnvironment: String?, provider: String?,
                                           environment: String?) -> Bool {
        let entryProvider = entryProvider ?? "", entryEnvironment = entryEnvironment ?? ""
        return (provider == nil || entryProvider.isEmpty || entryProvider == provider)
            && (environment == nil || entryEnvironment.isEmpty || entryEnvironment == environment)
    }

    /// The time of a retry `delay` after `now`.
    /// The newest of `entries` (one token's registry entries) that skips a send routed to `provider` in
    /// `environment`: matching (`registryEntryMatches`) and not registered again since; nil when none.
    public static func newestInvalid(_ entries: [InvalidTokenRecord], provider: String?,
                                     environment: String?) -> InvalidTokenRecord? {
        entries.filter {
            $0.isInvalid && registryEntryMatches(entryProvider: $0.provider, entryEnvironment: $0.environment,
                                                 provider: provider, environment: environment)
        }.max { $0.invalidSince < $1.invalidSince }
    }

    public static func retryAt(now: Int64, delay: Duration) -> Int64 {
        now + max(0, delay.wholeMilliseconds)
    }

    /// The cut-off of pruning at `now`: rows finished before it are deleted.
    public static func pruneBefore(now: Int64, retention: Duration) -> Int64 {
        now - retention.wholeMilliseconds
    }

    /// The error message of a send whose key was reused with other data.
    public static func keyReusedError(key: String, sendID: String) -> NorqError {
        NorqError(.idempotencyKeyReused,
                  "idempotency key \"\(key)\" was used by send \(sendID) with other template, data or recipients",
                  hint: "use a new key for a different send, or repeat the original request exactly")
    }

    /// The outcome of a target whose token is in the registry.
    public static func invalidTokenOutcome(_ record: InvalidTokenRecord) -> StoredOutcome {
        StoredOutcome(state: .skipped, reason: "the token was reported invalid (\(record.reason)) and not registered again since",
                      code: NorqError.Code.tokenInvalid.rawValue, classification: "token-invalid",
                      invalidSince: record.invalidSince)
    }
}

extension NorqError.Code {
    /// The same idempotency key was used with other template, data or recipients within the window.
    public static let idempotencyKeyReused: Self = "idempotency/key-reused"
    /// A target skipped because the token registry holds it as invalid.
    public static let tokenInvalid: Self = "token/invalid"
    /// The database could not be reached (names the host or file).
    public static let storeUnreachable: Self = "store/unreachable"
    /// The database refused the credentials (wrong password or user): the message names the user, never the password.
    public static let storeAuthenticationFailed: Self = "store/authentication-failed"
    /// The database named in the configuration does not exist on the server.
    public static let storeDatabaseMissing: Self = "store/database-missing"
    /// The server takes this connection only over TLS (or the configuration requires TLS the server does not offer).
    public static let storeTLSRequired: Self = "store/tls-required"
    /// A database call did not finish before its deadline.
    public static let storeDeadlineExceeded: Self = "store/deadline-exceeded"
    /// The database schema is newer than this code.
    public static let storeSchemaTooNew: Self = "store/schema-too-new"
    /// The SQLite file is not a database or is damaged.
    public static let storeCorrupt: Self = "store/corrupt"
    /// Any other database error.
    public static let storeFailed: Self = "store/failed"
    /// The `store:` block of `norq.yaml` (or a store URL) is invalid.
    public static let configInvalidStore: Self = "config/invalid-store"
    /// A row was claimed more often than its retry policy allows (its holders kept losing their leases while
    /// sending, e.g. a worker that crashes on it): finished as failed without another attempt.
    public static let storeAttemptsExhausted: Self = "store/attempts-exhausted"
    /// No send with that id.
    public static let storeSendNotFound: Self = "store/send-not-found"
}
