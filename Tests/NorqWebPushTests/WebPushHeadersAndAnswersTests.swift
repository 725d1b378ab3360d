import NorqCore
import Testing
@testable import NorqWebPush

@Suite struct WebPushHeadersAndAnswersTests {
    @Test func ttl() throws {
        #expect(try WebPushHeaders.ttl(expiration: nil, sendTime: 100, defaultTTL: 60) == 60)
        #expect(try WebPushHeaders.ttl(expiration: .immediately, sendTime: 100, defaultTTL: 60) == 0)
        #expect(try WebPushHeaders.ttl(expiration: .after(seconds: 3600), sendTime: 100, defaultTTL: 60) == 3600)
        #expect(try WebPushHeaders.ttl(expiration: .at(epochSeconds: 700), sendTime: 100, defaultTTL: 60) == 600)
        #expect(try WebPushHeaders.ttl(expiration: .at(epochSeconds: 50), sendTime: 100, defaultTTL: 60) == 0)
        for bad: PushExpiration in [.after(seconds: -1), .after(seconds: Int64(Int32.max) + 1)] {
            do {
                _ = try WebPushHeaders.ttl(expiration: bad, sendTime: 0, defaultTTL: 60)
                Issue.record("\(bad) accepted")
            } catch {
                #expect(error.code == .webPushInvalidTTL)
            }
        }
    }

    @Test func urgency() {
        #expect(WebPushHeaders.urgency(priority: nil) == nil)
        #expect(WebPushHeaders.urgency(priority: 10) == "high")
        #expect(WebPushHeaders.urgency(priority: 5) == "normal")
        #expect(WebPushHeaders.urgency(priority: 1) == "low")
        #expect(WebPushHeaders.urgency(priority: 0) == "very-low")
    }

    @Test func topic() {
        #expect(WebPushHeaders.topic(collapseID: "order-42") == "order-42")
        let long = WebPushHeaders.topic(collapseID: "order 42 of customer 1234567890 with spaces")
        #expect(long.count == 32)
        #expect(Base64URL.isURLSafeAlphabet(long))
        #expect(long == WebPushHeaders.topic(collapseID: "order 42 of customer 1234567890 with spaces"))
        #expect(long != WebPushHeaders.topic(collapseID: "order 43 of customer 1234567890 with spaces"))
        #expect(WebPushHeaders.topic(collapseID: "a.b").count == 32)  // "." is not in the alphabet
        #expect(WebPushHeaders.topic(collapseID: String(repeating: "a", count: 32)) == String(repeating: "a", count: 32))
        #expect(WebPushHeaders.topic(collapseID: String(repeating: "a", count: 33)) != String(repeating: "a", count: 32))
    }

    @Test func answerTable() {
        let created = WebPushResponseTable.interpret(
            status: 201, headers: [HTTPHeader("location", "https://push.example.net/m/abc")], body: [], now: 0)
        #expect(created.classification == .delivered)
        #expect(created.messageID == "https://push.example.net/m/abc")
        #expect(WebPushResponseTable.classify(status: 202) == .delivered)
        let gone = WebPushResponseTable.interpret(status: 410, headers: [], body: Array(#"{"errno":106,"error":"Gone"}"#.utf8), now: 0)
        #expect(gone.classification == .tokenInvalid)
        #expect(gone.reason == "Gone")
        #expect(WebPushResponseTable.interpret(status: 404, headers: [], body: [], now: 0).reason == "NotFound")
        #expect(WebPushResponseTable.classify(status: 404) == .tokenInvalid)
        #expect(WebPushResponseTable.classify(status: 413) == .permanent)
        #expect(WebPushResponseTable.classify(status: 400) == .permanent)
        #expect(WebPushResponseTable.classify(status: 401) == .credentials)
        #expect(WebPushResponseTable.classify(status: 403) == .credentials)
        #expect(WebPushResponseTable.classify(status: 301) == .permanent)
        #expect(WebPushResponseTable.classify(status: 429) == .retryAfterDelay)
        #expect(WebPushResponseTable.classify(status: 503) == .retryable)
        let apple = WebPushResponseTable.interpret(status: 403, headers: [], body: Array(#"{"reason":"BadJwtToken"}"#.utf8), now: 0)
        #expect(apple.reason == "BadJwtToken")
        let mozilla = WebPushResponseTable.interpret(
            status: 400, headers: [], body: Array(#"{"code":400,"errno":111,"error":"Bad Request","message":"Missing TTL header"}"#.utf8), now: 0)
        #expect(mozilla.reason == "Missing TTL header")
        #expect(WebPushResponseTable.interpret(status: 400, headers: [], body: Array("bad topic\n".utf8), now: 0).reason == "bad topic")
        #expect(WebPushResponseTable.interpret(status: 413, headers: [], body: [], now: 0).reason == "PayloadTooLarge")
        let limited = WebPushResponseTable.interpret(status: 429, headers: [HTTPHeader("retry-after", "7")], body: [], now: 0)
        #expect(limited.retryAfter == .seconds(7))
        let dated = WebPushResponseTable.interpret(
            status: 503, headers: [HTTPHeader("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")], body: [], now: 1_445_412_470)
        #expect(dated.retryAfter == .seconds(10))
        #expect(WebPushResponseTable.retryAfter("soon", now: 0) == nil)
    }

    @Test func payloadMapping() {
        var content = PushContent(title: "Shipped", body: "On its way", image: "https://cdn.example/hero.png",
                                  actionURL: "https://example.com/track/1")
        content.web.icon = "/icon.png"
        content.web.badge = "/badge.png"
        content.web.tag = "order-1"
        content.web.requireInteraction = true
        content.web.renotify = false
        content.web.actions = [["action": "track", "title": "Track"]]
        content.data = ["orderId": "1"]
        let json = String(decoding: WebPushPayload.encode(content), as: UTF8.self)
        #expect(json == #"{"title":"Shipped","body":"On its way","icon":"/icon.png","image":"https://cdn.example/hero.png","badge":"/badge.png","url":"https://example.com/track/1","tag":"order-1","requireInteraction":true,"renotify":false,"actions":[{"action":"track","title":"Track"}],"data":{"orderId":"1"}}"#)
        content.web.image = "https://cdn.example/web.png"
        #expect(String(decoding: WebPushPayload.encode(content), as: UTF8.self).contains(#""image":"https://cdn.example/web.png""#))
        let native = PushContent(nativePayload: ["anything": ["goes": 1]])
        #expect(String(decoding: WebPushPayload.encode(native), as: UTF8.self) == #"{"anything":{"goes":1}}"#)
        #expect(String(decoding: WebPushPayload.encode(PushContent(title: "t")), as: UTF8.self) == #"{"title":"t"}"#)
    }
}
