import Synchronization

/// A token bucket: `burst` requests at once, refilled at `ratePerSecond`. Pure: the caller passes the time.
package struct TokenBucket: Sendable, Hashable {
    /// Tokens left (fractional while refilling).
    package var tokens: Double
    /// When `tokens` was last brought up to date, in nanoseconds of the caller's clock.
    package var updatedAt: UInt64

    /// What one request may do.
    package enum Decision: Sendable, Hashable {
        case allowed
        /// Refused; a token is available after this many seconds (at least 1, for `Retry-After`).
        case limited(retryAfterSeconds: Int)
    }

    /// A full bucket at `now`.
    package static func full(burst: Int, now: UInt64) -> TokenBucket {
        TokenBucket(tokens: Double(burst), updatedAt: now)
    }

    /// Takes one token at `now` if there is one: the bucket after the request, and the decision.
    package static func take(_ bucket: TokenBucket, now: UInt64, ratePerSecond: Double,
                             burst: Int) -> (TokenBucket, Decision) {
        var bucket = bucket
        let elapsed = now > bucket.updatedAt ? Double(now - bucket.updatedAt) / 1e9 : 0
        bucket.tokens = min(Double(burst), bucket.tokens + elapsed * ratePerSecond)
        bucket.updatedAt = max(now, bucket.updatedAt)
        if bucket.tokens >= 1 {
            bucket.tokens -= 1
            return (bucket, .allowed)
        }
        let wait = (1 - bucket.tokens) / ratePerSecond
        return (bucket, .limited(retryAfterSeconds: max(1, Int(wait.rounded(.up)))))
    }
}

/// One token bucket per key: per API key name (one entry per configured key, plus one for `--no-auth`), or per
/// client address for failed authentications. At most `maximumKeys` buckets: a new key past the bound first evicts
/// every bucket that has refilled (forgetting it changes nothing), and is refused when none has.
package final class RateLimiter: Sendable {
    private let buckets = Mutex<[String: TokenBucket]>([:])
    let ratePerSecond: Double
    let burst: Int
    let maximumKeys: Int
    /// Nanoseconds of a monotonic clock (injected by tests).
    let now: @Sendable () -> UInt64

    package init(ratePerSecond: Double, burst: Int, maximumKeys: Int = 10_000,
                 now: @escaping @Sendable () -> UInt64 = { ContinuousClock.now.nanosecondsSinceStart }) {
        self.ratePerSecond = ratePerSecond
        self.burst = burst
        self.maximumKeys = max(1, maximumKeys)
        self.now = now
    }

    package func take(key: String) -> TokenBucket.Decision {
        let time = now()
        return buckets.withLock { buckets in
            let current: TokenBucket
            if let existing = buckets[key] {
                current = existing
            } else {
                if buckets.count >= maximumKeys {
                    buckets = buckets.filter { !Self.isFull($0.value, now: time, ratePerSecond: ratePerSecond, burst: burst) }
                    guard buckets.count < maximumKeys else { return .limited(retryAfterSeconds: 1) }
                }
                current = .full(burst: burst, now: time)
            }
            let (next, decision) = TokenBucket.take(current, now: time, ratePerSecond: ratePerSecond, burst: burst)
            buckets[key] = next
            return decision
        }
    }

    /// Buckets held (for tests).
    package var count: Int { buckets.withLock { $0.count } }

    static func isFull(_ bucket: TokenBucket, now: UInt64, ratePerSecond: Double, burst: Int) -> Bool {
        let elapsed = now > bucket.updatedAt ? Double(now - bucket.updatedAt) / 1e9 : 0
        return bucket.tokens + elapsed * ratePerSecond >= Double(burst)
    }
}

extension ContinuousClock.Instant {
    /// Nanoseconds since an arbitrary fixed start of this process's continuous clock.
    var nanosecondsSinceStart: UInt64 {
        let duration = self - Self.processStart
        let (seconds, attoseconds) = duration.components
        return UInt64(max(0, seconds)) &* 1_000_000_000 &+ UInt64(max(0, attoseconds) / 1_000_000_000)
    }
    static let processStart = ContinuousClock.now
}
