import NorqCore
@testable import NorqExpo
import Testing

@Suite("Expo message mapping")
struct ExpoMessageTests {
    static func content() -> PushContent {
        var content = PushContent(title: "Order shipped", body: "On its way", image: "https://cdn.example/x.png",
                                  actionURL: "https://example.com/track", data: ["orderId": "A-1"])
        content.ios.subtitle = "Today"
        content.ios.sound = PushSound(name: "default")
        content.ios.badge = 3
        content.ios.interruptionLevel = "time-sensitive"
        content.ios.category = "ORDER"
        content.ios.threadID = "orders"
        content.ios.mutableContent = true
        content.ios.contentAvailable = true
        content.android.channelID = "orders"
        content.android.priority = "high"
        content.android.icon = "ic_order"
        content.android.tag = "order-A-1"
        content.android.ttl = 3600
        content.android.color = "#ff0000"
        content.headers.collapseID = "order-A-1"
        content.headers.priority = 5
        content.headers.expiration = .after(seconds: 600)
        return content
    }

    @Test("iOS: title, body, data (with the action URL), richContent, iOS fields, priority, ttl, collapseId")
    func ios() throws {
        let message = try ExpoMessage.object(for: Self.content(), platform: .ios, options: SendOptions())
        #expect(message["title"] == "Order shipped")
        #expect(message["body"] == "On its way")
        #expect(message["data"] == ["orderId": "A-1", "url": "https://example.com/track"])
        #expect(message["richContent"] == ["image": "https://cdn.example/x.png"])
        #expect(message["subtitle"] == "Today")
        #expect(message["sound"] == "default")
        #expect(message["badge"] == 3)
        #expect(message["interruptionLevel"] == "time-sensitive")
        #expect(message["categoryId"] == "ORDER")
        #expect(message["threadId"] == "orders")
        #expect(message["mutableContent"] == true)
        #expect(message["contentAvailable"] == true)
        #expect(message["priority"] == "normal")
        #expect(message["ttl"] == 600)
        #expect(message["collapseId"] == "order-A-1")
        #expect(message["channelId"] == nil)
        #expect(message["to"] == nil)
    }

    @Test("Android: channelId, icon, tag, android.priority and android.ttl win; no iOS keys; color dropped")
    func android() throws {
        let message = try ExpoMessage.object(for: Self.content(), platform: .android, options: SendOptions())
        #expect(message["channelId"] == "orders")
        #expect(message["icon"] == "ic_order")
        #expect(message["tag"] == "order-A-1")
        #expect(message["priority"] == "high")
        #expect(message["ttl"] == 3600)
        #expect(message["badge"] == nil)
        #expect(message["subtitle"] == nil)
        #expect(message["color"] == nil)
    }

    @Test("send options win over the template; an absolute expiration is `expiration`; a critical sound is an object")
    func optionsAndForms() throws {
        var content = Self.content()
        content.ios.sound = PushSound(name: "alarm.caf", critical: true, volume: 0.5)
        var options = SendOptions(priority: 10, expiration: .at(epochSeconds: 1_900_000_000), collapseID: "send-1")
        options.sendTime = 1_800_000_000
        let message = try ExpoMessage.object(for: content, platform: .ios, options: options)
        #expect(message["priority"] == "high")
        #expect(message["expiration"] == 1_900_000_000)
        #expect(message["ttl"] == nil)
        #expect(message["collapseId"] == "send-1")
        #expect(message["sound"] == ["critical": true, "name": "alarm.caf", "volume": 0.5])
    }

    @Test("push.json: an object is sent as written (its `to` replaced); anything else is expo/invalid-message")
    func native() throws {
        let content = PushContent(nativePayload: ["to": "ignored", "title": "Hi", "data": ["a": 1]])
        let message = try ExpoMessage.object(for: content, platform: .android, options: SendOptions())
        #expect(message == ["title": "Hi", "data": ["a": 1]])
        #expect(throws: NorqError.self) {
            try ExpoMessage.object(for: PushContent(nativePayload: ["a", "b"]), platform: .ios, options: SendOptions())
        }
    }

    @Test("payloadSizes measures the message prepare sends, with Expo's 4,096-byte limit")
    func payloadSizes() throws {
        let sizes = try ExpoProviderType().payloadSizes(for: Self.content(), platforms: [.ios, .android, .web],
                                                        options: SendOptions())
        #expect(sizes.map(\.platform) == [.ios, .android])
        #expect(sizes.allSatisfy { $0.limit == 4096 && $0.bytes > 100 })
    }
}
