import Testing
@testable import NorqCore

/// A prepared request's body held spliced (shared parts around one string) reads, compares and hashes as its
/// joined bytes.
@Suite struct PreparedRequestBodyTests {
    func request(_ body: RequestBody) -> PreparedRequest {
        PreparedRequest(method: "POST", authority: "example.com", path: "/send", headers: [HTTPHeader("a", "b")],
                        requestBody: body, provider: "p", target: .token(PushToken(token: "t", platform: .android)))
    }

    @Test func splicedBodyIsItsJoinedBytes() {
        let spliced = RequestBody.spliced(head: Array("{\"t\":\"".utf8), middle: "tok-é", tail: Array("\"}".utf8))
        let joined = Array("{\"t\":\"tok-é\"}".utf8)
        #expect(spliced.bytes == joined && spliced.count == joined.count)
        let a = request(spliced)
        let b = request(.bytes(joined))
        #expect(a.body == joined)
        #expect(a == b && a.hashValue == b.hashValue)
        #expect(a != request(.bytes(Array("{}".utf8))))
        var c = a
        c.body = Array("{}".utf8)  // setting the bytes replaces the spliced body
        #expect(c.body == Array("{}".utf8) && c.requestBody.count == 2)
        #expect(c != a)
    }
}
