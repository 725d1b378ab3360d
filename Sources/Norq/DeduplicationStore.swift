public import NorqCore
import Synchronization

/// The identity of one delivery for deduplication: the caller's idempotency key and the target
/// (device token or channel id).
public struct DeduplicationKey: Sendable, Hashable {
    public var idempotencyKey: String
    public var target: String
    public init(idempotencyKey: String, target: String) {
        self.idempotencyKey = idempotencyKey
        self.target = target
    }
}

/// What a store knows about a key when a send wants to reserve it.
public enum DeduplicationLookup: Sendable, Hashable {
    /// Unknown (or expired): the caller now holds the reservation and must `record` or `release` it.
    case reserved
    /// Already completed within the TTL: the first outcome.
    case completed(PushOutcome.Result)
    /// Another send holds the reservation right now.
    case inFlight
}

/// Remembers completed (idempotency key, token) pairs for a TTL so that repeats are not delivered twice.
/// Implementations must make `reserve` atomic: two concurrent sends of one key cannot both get `.reserved`.
public protocol DeduplicationStore: Sendable {
    /// Looks the key up and, when unknown, reserves it for the caller.
    func reserve(_ key: DeduplicationKey) async -> DeduplicationLookup
    /// Records the definitive outcome of a reserved key (kept for the TTL).
    func record(_ key: DeduplicationKey, result: PushOutcome.Result) async
    /// Drops a reservation without an outcome (no definitive answer: a later send may try again).
    func release(_ key: DeduplicationKey) async
}

/// A store that answers without waiting (it holds its entries in this process). The router calls these instead
/// of the async requirements, so a send with an idempotency key starts no task per token.
public protocol ImmediateDeduplicationStore: DeduplicationStore {
    /// `reserve`, answered at once.
    func reserveImmediately(_ key: DeduplicationKey) -> DeduplicationLookup
    /// `record`, done at once.
    func recordImmediately(_ key: DeduplicationKey, result: PushOutcome.Result)
    /// `release`, done at once.
    func releaseImmediately(_ key: DeduplicationKey)
}

extension ImmediateDeduplicationStore {
    public func reserve(_ key: DeduplicationKey) async -> DeduplicationLookup { reserveImmediately(key) }
    public func record(_ key: DeduplicationKey, result: PushOutcome.Result) async { recordImmediately(key, result: result) }
    public func release(_ key: DeduplicationKey) async { releaseImmediately(key) }
}

/// The default store: in memory, bounded (oldest entries evicted first when `maxEntries` is reached),
/// entries expire after `ttl` (default 24 hours). The clock is injectable.
public final class InMemoryDeduplicationStore: ImmediateDeduplicationStore {
    private enum Entry {
        case inFlight
        case completed(PushOutcome.Result, expires: ContinuousClock.Instant)
    }

    private struct State {
        var entries: [DeduplicationKey: (entry: Entry, generation: UInt64)] = [:]
        /// Insertion order (key, generation); stale generations are skipped on eviction.
        var order: [(DeduplicationKey, UInt64)] = []
        var orderHead = 0
        var nextGeneration: UInt64 = 0

        mutating func insert(_ key: DeduplicationKey, _ entry: Entry, maxEntries: Int) {
            nextGeneration &+= 1
            entries[key] = (entry, nextGeneration)
            order.append((key, nextGeneration))
            var budget = order.count - orderHead
            while entries.count > maxEntries, orderHead < order.count, budget > 0 {
                budget -= 1
                let (oldKey, generation) = order[orderHead]
                orderHead += 1
                if let current = entries[oldKey], current.generation == generation {
                    if case .inFlight = current.entry {
                        // Never evict a live reservation: re-queue it at the back.
                        order.append((oldKey, generation))
                    } else {
                        entries[oldKey] = nil
                    }
                }
            }
            if orderHead > 1024 && orderHead * 2 > order.count {
                order.removeFirst(orderHead)
                orderHead = 0
            }
        }
    }

    public let ttl: Duration
    public let maxEntries: Int
    private let now: @Sendable () -> ContinuousClock.Instant
    private let state = Mutex(State())

    public init(ttl: Duration = .seconds(24 * 3600), maxEntries: Int = 1_000_000,
                now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }) {
        self.ttl = ttl
        self.maxEntries = max(1, maxEntries)
        self.now = now
    }

    public func reserveImmediately(_ key: DeduplicationKey) -> DeduplicationLookup {
        let instant = now()
        return state.withLock { state in
            if let existing = state.entries[key] {
                switch existing.entry {
                case .inFlight:
                    return .inFlight
                case .completed(let result, expires: let expires) where expires > instant:
                    return .completed(result)
                case .completed:
                    break
                }
            }
            state.insert(key, .inFlight, maxEntries: maxEntries)
            return .reserved
        }
    }

    public func recordImmediately(_ key: DeduplicationKey, result: PushOutcome.Result) {
        let expires = now().advanced(by: ttl)
        state.withLock { $0.insert(key, .completed(result, expires: expires), maxEntries: maxEntries) }
    }

    public func releaseImmediately(_ key: DeduplicationKey) {
        state.withLock { state in
            if case .inFlight? = state.entries[key]?.entry { state.entries[key] = nil }
        }
    }

    /// Entries held now (completed and in flight), for tests and metrics.
    public var count: Int { state.withLock { $0.entries.count } }
}
