public import NorqCore

/// The `expo` provider type: parses `providers.<name>.config` and the `NORQ_EXPO_*` env-var fallback into an
/// `ExpoConfiguration`, and creates `ExpoProvider` instances.
public struct ExpoProviderType: ProviderType {
    public let typeName = "expo"
    public let environmentPrefix = "NORQ_EXPO_"
    /// Expo delivers to iOS and Android apps built with Expo; web tokens go to `webpush`.
    public let platforms: Set<Platform> = [.ios, .android]

    public init() {}

    /// Parses and validates an `expo` `config:` block (see `ExpoConfiguration.parse(_:context:origin:)`).
    public func parseConfiguration(_ node: ConfigNode,
                                   context: ProviderConfigurationContext) throws(NorqError) -> any ProviderConfiguration {
        try ExpoConfiguration.parse(node, context: context)
    }

    /// Builds a configuration from `NORQ_EXPO_ACCESS_TOKEN` or `NORQ_EXPO_ENABLED`, or nil when neither is set.
    public func configurationFromEnvironment(_ environment: [String: String],
                                             context: ProviderConfigurationContext) throws(NorqError) -> (any ProviderConfiguration)? {
        try ExpoConfiguration.fromEnvironment(environment, prefix: environmentPrefix, context: context)
    }

    /// `expo-ticket`: an accepted Expo message is named by its ticket id (the id its receipt is fetched with).
    public var messageIDName: String { "expo-ticket" }

    /// The message `ExpoProvider.prepare` sends for `content` (one per platform asked for), with Expo's limit.
    public func payloadSizes(for content: PushContent, platforms: Set<Platform>,
                             options: SendOptions) throws(NorqError) -> [PayloadSize] {
        var sizes: [PayloadSize] = []
        for platform in Platform.known where platforms.contains(platform) && self.platforms.contains(platform) {
            let message = try ExpoMessage.object(for: content, platform: platform, options: options)
            let bytes = JSONValue.object(message).serialized().count
            sizes.append(PayloadSize(provider: "expo", platform: platform, what: "message", bytes: bytes,
                                     limit: ExpoMessage.payloadLimit))
        }
        return sizes
    }

    /// Creates a live Expo provider instance from a parsed `ExpoConfiguration`.
    public func makeProvider(name: String, configuration: any ProviderConfiguration, policy: DeliveryPolicy,
                             context: ProviderContext) throws(NorqError) -> any PushProvider {
        guard let configuration = configuration as? ExpoConfiguration else {
            throw NorqError(.expoWrongConfiguration,
                            "provider \(name) of type expo was given a \(type(of: configuration)) configuration")
        }
        return try ExpoProvider(name: name, configuration: configuration, policy: policy, logger: context.logger)
    }
}
