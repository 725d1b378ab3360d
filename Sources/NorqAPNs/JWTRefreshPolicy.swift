/// When to mint a new provider token. A pure state machine: given the current token's age and whether
/// APNs reported it expired, says reuse or renew.
///
/// - A token is renewed once it is `refreshInterval` old (clamped to 20...55 minutes, default 50).
/// - Never sooner than 20 minutes (APNs answers `TooManyProviderTokenUpdates` otherwise) ...
/// - ... except after `ExpiredProviderToken` for the current token, which renews at once.
public struct JWTRefreshPolicy: Sendable, Hashable {
    /// Shortest token lifetime APNs tolerates on a connection (20 minutes).
    public static let minimumAge: Int64 = 20 * 60
    /// Longest sensible lifetime (55 minutes; APNs rejects tokens older than 60).
    public static let maximumAge: Int64 = 55 * 60

    /// Renewal age in seconds, within `minimumAge...maximumAge`.
    public let refreshInterval: Int64

    public init(refreshInterval: Duration = .seconds(50 * 60)) {
        let seconds = refreshInterval.components.seconds
        self.refreshInterval = min(max(seconds, Self.minimumAge), Self.maximumAge)
    }

    public enum Decision: Sendable, Hashable {
        case reuse
        case renew
    }

    /// - Parameters:
    ///   - issuedAt: `iat` of the current token, nil when there is none yet.
    ///   - now: the current time, epoch seconds.
    ///   - reportedExpired: APNs answered `ExpiredProviderToken` for the current token.
    public func decide(issuedAt: Int64?, now: Int64, reportedExpired: Bool = false) -> Decision {
        guard let issuedAt else { return .renew }
        if reportedExpired { return .renew }
        let age = now - issuedAt
        // A clock that stepped back more than a minute: the token would look issued in the future.
        if age < -60 { return .renew }
        return age >= refreshInterval ? .renew : .reuse
    }
}
