import NorqCore

/// An OAuth access token as the token endpoint issued it.
public struct FCMAccessToken: Sendable, Hashable, CustomStringConvertible {
    /// The bearer token. Never logged (`description` redacts it).
    public var value: String {
        didSet {
            headerValue = "Bearer " + value
            requestHeaders = Self.requestHeaders(authorization: headerValue)
        }
    }
    /// When it was received (epoch seconds).
    public var issuedAt: Int64
    /// When it stops working (epoch seconds): `issuedAt + expires_in`.
    public var expiresAt: Int64

    public init(value: String, issuedAt: Int64, expiresAt: Int64) {
        self.value = value
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.headerValue = "Bearer " + value
        self.requestHeaders = Self.requestHeaders(authorization: headerValue)
    }

    /// `Bearer <token>`: the `authorization` header value, made once per token (every request carries it).
    public private(set) var headerValue: String

    /// The header fields of every send with this token (`content-type`, then `authorization`), made once per token:
    /// every prepared request shares this one array, and the transport recognises it.
    private(set) var requestHeaders: [HTTPHeader]

    static func requestHeaders(authorization: String) -> [HTTPHeader] {
        [HTTPHeader("content-type", "application/json; charset=UTF-8"), HTTPHeader("authorization", authorization)]
    }

    public var description: String { "FCMAccessToken(<redacted>, issuedAt: \(issuedAt), expiresAt: \(expiresAt))" }
}

/// When to fetch a new access token. Pure: given the current token and the time, says reuse or renew.
///
/// - No token yet: renew.
/// - A token is renewed early, once less than `margin` of its life is left, where `margin` is a quarter of its
///   lifetime capped at `maximumMargin` (5 minutes): a one-hour token is renewed after 55 minutes, a
///   two-minute token after 90 seconds. Sends never carry a token about to expire in flight.
/// - A token FCM refused (401 `UNAUTHENTICATED`) is renewed at once.
/// - A clock that stepped back more than a minute before the token's `issuedAt`: renew (the expiry is suspect).
public struct FCMTokenRefreshPolicy: Sendable, Hashable {
    /// The longest early-renewal margin.
    public var maximumMargin: Int64

    public init(maximumMargin: Int64 = 300) {
        self.maximumMargin = max(0, maximumMargin)
    }

    public enum Decision: Sendable, Hashable {
        case reuse
        case renew
    }

    /// The instant (epoch seconds) from which `token` is renewed.
    public func renewalTime(of token: FCMAccessToken) -> Int64 {
        let lifetime = max(0, token.expiresAt - token.issuedAt)
        return token.expiresAt - min(maximumMargin, lifetime / 4)
    }

    /// - Parameters:
    ///   - token: the current token, nil when there is none.
    ///   - now: the current time, epoch seconds.
    ///   - rejected: FCM answered 401 `UNAUTHENTICATED` to a request carrying this token.
    public func decide(_ token: FCMAccessToken?, now: Int64, rejected: Bool = false) -> Decision {
        guard let token, !rejected else { return .renew }
        if now < token.issuedAt - 60 { return .renew }
        return now >= renewalTime(of: token) ? .renew : .reuse
    }
}
