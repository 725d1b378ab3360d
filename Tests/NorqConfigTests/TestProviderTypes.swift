import NorqConfig
import NorqCore

/// A provider type used only by these tests (NorqConfig has no provider code of its own):
/// `config:` requires `apiKey`, allows `region`; env fallback from `<prefix>API_KEY`.
struct FakeConfiguration: ProviderConfiguration, Hashable {
    var apiKey: String
    var region: String?
    var summary: [(key: String, value: String)] { [("region", region ?? "-")] }
}

struct FakeProviderType: ProviderType {
    var typeName = "fake"
    var environmentPrefix = "NORQ_FAKE_"
    var platforms: Set<Platform> = [.ios, .web]

    func parseConfiguration(_ node: ConfigNode,
                            context: ProviderConfigurationContext) throws(NorqError) -> any ProviderConfiguration {
        let path = "providers.\(context.instanceName).config"
        let keys = try node.mapping(allowedKeys: ["apiKey", "region"], path: path)
        guard let apiKey = keys["apiKey"] else {
            throw NorqError(.configMissingKey, "\(path) is missing apiKey", at: node.location)
        }
        return FakeConfiguration(apiKey: try apiKey.string(path: "\(path).apiKey"),
                                 region: try keys["region"].map { n throws(NorqError) in try n.string(path: "\(path).region") })
    }

    func configurationFromEnvironment(_ environment: [String: String],
                                      context: ProviderConfigurationContext) throws(NorqError) -> (any ProviderConfiguration)? {
        guard let key = environment[environmentPrefix + "API_KEY"] else { return nil }
        return FakeConfiguration(apiKey: key, region: environment[environmentPrefix + "REGION"])
    }

    func makeProvider(name: String, configuration: any ProviderConfiguration, policy: DeliveryPolicy,
                      context: ProviderContext) throws(NorqError) -> any PushProvider {
        throw NorqError(.configInvalidValue, "test provider types create no providers")
    }
}

extension ProviderTypeRegistry {
    /// `fake` (ios, web) and `fake-android` (android).
    static var testTypes: ProviderTypeRegistry {
        ProviderTypeRegistry([
            FakeProviderType(),
            FakeProviderType(typeName: "fake-android", environmentPrefix: "NORQ_FAKE_ANDROID_", platforms: [.android]),
        ])
    }
}
