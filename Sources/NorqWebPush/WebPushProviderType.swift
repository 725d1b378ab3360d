public import NorqCore

/// The `webpush` provider type: parses `providers.<name>.config` and the `NORQ_WEBPUSH_*` env-var fallback into
/// a `WebPushConfiguration`, and creates `WebPushProvider` instances.
public struct WebPushProviderType: ProviderType {
    public let typeName = "webpush"
    public let environmentPrefix = "NORQ_WEBPUSH_"
    public let platforms: Set<Platform> = [.web]

    public init() {}

    public func parseConfiguration(_ node: ConfigNode,
                                   context: ProviderConfigurationContext) throws(NorqError) -> any ProviderConfiguration {
        try WebPushConfiguration.parse(node, context: context)
    }

    public func configurationFromEnvironment(_ environment: [String: String],
                                             context: ProviderConfigurationContext) throws(NorqError) -> (any ProviderConfiguration)? {
        try WebPushConfiguration.fromEnvironment(environment, prefix: environmentPrefix, context: context)
    }

    public func makeProvider(name: String, configuration: any ProviderConfiguration, policy: DeliveryPolicy,
                             context: ProviderContext) throws(NorqError) -> any PushProvider {
        guard let configuration = configuration as? WebPushConfiguration else {
            throw NorqError(.webPushWrongConfiguration,
                            "provider \(name) of type webpush was given a \(type(of: configuration)) configuration")
        }
        return try WebPushProvider(name: name, configuration: configuration, policy: policy, logger: context.logger)
    }
}
