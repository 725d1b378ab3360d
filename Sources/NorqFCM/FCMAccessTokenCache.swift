import NorqCore
import Synchronization

/// The single-flight access-token state: however many sends wait, one token request is in flight.
/// A value type that returns what to do; `FCMAccessTokenCache` drives it under a lock.
///
/// Bound: `waiters` holds at most one entry per send in flight, which the router bounds (`maxInFlight`).
struct FCMAccessTokenState {
    typealias Waiter = @Sendable (Result<FCMAccessToken, NorqError>) -> Void

    private(set) var token: FCMAccessToken?
    private(set) var fetching = false
    private var waiters: [Waiter] = []
    /// Tokens FCM refused with 401: the next request for a token renews even if the policy would reuse.
    private var rejectedValue: String?
    let policy: FCMTokenRefreshPolicy

    init(policy: FCMTokenRefreshPolicy) { self.policy = policy }

    enum RequestAction {
        /// Use this token now.
        case use(FCMAccessToken)
        /// The waiter was queued; a fetch is already running.
        case wait
        /// The waiter was queued; start the (only) fetch now.
        case fetch
    }

    /// The token a send at `now` may use as it is, or nil when it must be fetched (none, about to expire, or refused).
    func reusableToken(now: Int64) -> FCMAccessToken? {
        guard let token else { return nil }
        let rejected = token.value == rejectedValue
        return policy.decide(token, now: now, rejected: rejected) == .reuse ? token : nil
    }

    /// A send needs a token at `now`.
    mutating func request(now: Int64, waiter: @escaping Waiter) -> RequestAction {
        if let token = reusableToken(now: now) { return .use(token) }
        waiters.append(waiter)
        if fetching { return .wait }
        fetching = true
        return .fetch
    }

    /// FCM answered 401 `UNAUTHENTICATED` to a request that carried `value`: renew it on the next request
    /// (only if it is still the current token: a newer one was fetched meanwhile otherwise).
    mutating func reportRejected(_ value: String) {
        if token?.value == value { rejectedValue = value }
    }

    /// The fetch finished: every waiter gets the result (returned to be called outside the lock).
    mutating func fetchFinished(_ result: Result<FCMAccessToken, NorqError>) -> [Waiter] {
        fetching = false
        if case .success(let fresh) = result {
            token = fresh
            rejectedValue = nil
        }
        defer { waiters.removeAll() }
        return waiters
    }
}

/// Fetches and caches the access token of one provider instance (single-flight).
final class FCMAccessTokenCache: Sendable {
    /// Starts one token request and calls its completion exactly once.
    typealias Fetch = @Sendable (_ completion: @escaping @Sendable (Result<FCMAccessToken, NorqError>) -> Void) -> Void

    private let state: Mutex<FCMAccessTokenState>
    private let clock: FCMClock
    private let fetch: Fetch

    init(policy: FCMTokenRefreshPolicy = FCMTokenRefreshPolicy(), clock: FCMClock, fetch: @escaping Fetch) {
        self.state = Mutex(FCMAccessTokenState(policy: policy))
        self.clock = clock
        self.fetch = fetch
    }

    /// The current token when it can be used as is (for prepare/dry-run display), nil otherwise.
    var currentToken: FCMAccessToken? { state.withLock { $0.token } }

    /// The cached token when the refresh policy reuses it now, else nil (then `withToken` fetches one). Takes no
    /// closure: the send path of nearly every push.
    func reusableToken() -> FCMAccessToken? {
        let now = clock.epochSeconds()
        return state.withLock { $0.reusableToken(now: now) }
    }

    /// Calls `completion` with a usable token: at once when cached, else after the single fetch in flight.
    func withToken(_ completion: @escaping @Sendable (Result<FCMAccessToken, NorqError>) -> Void) {
        let now = clock.epochSeconds()
        let action = state.withLock { $0.request(now: now, waiter: completion) }
        switch action {
        case .use(let token): completion(.success(token))
        case .wait: break
        case .fetch:
            fetch { [self] result in
                let waiters = state.withLock { $0.fetchFinished(result) }
                for waiter in waiters { waiter(result) }
            }
        }
    }

    /// FCM refused a request carrying `value` with 401 `UNAUTHENTICATED`.
    func reportRejected(_ value: String) {
        state.withLock { $0.reportRejected(value) }
    }
}
