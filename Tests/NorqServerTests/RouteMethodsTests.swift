@testable import NorqServer
import Testing

/// A path of the API asked with a method it does not take is 405 with `Allow`; any other path is 404 (issue 33:
/// schemathesis' unsupported-method check).
@Suite struct RouteMethodsTests {
    @Test func knownPathsGiveTheirMethodsAndOthersNone() {
        #expect(NorqServer.allowedMethods(path: "/v1/validate") == ["POST"])
        #expect(NorqServer.allowedMethods(path: "/v1/sends/0123abcd") == ["GET"])
        #expect(NorqServer.allowedMethods(path: "/v1/channels") == ["GET", "POST"])
        #expect(NorqServer.allowedMethods(path: "/v1/channels/abc%2Fdef") == ["DELETE", "GET"])
        #expect(NorqServer.allowedMethods(path: "/healthz") == ["GET"])
        for path in ["/", "/v1", "/v1/sends/", "/v1/sends/a/b", "/v1/nope", "//v1/sends", "/v1/channels/"] {
            #expect(NorqServer.allowedMethods(path: path) == nil, "\(path)")
        }
    }
}
