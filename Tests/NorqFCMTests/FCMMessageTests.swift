import Foundation
@testable import NorqFCM
import NorqAPNs
import NorqCore
import OrderedCollections
import Testing

@Suite struct FCMMessageTests {
    let options = FCMMessage.Options(sendTime: 1_800_000_000)
    let androidTarget = FCMTarget.token("tok:APA91b", platform: .android)

    func message(_ content: PushContent, _ target: FCMTarget,
                 options: FCMMessage.Options? = nil) throws -> JSONValue {
        .object(try FCMMessage.object(for: content, target: target, options: options ?? self.options))
    }

    @Test func androidTokenGetsNotificationDataAndTheAndroidBlock() throws {
        var content = PushContent(title: "Order shipped", body: "On its way", image: "https://cdn.example.com/a.png",
                                  actionURL: "https://example.com/track")
        content.android.channelID = "orders"
        content.android.priority = "high"
        content.android.color = "#ff0000"
        content.android.icon = "ic_ship"
        content.android.sound = "default"
        content.android.tag = "order-1"
        content.android.ttl = 3600
        content.headers.collapseID = "order-1"
        content.data = ["orderId": "A-1", "count": 3, "paid": true, "items": ["a", "b"], "meta": ["k": 1], "none": nil]
        let m = try message(content, androidTarget)
        #expect(m["notification"] == ["title": "Order shipped", "body": "On its way", "image": "https://cdn.example.com/a.png"])
        #expect(m["data"] == ["orderId": "A-1", "count": "3", "paid": "true", "items": #"["a","b"]"#,
                              "meta": #"{"k":1}"#, "none": "null", "url": "https://example.com/track"])
        #expect(m["android"] == ["collapse_key": "order-1", "priority": "HIGH", "ttl": "3600s",
                                 "notification": ["channel_id": "orders", "icon": "ic_ship", "color": "#ff0000",
                                                  "sound": "default", "tag": "order-1"]])
        #expect(m["apns"] == nil)
        #expect(m["webpush"] == nil)
    }

    @Test func iosTokenGetsTheAPNsPayloadAnAPNsSendWouldCarry() throws {
        var content = PushContent(title: "Hi", body: "there")
        content.ios.badge = 2
        content.ios.sound = PushSound(name: "default")
        content.headers.collapseID = "c1"
        content.headers.expiration = .after(seconds: 3600)
        content.data = ["orderId": "A-1", "count": 3]
        let target = FCMTarget.token("tok:APA91b", platform: .ios)
        let m = try message(content, target)
        let apnsPayload = try APNsPayload.object(for: content, pushType: .alert, sendTime: options.sendTime)
        #expect(m["apns"]?["payload"] == apnsPayload)
        #expect(m["apns"]?["payload"]?["count"] == 3)  // typed, as over APNs
        #expect(m["apns"]?["headers"] == ["apns-push-type": "alert", "apns-priority": "10",
                                          "apns-expiration": "1800003600", "apns-collapse-id": "c1"])
        #expect(m["notification"] == nil)
        #expect(m["data"] == nil)
        #expect(m["android"] == nil)
    }

    @Test func iosBackgroundPushKeepsAPNsRules() throws {
        var content = PushContent()
        content.ios.contentAvailable = true
        let m = try message(content, .token("t", platform: .ios))
        #expect(m["apns"]?["headers"]?["apns-push-type"] == "background")
        #expect(m["apns"]?["headers"]?["apns-priority"] == "5")
        content.headers.priority = 10
        #expect(fcmError { _ = try message(content, .token("t", platform: .ios)) }?.code == "apns/bad-priority")
    }

    @Test func webTokenGetsTheWebpushBlock() throws {
        var content = PushContent(title: "Hi", body: "there", actionURL: "https://example.com/x")
        content.web.icon = "https://cdn/icon.png"
        content.web.badge = "https://cdn/badge.png"
        content.web.image = "https://cdn/image.png"
        content.web.requireInteraction = true
        content.web.actions = [["action": "open", "title": "Open"]]
        content.web.tag = "t1"
        content.web.renotify = true
        content.headers.collapseID = "order-1"
        content.headers.priority = 10
        content.android.ttl = 60
        let m = try message(content, .token("web:APA91b", platform: .web))
        #expect(m["webpush"] == [
            "headers": ["TTL": "60", "Urgency": "high", "Topic": "order-1"],
            "notification": ["title": "Hi", "body": "there", "icon": "https://cdn/icon.png", "badge": "https://cdn/badge.png",
                             "image": "https://cdn/image.png", "requireInteraction": true,
                             "actions": [["action": "open", "title": "Open"]], "tag": "t1", "renotify": true],
            "fcm_options": ["link": "https://example.com/x"],
        ])
        #expect(m["android"] == nil)
    }

    @Test func topicsAndConditionsCarryEveryBlock() throws {
        let content = PushContent(title: "News", body: "today", data: ["k": "v"])
        let topic = try FCMTarget.channel(ChannelRecipient(channel: "/topics/news"))
        #expect(topic == .topic("news"))
        let m = try message(content, topic)
        #expect(m["android"] != nil)
        #expect(m["webpush"] != nil)
        #expect(m["apns"]?["payload"]?["k"] == nil)  // data travels in message.data, which FCM adds beside aps
        #expect(m["data"] == ["k": "v"])
        let condition = try FCMTarget.channel(ChannelRecipient(channel: "'dogs' in topics && 'cats' in topics"))
        #expect(condition == .condition("'dogs' in topics && 'cats' in topics"))
        #expect(fcmError { _ = try FCMTarget.channel(ChannelRecipient(channel: "bad topic!")) }?.code == "fcm/invalid-target")
        #expect(fcmError { _ = try FCMTarget.channel(ChannelRecipient(channel: "'a' or 'b'")) }?.code == "fcm/invalid-target")
    }

    @Test func conditionsFollowFCMGrammarAndTopicLimit() throws {
        let accepted = [
            "'a' in topics",
            "'dogs' in topics && ('cats' in topics || 'birds' in topics)",
            "!('a' in topics) && !'b' in topics",
            "'a' in topics || 'b' in topics || 'c' in topics || 'd' in topics || 'e' in topics",
            "  (('a-1_b.c~d%2' in topics))  ",
        ]
        for text in accepted {
            #expect(try FCMTarget.channel(ChannelRecipient(channel: text)) == .condition(text), "\(text)")
        }
        let refused = [
            "'a' in topics || 'b' in topics || 'c' in topics || 'd' in topics || 'e' in topics || 'f' in topics",
            "'a' in topics &&",            // ends where a term is expected
            "'a' in topics 'b' in topics",  // no operator
            "('a' in topics",              // unbalanced
            "'a' in topics)",
            "'bad topic' in topics",       // not a topic name
            "'a' intopics",
            "'a' in topic",
            "'a' in topics & 'b' in topics",
            "'' in topics",
            "'a",
            "'" + String(repeating: "a", count: 4100) + "' in topics",
        ]
        for text in refused {
            #expect(fcmError { _ = try FCMTarget.channel(ChannelRecipient(channel: text)) }?.code == "fcm/invalid-target",
                    "\(text.prefix(80))")
        }
    }

    @Test func collapseIdMapsToEveryPlatform() throws {
        var content = PushContent(title: "x")
        content.headers.collapseID = "order-7"
        let m = try message(content, .topic("news"))
        #expect(m["android"]?["collapse_key"] == "order-7")
        #expect(m["apns"]?["headers"]?["apns-collapse-id"] == "order-7")
        #expect(m["webpush"]?["headers"]?["Topic"] == "order-7")
    }

    @Test func reservedDataKeysAreRefused() {
        for key in ["from", "gcm.notification.x", "google.c.a", "Google", "message_type"] {
            let content = PushContent(title: "x", data: [key: "v"])
            #expect(fcmError { _ = try message(content, androidTarget) }?.code == "fcm/reserved-data-key", "\(key)")
            #expect(fcmError { _ = try message(content, .token("t", platform: .ios)) }?.code == "fcm/reserved-data-key")
        }
        #expect(!FCMMessage.isReservedDataKey("fromage"))
    }

    @Test func androidPriorityMustBeLowercaseNormalOrHigh() throws {
        var content = PushContent(title: "x")
        content.android.priority = "HIGH"
        #expect(fcmError { _ = try message(content, androidTarget) }?.code == "push/invalid-priority")
        content.android.priority = "normal"
        #expect(try message(content, androidTarget)["android"]?["priority"] == "NORMAL")
        content.android.priority = nil
        content.headers.priority = 5
        #expect(try message(content, androidTarget)["android"]?["priority"] == "NORMAL")
    }

    @Test func ttlFromExpirationAndItsRange() throws {
        var content = PushContent(title: "x")
        content.headers.expiration = .at(epochSeconds: 1_800_000_600)
        #expect(try message(content, androidTarget)["android"]?["ttl"] == "600s")
        content.headers.expiration = .immediately
        #expect(try message(content, androidTarget)["android"]?["ttl"] == "0s")
        content.android.ttl = 2_419_201
        #expect(fcmError { _ = try message(content, androidTarget) }?.code == "fcm/invalid-ttl")
    }

    @Test func nativeMessages() throws {
        var content = PushContent()
        content.nativePayload = ["message": ["data": ["a": "1"], "android": ["priority": "HIGH", "ttl": "30s"]]]
        #expect(try message(content, androidTarget) == ["data": ["a": "1"], "android": ["priority": "HIGH", "ttl": "30s"]])
        content.nativePayload = ["notification": ["title": "t"]]
        #expect(try message(content, androidTarget) == ["notification": ["title": "t"]])
        content.nativePayload = ["aps": ["alert": "hi"], "k": 1]
        #expect(try message(content, .token("t", platform: .ios)) == ["apns": ["payload": ["aps": ["alert": "hi"], "k": 1]]])
        #expect(fcmError { _ = try message(content, androidTarget) }?.code == "fcm/invalid-message")
        content.nativePayload = ["token": "x", "data": [:]]
        #expect(fcmError { _ = try message(content, androidTarget) }?.code == "fcm/invalid-message")
        content.nativePayload = ["data": ["n": 1]]
        #expect(fcmError { _ = try message(content, androidTarget) }?.code == "fcm/invalid-message")
        content.nativePayload = ["data": ["google.x": "1"]]
        #expect(fcmError { _ = try message(content, androidTarget) }?.code == "fcm/reserved-data-key")
        content.nativePayload = ["android": ["priority": "high"]]
        #expect(fcmError { _ = try message(content, androidTarget) }?.code == "push/invalid-priority")
        content.nativePayload = ["android": ["ttl": 30]]
        #expect(fcmError { _ = try message(content, androidTarget) }?.code == "fcm/invalid-ttl")
        content.nativePayload = ["nonsense": 1]
        #expect(fcmError { _ = try message(content, androidTarget) }?.code == "fcm/invalid-message")
    }

    @Test func bodyPutsTheTargetFirst() {
        let message = JSONValue.object(["data": ["a": "1"]]).serialized()
        let body = FCMMessage.body(message: message, target: .token("t\"1", platform: .android), validateOnly: false)
        #expect(String(decoding: body, as: UTF8.self) == #"{"message":{"token":"t\"1","data":{"a":"1"}}}"#)
        let dry = FCMMessage.body(message: Array("{}".utf8), target: .topic("news"), validateOnly: true)
        #expect(String(decoding: dry, as: UTF8.self) == #"{"validate_only":true,"message":{"topic":"news"}}"#)
    }

    /// A registration token's body is spliced (shared head and tail around the token, no array per token) and
    /// holds exactly `body`'s bytes; a target that needs a JSON escape, a topic and a condition are plain bytes.
    @Test func requestBodyIsSplicedAroundValidTokensOnly() {
        let messages = [JSONValue.object(["data": ["a": "1"], "android": ["priority": "high"]]).serialized(),
                        Array("{}".utf8)]
        let targets: [FCMTarget] = [.token("abc:DEF-12_x.y", platform: .android), .token("t\"1", platform: .android),
                                    .token("line\u{2028}", platform: .web), .topic("news"), .condition("'a' in topics")]
        for bytes in messages {
            let message = FCMMessage.Encoded(bytes)
            for target in targets {
                for validateOnly in [false, true] {
                    let body = FCMMessage.requestBody(message, target: target, validateOnly: validateOnly)
                    #expect(body.bytes == FCMMessage.body(message: bytes, target: target, validateOnly: validateOnly))
                    let spliced = if case .spliced = body { true } else { false }
                    #expect(spliced == (target == .token("abc:DEF-12_x.y", platform: .android)))
                }
            }
        }
    }

}

@Suite struct FCMPrepareTests {
    func provider(validateOnly: Bool = false) throws -> FCMProvider {
        let unused = ScriptedTransport { _ in .failure(NorqError(.transportFailed, "unused")) }
        return try FCMProvider(name: "fcm-eu", configuration: try demoConfiguration(validateOnly: validateOnly),
                               policy: DeliveryPolicy(), logger: .init(label: "t"), clock: TestWallClock().clock,
                               transport: unused, tokenTransport: nil)
    }

    @Test func payloadLimitIsCheckedBeforeSending() throws {
        let fcm = try provider()
        let token = PushToken(token: "tok:APA91b", platform: .android)
        let fits = PushContent(title: "x", body: String(repeating: "a", count: 3900))
        let request = try fcm.prepare(fits, for: token, options: SendOptions())
        #expect(request.payloadLimit == 4096)
        let tooBig = PushContent(title: "x", body: String(repeating: "a", count: 4100))
        #expect(fcmError { _ = try fcm.prepare(tooBig, for: token, options: SendOptions()) }?.code == "fcm/payload-too-large")
    }

    /// Topic and condition messages have FCM's smaller limit, 2,048 bytes: a message that fits a token does not
    /// fit a topic.
    @Test func topicAndConditionMessagesHaveTheSmallerLimit() throws {
        let fcm = try provider()
        let content = PushContent(title: "x", body: String(repeating: "a", count: 1000))
        let token = PushToken(token: "tok:APA91b", platform: .android)
        #expect(try fcm.prepare(content, for: token, options: SendOptions()).payloadLimit == 4096)
        for channel in ["news", "'dogs' in topics && 'cats' in topics"] {
            let recipient = ChannelRecipient(channel: channel)
            let error = fcmError { _ = try fcm.prepare(content, forChannel: recipient, options: SendOptions()) }
            #expect(error?.code == "fcm/payload-too-large")
            #expect(error?.message.contains("limit of 2048 for a topic or condition message") == true, "\(String(describing: error))")
            let small = PushContent(title: "x", body: "short")
            #expect(try fcm.prepare(small, forChannel: recipient, options: SendOptions()).payloadLimit == 2048)
        }
    }

    @Test func tokensThatAreNotFCMTokensAreRefused() throws {
        let fcm = try provider()
        for bad in ["https://updates.push.services.mozilla.com/wpush/v2/x", "has space", ""] {
            let error = fcmError { _ = try fcm.prepare(PushContent(title: "x"), for: PushToken(token: bad, platform: .android),
                                                       options: SendOptions()) }
            #expect(error?.code == "fcm/invalid-token-format", "\(bad)")
        }
    }

    @Test func validateOnlyAndTopicsThroughPrepare() throws {
        let fcm = try provider(validateOnly: true)
        let request = try fcm.prepare(PushContent(title: "x"), forChannel: ChannelRecipient(channel: "news", provider: "fcm-eu"),
                                      options: SendOptions())
        let body = try JSONValue(parsing: request.body)
        #expect(body["validate_only"] == true)
        #expect(body["message"]?["topic"] == "news")
        #expect(request.header("content-type") == "application/json; charset=UTF-8")
        #expect(fcm.policy.idempotency.requestIDHeader == nil)
    }

    @Test func repeatedContentIsEncodedOncePerPlatform() throws {
        let fcm = try provider()
        let options = SendOptions(sendTime: 1_800_000_000, contentID: 42)
        let a = try fcm.prepare(PushContent(title: "x"), for: PushToken(token: "a:1", platform: .android), options: options)
        let b = try fcm.prepare(PushContent(title: "x"), for: PushToken(token: "b:2", platform: .android), options: options)
        let ios = try fcm.prepare(PushContent(title: "x"), for: PushToken(token: "c:3", platform: .ios), options: options)
        #expect(try JSONValue(parsing: a.body)["message"]?["token"] == "a:1")
        #expect(try JSONValue(parsing: b.body)["message"]?["token"] == "b:2")
        #expect(try JSONValue(parsing: ios.body)["message"]?["apns"] != nil)
        #expect(try JSONValue(parsing: b.body)["message"]?["apns"] == nil)
    }
}

@Suite struct FCMCollapseIDTests {
    @Test func collapseIDIsReadFromThePreparedMessage() throws {
        let unused = ScriptedTransport { _ in .failure(NorqError(.transportFailed, "unused")) }
        let fcm = try FCMProvider(name: "fcm", configuration: try demoConfiguration(), policy: DeliveryPolicy(),
                                  logger: .init(label: "t"), clock: TestWallClock().clock, transport: unused,
                                  tokenTransport: nil)
        var content = PushContent(title: "x")
        #expect(fcm.collapseID(of: try fcm.prepare(content, for: PushToken(token: "a:1", platform: .android),
                                                   options: SendOptions())) == nil)
        content.headers.collapseID = "order-1"
        for platform in [Platform.android, .ios, .web] {
            let request = try fcm.prepare(content, for: PushToken(token: "a:1", platform: platform), options: SendOptions())
            #expect(fcm.collapseID(of: request) == "order-1", "\(platform)")
        }
    }
}
