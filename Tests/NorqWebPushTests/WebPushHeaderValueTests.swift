import NorqCore
import Testing
@testable import NorqWebPush

/// Issue 30: the collapse id becomes the `Topic` header; one that cannot be a header value is refused by `prepare`
/// as the APNs and FCM providers refuse it, so a template fails the same way whichever provider a token goes to.
@Suite struct WebPushHeaderValueTests {
    @Test("a CR/LF collapse id is template/invalid-header-value naming the header and the template")
    func crlfCollapseID() throws {
        let subscriber = TestSubscriber()
        let token = subscriber.token("https://push.example.net/push/abc")
        var content = PushContent(title: "Invoice", templateName: "invoice")
        content.headers.collapseID = "inv-A-17\r\napns-topic: evil"
        do {
            _ = try WebPushPrepareTests.provider().prepare(content, for: token, options: SendOptions())
            Issue.record("the collapse id with CR/LF was accepted")
        } catch {
            #expect(error.code == .invalidHeaderValue)
            #expect(error.message.contains("apns-collapse-id"))
            #expect(error.message.contains("\"invoice\""))
        }
        content.headers.collapseID = "inv-A-17"
        let request = try WebPushPrepareTests.provider().prepare(content, for: token, options: SendOptions())
        #expect(request.header("topic") == "inv-A-17")
    }
}
