import Foundation
@testable import NorqTesting
import Crypto
import _CryptoExtras
import Testing

/// The FCM emulator's validation, as pure functions (the end-to-end tests in NorqFCMTests drive it over TLS).
@Suite("FCM emulator rules")
struct FCMEmulatorRulesTests {
    func check(_ json: String) -> (status: Int, errorCode: String?) {
        switch FCMEmulatorRules.validate(body: Array(json.utf8)) {
        case .success: return (200, nil)
        case .failure(let answer): return (answer.status, answer.errorCode)
        }
    }

    @Test func validMessages() {
        #expect(check(#"{"message":{"token":"t:1","data":{"a":"1"},"android":{"priority":"HIGH","ttl":"30s"}}}"#).status == 200)
        #expect(check(#"{"validate_only":true,"message":{"topic":"news","notification":{"title":"x"}}}"#).status == 200)
        #expect(check(#"{"message":{"condition":"'a' in topics","apns":{"payload":{"aps":{}}}}}"#).status == 200)
        // 2,100 bytes of data fit a token's limit (4,096), not a topic's (2,048).
        #expect(check(#"{"message":{"token":"t","data":{"big":"\#(String(repeating: "x", count: 2100))"}}}"#).status == 200)
    }

    @Test func refusalsAreInvalidArgument() {
        let refused = [
            #"not json"#,
            #"{"message":{"data":{"a":"1"}}}"#,                                   // no target
            #"{"message":{"token":"t","topic":"x"}}"#,                            // two targets
            #"{"message":{"token":"t","data":{"n":1}}}"#,                         // non-string data
            #"{"message":{"token":"t","data":{"from":"x"}}}"#,                    // reserved key
            #"{"message":{"token":"t","data":{"google.x":"1"}}}"#,
            #"{"message":{"token":"t","android":{"priority":"high"}}}"#,          // lowercase priority
            #"{"message":{"token":"t","android":{"ttl":"30"}}}"#,                 // ttl without s
            #"{"message":{"token":"t","android":{"ttl":"9999999s"}}}"#,           // over four weeks
            #"{"message":{"token":"t","bogus":1}}"#,                              // unknown field
            #"{"message":{"token":"t"},"extra":1}"#,
            #"{"message":{"token":"t","data":{"big":"\#(String(repeating: "x", count: 4100))"}}}"#,  // too big
            #"{"message":{"topic":"news","data":{"big":"\#(String(repeating: "x", count: 2100))"}}}"#,  // too big for a topic
            #"{"message":{"condition":"'a' in topics","data":{"big":"\#(String(repeating: "x", count: 2100))"}}}"#,
        ]
        for body in refused {
            let result = check(body)
            #expect(result.status == 400, "\(body.prefix(60))")
            #expect(result.errorCode == "INVALID_ARGUMENT", "\(body.prefix(60))")
        }
    }

    @Test func tokenRequestsAreVerifiedAgainstTheServiceAccountKey() throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let keys = ["sa@p.iam.gserviceaccount.com": key.publicKey]
        func assertion(iss: String = "sa@p.iam.gserviceaccount.com", aud: String = "https://127.0.0.1:1/token",
                       scope: String = "https://www.googleapis.com/auth/firebase.messaging", iat: Int64 = 1000,
                       exp: Int64 = 4600, signer: _RSA.Signing.PrivateKey? = nil) throws -> [UInt8] {
            func b64(_ data: Data) -> String {
                data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                    .replacingOccurrences(of: "=", with: "")
            }
            let header = b64(Data(#"{"alg":"RS256","typ":"JWT"}"#.utf8))
            let claims = b64(Data(#"{"iss":"\#(iss)","scope":"\#(scope)","aud":"\#(aud)","iat":\#(iat),"exp":\#(exp)}"#.utf8))
            let input = Data("\(header).\(claims)".utf8)
            let signature = try (signer ?? key).signature(for: input, padding: .insecurePKCS1v1_5)
            let jwt = "\(header).\(claims).\(b64(signature.rawRepresentation))"
            return Array("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(jwt)".utf8)
        }
        func verdict(_ body: [UInt8], now: Int64 = 1010) -> String {
            switch FCMEmulatorRules.verifyTokenRequest(body: body, keys: keys, now: now, futureSkew: 60) {
            case .success: "ok"
            case .failure(let answer): answer.errorCode ?? "?"
            }
        }
        #expect(verdict(try assertion()) == "ok")
        #expect(verdict(try assertion(signer: try _RSA.Signing.PrivateKey(keySize: .bits2048))) == "invalid_grant")
        #expect(verdict(try assertion(iss: "other@p.iam.gserviceaccount.com")) == "invalid_client")
        #expect(verdict(try assertion(scope: "https://www.googleapis.com/auth/drive")) == "invalid_scope")
        #expect(verdict(try assertion(aud: "https://example.com/")) == "invalid_grant")
        #expect(verdict(try assertion(), now: 5000) == "invalid_grant")           // expired
        #expect(verdict(try assertion(iat: 1000, exp: 9000)) == "invalid_grant")  // longer than an hour
        #expect(verdict(Array("grant_type=password".utf8)) == "unsupported_grant_type")
    }
}
