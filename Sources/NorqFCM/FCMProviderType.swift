public import NorqCore
import NorqAPNs

/// The `fcm` provider type: parses `providers.<name>.config` and the `NORQ_FCM_*` env-var fallback into an
/// `FCMConfiguration`, and creates `FCMProvider` instances (one per Firebase project; several may coexist).
public struct FCMProviderType: Sendable {
    public let typeName = "fcm"
    public let environmentPrefix = "NORQ_FCM_"
    /// FCM serves Android apps, and iOS and web apps that use Firebase.
    public let platforms: Set<Platform> = [.ios, .android, .web]

    public init() {}

    /// Parses and validates an FCM `config:` block (see `FCMConfiguration.parse(_:context:origin:)`).
    public func parseConfiguration(_ node: ConfigNode,
                                   context: ProviderConfigurationContext) throws(NorqError) -> any ProviderConfiguration {
        try FCMConfiguration.parse(node, context: context)
    }

    /// Builds a configuration from `NORQ_FCM_*`, or nil when none of them is set.
    public func configurationFromEnvironment(_ environment: [String: String],
                                             context: ProviderConfigurationContext) throws(NorqError) -> (any ProviderConfiguration)? {
        try FCMConfiguration.fromEnvironment(environment, prefix: environmentPrefix, context: context)
    }
}

extension FCMProviderType {
    /// `fcm-message`: FCM answers a delivered message with its `name` (`projects/<id>/messages/<id>`).
    public var messageIDName: String { "fcm-message" }

    /// The APNs push types: FCM sends an iOS token's `apns` block by NorqAPNs's rules (`APNsPushType`).
    public var pushTypes: Set<String> { Set(APNsPushType.all.map(\.rawValue)) }
}
