import Foundation
import NorqAPNs
import NorqConfig
import NorqCore
import NorqFCM
import NorqTemplates
import NorqWebPush
import Testing

/// The sizes the template checks see are the providers' own: at the limit a real provider's `prepare` (from the
/// quick-start configuration) accepts the content, one byte over it refuses it with its payload-too-large code.
struct ProviderPayloadSizeTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let sendTime: Int64 = 1_767_225_600
    static let registry = ProviderTypeRegistry([APNsProviderType(), FCMProviderType(), WebPushProviderType()])

    static func provider(_ name: String) throws -> any PushProvider {
        let configuration = try ConfigurationLoader(registry: registry, environment: [:])
            .load(path: root + "/examples/quickstart/norq.yaml")
        let instance = try #require(configuration.provider(named: name))
        let type = try #require(registry.type(named: instance.typeName))
        return try type.makeProvider(name: name, configuration: instance.configuration, policy: DeliveryPolicy(),
                                     context: ProviderContext())
    }

    static let tokens: [String: PushToken] = [
        "apns": PushToken(token: "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90", platform: .ios),
        "fcm": PushToken(token: "dQw4w9WgXcQ:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx0demoAndroidToken", platform: .android),
        "webpush": PushToken(token: "https://push.example.net/push/demo-web-1", platform: .web,
                             keys: WebPushKeys(p256dh: "BKCjp1WSg7IDKe3dkSVMishklWs4459OXVoS2crjl1jqju8PbORmCsqtxo2LmsRbX2fMOyuft4jx5Ueznj5Tp_Q",
                                               auth: "SCcgLAlycoK6hUuYKyV4MQ")),
    ]
    static let tooLarge: [String: NorqError.Code] = [
        "apns": .apnsPayloadTooLarge, "fcm": .fcmPayloadTooLarge, "webpush": .webPushPayloadTooLarge,
    ]

    @Test(arguments: ["apns", "fcm", "webpush"])
    func theLimitIsTheProvidersToTheByte(_ name: String) async throws {
        let provider = try Self.provider(name)
        let token = try #require(Self.tokens[name])
        let rules = TemplateRules(payloadSizers: [PayloadSizer(try #require(Self.registry.type(named: name)),
                                                               platforms: [token.platform])])
        let options = SendOptions(sendTime: Self.sendTime)
        func content(_ bodyBytes: Int) -> PushContent {
            PushContent(title: "Order shipped", body: String(repeating: "x", count: bodyBytes),
                        data: ["orderId": "ORD-1", "count": 2])
        }
        let probe = try #require(try rules.payloadSizes(of: content(100), options: options).first)
        #expect(probe.provider == name)
        let limit = try #require(probe.limit)
        let fitting = content(100 + limit - probe.bytes)
        let atLimit = try #require(try rules.payloadSizes(of: fitting, options: options).first)
        #expect(atLimit.bytes == limit && atLimit.fits)
        #expect(throws: Never.self) { _ = try provider.prepare(fitting, for: token, options: options) }
        let over = content(101 + limit - probe.bytes)
        let overSize = try #require(try rules.payloadSizes(of: over, options: options).first)
        #expect(overSize.bytes == limit + 1 && overSize.excess == 1)
        let error = #expect(throws: NorqError.self) { _ = try provider.prepare(over, for: token, options: options) }
        #expect(error?.code == Self.tooLarge[name])
        await provider.shutdown()
    }

    @Test func theExampleTemplatesPassWithEveryBuiltInProvider() throws {
        let rules = TemplateRules(providerTypes: Self.registry.registeredTypes)
        let library = try TemplateLibrary(directory: Self.root + "/templates", rules: rules)
        for name in library.templateNames {
            let report = try library.template(named: name).runTests()
            for failed in report.cases where !failed.passed {
                Issue.record("\(name) / \(failed.name): \(failed.messages.joined(separator: "; "))")
            }
        }
        // background-refresh as APNs sends it: content-available only.
        let background = try library.template(named: "background-refresh")
        let content = try background.render(data: background.defaultSample)
        #expect(try APNsPayload.object(for: content, pushType: .background, sendTime: Self.sendTime)["aps"]
                == ["content-available": 1])
    }
}
