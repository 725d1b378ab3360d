public import NorqCore

extension APNsResponseTable {
    /// The reasons after which the application should stop using a token (an `InvalidTokenEvent`):
    /// `DeviceTokenNotForTopic` is token-invalid for this app but not a dead token, so it raises none.
    public static let invalidTokenEventReasons: Set<String> = ["Unregistered", "ExpiredToken", "BadDeviceToken"]

    /// Every documented reason string (the router's metric labels).
    public static let reasonStrings: Set<String> = Set(reasons.map(\.reason))
}

/// What the router and the CLI learn about APNs through `PushProvider`, from the APNs tables.
extension APNsProvider {
    /// A token-invalid answer whose reason is one of `APNsResponseTable.invalidTokenEventReasons`.
    public func isInvalidTokenAnswer(_ response: DeliveryResponse) -> Bool {
        guard response.classification == .tokenInvalid, let reason = response.reason else { return false }
        return APNsResponseTable.invalidTokenEventReasons.contains(reason)
    }

    /// The environment `prepare` sends `target` to: the token's (or channel's) own, else `options.environment`, else
    /// the configured one (`production`). The token registry is keyed by it: APNs answers `BadDeviceToken` also for
    /// a token sent to the other environment.
    public func environment(for target: DeliveryTarget, options: SendOptions) -> PushEnvironment? {
        switch target {
        case .token(let token): token.environment ?? options.environment ?? configuration.defaultEnvironment
        case .channel(let channel): channel.environment ?? options.environment ?? configuration.defaultEnvironment
        }
    }

    /// Every reason of `APNsResponseTable`.
    public var knownReasons: Set<String> { APNsResponseTable.reasonStrings }

    /// `apns-id` (`APNsProviderType.messageIDName`).
    public var messageIDName: String { APNsProviderType().messageIDName }

    /// Ready when the provider token can be made (token auth; a certificate was loaded at init) and no endpoint's
    /// last connection attempt failed without a connection left.
    public func health() -> ProviderHealth {
        if case .token = configuration.authentication, currentToken() == nil {
            return .notReady("APNs provider \(name) cannot make a provider token")
        }
        if let (endpoint, reason) = transport.unhealthyEndpoint() {
            return .notReady("APNs provider \(name) cannot connect to \(endpoint): \(reason)")
        }
        return .ready
    }
}

extension APNsProviderType {
    /// `apns-id`: the header APNs answers a delivered notification with.
    public var messageIDName: String { "apns-id" }
}
