public import NorqCore

/// Stands in for a configured provider instance that could not be made (its certificate key cannot be read, ...):
/// every token routed to it fails with that error, which names the instance and its place in the config file,
/// while the other providers send. What `NotificationRouter(configuration:...deferProviderErrors: true)` uses, so
/// that one broken instance, perhaps one nothing routes to, does not block every send.
public struct UnavailableProvider: PushProvider {
    public let name: String
    public let typeName: String
    public let platforms: Set<Platform>
    public let policy: DeliveryPolicy
    /// Why the instance could not be made, with its name and config place.
    public let error: NorqError

    public init(name: String, typeName: String, platforms: Set<Platform>, error: NorqError,
                policy: DeliveryPolicy = DeliveryPolicy()) {
        self.name = name
        self.typeName = typeName
        self.platforms = platforms
        self.policy = policy
        self.error = error
    }

    public func prepare(_ content: PushContent, for token: PushToken,
                        options: SendOptions) throws(NorqError) -> PreparedRequest {
        throw error
    }

    public func prepare(_ content: PushContent, forChannel channel: ChannelRecipient,
                        options: SendOptions) throws(NorqError) -> PreparedRequest {
        throw error
    }

    public func deliver(_ request: PreparedRequest,
                        deadline: ContinuousClock.Instant) async throws(NorqError) -> DeliveryResponse {
        throw error
    }

    public func health() -> ProviderHealth { .notReady(error.message) }
}
