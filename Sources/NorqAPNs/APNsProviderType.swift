public import NorqCore

/// The `apns` provider type: parses `providers.<name>.config` and the `NORQ_APNS_*` env-var fallback into
/// an `APNsConfiguration`, and creates `APNsProvider` instances.
public struct APNsProviderType: ProviderType {
    public let typeName = "apns"
    public let environmentPrefix = "NORQ_APNS_"
    public let platforms: Set<Platform> = [.ios]

    public init() {}

    /// Parses and validates an APNs `config:` block (see `APNsConfiguration.parse(_:context:)`).
    public func parseConfiguration(_ node: ConfigNode,
                                   context: ProviderConfigurationContext) throws(NorqError) -> any ProviderConfiguration {
        try APNsConfiguration.parse(node, context: context)
    }

    /// Builds a configuration from `NORQ_APNS_*`, or nil when none of them is set.
    public func configurationFromEnvironment(_ environment: [String: String],
                                             context: ProviderConfigurationContext) throws(NorqError) -> (any ProviderConfiguration)? {
        try APNsConfiguration.fromEnvironment(environment, prefix: environmentPrefix, context: context)
    }
}
