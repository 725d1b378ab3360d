import NorqAPNs
import NorqCore
import Testing

/// Issue 30: a header value made from template data that cannot be written on HTTP/2 (CR, LF, NUL, whitespace at an
/// end) is refused by `prepare`, naming the header and the template: nothing is sent.
@Suite struct APNsHeaderValueTests {
    static let injected = "inv-A-17\r\napns-topic: evil"

    @Test("a CR/LF in apns-collapse-id is template/invalid-header-value, naming the header and the template")
    func crlfCollapseID() throws {
        let provider = try Fixtures.provider()
        var content = PushContent(title: "Invoice", templateName: "invoice")
        content.headers.collapseID = Self.injected
        do {
            _ = try provider.prepare(content, for: Fixtures.iosToken(), options: SendOptions())
            Issue.record("the collapse id with CR/LF was accepted")
        } catch {
            #expect(error.code == .invalidHeaderValue)
            #expect(error.code.rawValue == "template/invalid-header-value")
            #expect(error.message.contains("apns-collapse-id"))
            #expect(error.message.contains("\"invoice\""))
            #expect(error.message.contains("carriage return"))
            #expect(!error.message.contains("evil"), "the value is data: not quoted")
        }
    }

    @Test("the send option's collapse id is checked too; leading or trailing whitespace and NUL are refused",
          arguments: [" lead", "trail\t", "nul\u{0}byte", "lf\nonly"])
    func otherInvalidValues(_ value: String) throws {
        let provider = try Fixtures.provider()
        #expect(throws: NorqError.self) {
            _ = try provider.prepare(PushContent(title: "x"), for: Fixtures.iosToken(),
                                     options: SendOptions(collapseID: value))
        }
    }

    @Test("valid collapse ids still pass (inner spaces and tabs are allowed)")
    func validValues() throws {
        let provider = try Fixtures.provider()
        var content = PushContent(title: "x")
        content.headers.collapseID = "order 17\tshipped"
        let request = try provider.prepare(content, for: Fixtures.iosToken(), options: SendOptions())
        #expect(request.header("apns-collapse-id") == "order 17\tshipped")
    }
}
