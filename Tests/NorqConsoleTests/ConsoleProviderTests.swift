import NorqConsole
import NorqCore
import Synchronization
import Testing

@Suite struct ConsoleProviderTests {
    final class Lines: Sendable {
        let text = Mutex<[String]>([])
        func append(_ line: String) { text.withLock { $0.append(line) } }
    }

    @Test func printsThePreparedRequestAndReportsDelivered() async throws {
        let lines = Lines()
        let type = ConsoleProviderType(output: { lines.append($0) })
        let configuration = try type.parseConfiguration(ConfigNode(.mapping([])),
                                                        context: ProviderConfigurationContext(instanceName: "console", baseDirectory: "."))
        let provider = try type.makeProvider(name: "console", configuration: configuration, policy: DeliveryPolicy(),
                                             context: ProviderContext())
        #expect(provider.platforms == [.ios, .android, .web])
        let content = PushContent(title: "Order shipped", body: "On its way", actionURL: "https://t.example/1",
                                  data: ["orderId": "42"], templateName: "transactional/orders/order-shipped")
        let token = PushToken(token: "fcm-token-0123456789", platform: .android)
        let request = try provider.prepare(content, for: token, options: SendOptions(requestID: "r-1"))
        #expect(request.url == "console://console/android")
        let body = try JSONValue(parsing: request.body)
        #expect(body["title"] == "Order shipped" && body["action_url"] == "https://t.example/1")
        #expect(body["token"] == .string(token.redacted), "never the whole token")
        let response = try await provider.deliver(request, deadline: .now + .seconds(1))
        #expect(response.status == 200 && response.classification == .delivered && response.messageID == "r-1")
        let printed = lines.text.withLock { $0 }.joined()
        #expect(printed.contains("console console: POST console://console/android to \(token.redacted)"))
        #expect(printed.contains("\"title\": \"Order shipped\""))
        #expect(!printed.contains("fcm-token-0123456789"))
    }

    @Test func configTakesNoKeys() throws {
        let node = ConfigNode(.mapping([(ConfigNode(.scalar("colour", quoted: false)), ConfigNode(.scalar("red", quoted: false)))]))
        do {
            _ = try ConsoleProviderType().parseConfiguration(node, context: ProviderConfigurationContext(instanceName: "console", baseDirectory: "."))
            Issue.record("an unknown key must be refused")
        } catch {
            #expect(error.code == .configUnknownKey)
        }
        #expect(try ConsoleProviderType().configurationFromEnvironment(["NORQ_CONSOLE_X": "1"],
                                                                       context: ProviderConfigurationContext(instanceName: "console", baseDirectory: ".")) == nil)
    }
}
