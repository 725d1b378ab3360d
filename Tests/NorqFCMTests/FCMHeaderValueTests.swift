import NorqCore
import Testing
@testable import NorqFCM

/// Issue 30: FCM passes the collapse id on as a header (APNs `apns-collapse-id`); a value that cannot be a header is
/// refused by `prepare` as the APNs provider refuses it.
@Suite struct FCMHeaderValueTests {
    @Test("a CR/LF collapse id is template/invalid-header-value naming the header and the template")
    func crlfCollapseID() throws {
        let fcm = try FCMPrepareTests().provider()
        var content = PushContent(title: "Invoice", templateName: "invoice")
        content.headers.collapseID = "inv-A-17\r\napns-topic: evil"
        let token = PushToken(token: "tok:APA91b", platform: .android)
        let error = fcmError { _ = try fcm.prepare(content, for: token, options: SendOptions()) }
        #expect(error?.code == .invalidHeaderValue)
        #expect(error?.message.contains("apns-collapse-id") == true)
        #expect(error?.message.contains("\"invoice\"") == true)
        content.headers.collapseID = "inv-A-17"
        #expect(throws: Never.self) { _ = try fcm.prepare(content, for: token, options: SendOptions()) }
    }
}
