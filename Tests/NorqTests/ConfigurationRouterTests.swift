import Norq
import NorqConfig
import NorqCore
import Testing

/// A provider type that makes `FakeProvider`s, to build routers from a `NorqConfiguration`.
struct FakeProviderType: ProviderType {
    struct Config: ProviderConfiguration {
        var summary: [(key: String, value: String)] { [] }
    }
    let typeName = "fake"
    let environmentPrefix = "NORQ_FAKE_"
    let platforms: Set<Platform> = [.ios]
    func parseConfiguration(_ node: ConfigNode, context: ProviderConfigurationContext) throws(NorqError) -> any ProviderConfiguration { Config() }
    func configurationFromEnvironment(_ environment: [String: String],
                                      context: ProviderConfigurationContext) throws(NorqError) -> (any ProviderConfiguration)? { nil }
    func makeProvider(name: String, configuration: any ProviderConfiguration, policy: DeliveryPolicy,
                      context: ProviderContext) throws(NorqError) -> any PushProvider {
        FakeProvider(name: name, retry: policy.retry, maxInFlight: policy.maxInFlight)
    }
}

@Suite("Router from a configuration")
struct ConfigurationRouterTests {
    @Test("instances are created through the registry, two of one type side by side, with their policies")
    func fromConfiguration() async throws {
        let configuration = NorqConfiguration(providers: [
            ProviderInstanceConfiguration(name: "fake-a", typeName: "fake", configuration: FakeProviderType.Config(),
                                          retry: .none, maxInFlight: 3, origin: .environment(prefix: "X_")),
            ProviderInstanceConfiguration(name: "fake-b", typeName: "fake", configuration: FakeProviderType.Config(),
                                          origin: .environment(prefix: "X_")),
        ], routing: RoutingTable(defaultProvider: "fake-a"))
        let r = try NotificationRouter(configuration: configuration, registry: ProviderTypeRegistry([FakeProviderType()]))
        #expect(r.providerNames == ["fake-a", "fake-b"])
        #expect(r.providers["fake-a"]?.policy.maxInFlight == 3)
        #expect(r.providers["fake-a"]?.policy.retry == RetryPolicy.none)
        let report = try await r.send(content: PushContent(title: "t"), to: recipients([ios("a"), ios("b", provider: "fake-b")]))
        #expect(report.outcomes.map(\.provider) == ["fake-a", "fake-b"])
        #expect(report.delivered == 2)
    }

    @Test("an unregistered provider type is config/unknown-provider-type")
    func unknownType() {
        let configuration = NorqConfiguration(providers: [
            ProviderInstanceConfiguration(name: "x", typeName: "carrier-pigeon", configuration: FakeProviderType.Config(),
                                          origin: .environment(prefix: "X_")),
        ])
        do {
            _ = try NotificationRouter(configuration: configuration, registry: ProviderTypeRegistry([FakeProviderType()]))
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .configUnknownProviderType)
        }
    }
}
