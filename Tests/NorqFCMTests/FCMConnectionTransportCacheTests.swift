import NorqCore
@testable import NorqFCM
import NorqHTTP2
import Testing

/// What FCM makes once and reuses: the transport's request head for one header array, and the provider's
/// `[HTTPHeader]` of a response header block the server repeats.
@Suite struct FCMConnectionTransportCacheTests {
    private func transport() throws -> FCMConnectionTransport {
        let configuration = try demoConfiguration()
        return try FCMConnectionTransport(origin: configuration.endpoint, configuration: configuration, connections: 1,
                                          logger: .init(label: "test"))
    }

    private func request(_ headers: [HTTPHeader], path: String = "/v1/projects/norq-demo/messages:send") -> FCMWireRequest {
        FCMWireRequest(method: "POST", authority: "fcm.googleapis.com", path: path, headers: headers, body: [1, 2, 3])
    }

    @Test func theRequestHeadFollowsTheRequest() throws {
        let transport = try transport()
        let headers = FCMAccessToken.requestHeaders(authorization: "Bearer one")
        let first = transport.head(for: request(headers))
        #expect(first.path == "/v1/projects/norq-demo/messages:send")
        #expect(first.fields.map(\.name) == ["content-type", "authorization"])
        #expect(first.fields.last?.indexing == .neverIndexed)
        #expect(transport.head(for: request(headers)) == first)
        // Another token, another path: a new head each time.
        let renewed = transport.head(for: request(FCMAccessToken.requestHeaders(authorization: "Bearer two")))
        #expect(renewed.fields.last?.value == "Bearer two")
        #expect(transport.head(for: request(headers, path: "/other")).path == "/other")
    }

    @Test func responseHeadersAreReusedOnlyForTheSameBlock() throws {
        let transport = try FCMProvider(name: "fcm", configuration: try demoConfiguration(), policy: DeliveryPolicy(),
                                        logger: .init(label: "test"), clock: TestWallClock().clock,
                                        transport: ScriptedTransport { _ in .success(jsonResponse(200, "{}")) },
                                        tokenTransport: nil)
        var response = HTTP2Response(status: 200, headers: [("content-type", "application/json"), ("date", "one")])
        response.fieldsID = 7
        #expect(transport.headers(of: response) == [HTTPHeader("content-type", "application/json"), HTTPHeader("date", "one")])
        // Same id: the remembered array (the fields are not read again).
        var same = HTTP2Response(status: 200, headers: [])
        same.fieldsID = 7
        #expect(transport.headers(of: same).count == 2)
        // Another id, or none: made from the fields.
        var other = HTTP2Response(status: 200, headers: [("date", "two")])
        other.fieldsID = 8
        #expect(transport.headers(of: other) == [HTTPHeader("date", "two")])
        var unknown = HTTP2Response(status: 200, headers: [("x", "y")])
        unknown.fieldsID = 0
        #expect(transport.headers(of: unknown) == [HTTPHeader("x", "y")])
        var zeroAgain = HTTP2Response(status: 200, headers: [])
        zeroAgain.fieldsID = 0
        #expect(transport.headers(of: zeroAgain).isEmpty)
    }
}
