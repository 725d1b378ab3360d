import Norq
import NorqConfig
import NorqCore
import Testing
@testable import NorqWebPush

/// `webpush` through the real YAML loader: `${ENV}` secrets, file:line:col errors, routing, the env fallback.
@Suite struct WebPushProviderTypeTests {
    static let keys = VAPIDKeyPair.generate()
    static let registry = ProviderTypeRegistry([WebPushProviderType()])

    @Test func loadsFromYAMLWithEnvironmentSecrets() async throws {
        let loader = ConfigurationLoader(registry: Self.registry, environment: [
            "VAPID_PUBLIC": Self.keys.publicKeyBase64URL, "VAPID_PRIVATE": Self.keys.privateKeyBase64URL,
        ], workingDirectory: "/tmp")
        let configuration = try loader.load(yaml: """
            providers:
              webpush:
                config:
                  vapidPublicKey: ${VAPID_PUBLIC}
                  vapidPrivateKey: ${VAPID_PRIVATE}
                  subject: mailto:ops@example.com
            routing:
              push.web: webpush
            """, file: "norq.yaml", baseDirectory: "/tmp")
        let web = try #require(configuration.providers.first?.configuration as? WebPushConfiguration)
        #expect(web.vapidKeys == Self.keys)
        let router = try NotificationRouter(configuration: configuration, registry: Self.registry)
        await router.shutdown()
    }

    @Test func mismatchedPairReportsFileLineColumn() {
        let other = VAPIDKeyPair.generate()
        let loader = ConfigurationLoader(registry: Self.registry, environment: [:], workingDirectory: "/tmp")
        do {
            _ = try loader.load(yaml: """
                providers:
                  webpush:
                    config:
                      vapidPublicKey: \(other.publicKeyBase64URL)
                      vapidPrivateKey: \(Self.keys.privateKeyBase64URL)
                      subject: mailto:ops@example.com
                """, file: "norq.yaml", baseDirectory: "/tmp")
            Issue.record("a mismatched pair was accepted")
        } catch {
            #expect(error.code == .webPushInvalidVAPIDKey)
            #expect(error.description.hasPrefix("norq.yaml:4:"), "\(error)")
            #expect(!error.description.contains(Self.keys.privateKeyBase64URL))
        }
    }

    @Test func environmentFallbackRegistersTheProvider() throws {
        let loader = ConfigurationLoader(registry: Self.registry, environment: [
            "NORQ_WEBPUSH_VAPID_PUBLIC_KEY": Self.keys.publicKeyBase64URL,
            "NORQ_WEBPUSH_VAPID_PRIVATE_KEY": Self.keys.privateKeyBase64URL,
            "NORQ_WEBPUSH_SUBJECT": "https://example.com/contact",
        ], workingDirectory: "/tmp")
        let configuration = try loader.load(yaml: "templates: ./templates\n", file: "norq.yaml", baseDirectory: "/tmp")
        #expect(configuration.providers.map(\.name) == ["webpush"])
        #expect((configuration.providers.first?.configuration as? WebPushConfiguration)?.origin == "env")
    }

    struct OtherConfiguration: ProviderConfiguration {
        var summary: [(key: String, value: String)] { [] }
    }

    @Test func wrongConfigurationType() {
        do {
            _ = try WebPushProviderType().makeProvider(name: "webpush", configuration: OtherConfiguration(),
                                                       policy: DeliveryPolicy(), context: ProviderContext())
            Issue.record("accepted")
        } catch {
            #expect(error.code == .webPushWrongConfiguration)
        }
    }
}
