@testable import NorqFCM
import NorqCore
import Testing

@Suite struct FCMResponseTableTests {
    func classify(_ status: Int, _ body: String) -> (ResponseClass, String?, NorqError.Code?) {
        let parsed = FCMResponseTable.ErrorBody(parsing: Array(body.utf8))
        return (FCMResponseTable.classify(status: status, body: parsed), FCMResponseTable.reason(parsed),
                FCMResponseTable.code(status: status, body: parsed))
    }

    @Test func errorCodeComesBeforeTheCanonicalStatusAndTheHTTPStatus() {
        let unregistered = classify(404, fcmErrorBody(status: 404, canonical: "NOT_FOUND", errorCode: "UNREGISTERED"))
        #expect(unregistered.0 == .tokenInvalid)
        #expect(unregistered.1 == "UNREGISTERED")
        #expect(unregistered.2 == "fcm/unregistered")
        // The errorCode decides even when the HTTP status says otherwise.
        #expect(classify(400, fcmErrorBody(status: 400, canonical: "INVALID_ARGUMENT", errorCode: "UNREGISTERED")).0 == .tokenInvalid)
    }

    @Test func everyDocumentedClass() {
        let expected: [(String, Int, ResponseClass)] = [
            ("INVALID_ARGUMENT", 400, .permanent), ("SENDER_ID_MISMATCH", 403, .tokenQuarantined),
            ("QUOTA_EXCEEDED", 429, .retryAfterDelay), ("UNAVAILABLE", 503, .retryable), ("INTERNAL", 500, .retryable),
            ("THIRD_PARTY_AUTH_ERROR", 401, .credentials), ("APNS_AUTH_ERROR", 401, .credentials),
            ("UNSPECIFIED_ERROR", 500, .retryable),
        ]
        for (code, status, klass) in expected {
            #expect(classify(status, fcmErrorBody(status: status, canonical: "X", errorCode: code)).0 == klass, "\(code)")
            #expect(FCMResponseTable.entry(for: code)?.status == status)
        }
        #expect(FCMResponseTable.entry(for: "SENDER_ID_MISMATCH")?.code == "fcm/sender-id-mismatch")
    }

    @Test func invalidArgumentIsATokenProblemOnlyWhenItNamesTheToken() {
        let plain = fcmErrorBody(status: 400, canonical: "INVALID_ARGUMENT", errorCode: "INVALID_ARGUMENT",
                                 message: "Message is too big")
        #expect(classify(400, plain).0 == .permanent)
        let token = fcmErrorBody(status: 400, canonical: "INVALID_ARGUMENT", errorCode: "INVALID_ARGUMENT",
                                 message: "The registration token is not a valid FCM registration token")
        #expect(classify(400, token).0 == .tokenInvalid)
        let field = #"{"error":{"code":400,"message":"Invalid value","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"INVALID_ARGUMENT"},{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.token","description":"Invalid registration token"}]}]}}"#
        #expect(classify(400, field).0 == .tokenInvalid)
    }

    @Test func unknownCodesAreKeptAndClassifiedByStatus() {
        let unknown = classify(503, fcmErrorBody(status: 503, canonical: "UNAVAILABLE", errorCode: "SHINY_NEW_ERROR"))
        #expect(unknown.0 == .retryable)
        #expect(unknown.1 == "SHINY_NEW_ERROR")
        #expect(unknown.2 == "fcm/unknown-error-code")
        let noCode = classify(401, fcmErrorBody(status: 401, canonical: "UNAUTHENTICATED"))
        #expect(noCode.0 == .credentials)
        #expect(noCode.1 == "UNAUTHENTICATED")
        #expect(noCode.2 == "fcm/no-error-code")
        #expect(classify(404, "not json").0 == .permanent)  // never token-invalid without FCM saying so
        #expect(classify(429, "").0 == .retryAfterDelay)
        #expect(classify(502, "<html>").0 == .retryable)
        #expect(classify(200, "{}").0 == .delivered)
    }

    @Test func retryAfterDeltaDateAndTheQuotaFloor() {
        let now: Int64 = 784_111_777  // Sun, 06 Nov 1994 08:49:37 GMT
        #expect(FCMRetryAfter.httpDate("Sun, 06 Nov 1994 08:49:37 GMT") == now)
        #expect(FCMRetryAfter.parse("Sun, 06 Nov 1994 08:50:07 GMT", now: now) == .seconds(30))
        #expect(FCMRetryAfter.parse("Sun, 06 Nov 1994 08:00:00 GMT", now: now) == .zero)
        #expect(FCMRetryAfter.parse("120", now: now) == .seconds(120))
        #expect(FCMRetryAfter.parse("soon", now: now) == nil)
        #expect(FCMResponseTable.retryDelay(retryAfter: "10", errorCode: "UNAVAILABLE", now: now) == .seconds(10))
        #expect(FCMResponseTable.retryDelay(retryAfter: nil, errorCode: "UNAVAILABLE", now: now) == nil)
        #expect(FCMResponseTable.retryDelay(retryAfter: "10", errorCode: "QUOTA_EXCEEDED", now: now) == .seconds(60))
        #expect(FCMResponseTable.retryDelay(retryAfter: nil, errorCode: "QUOTA_EXCEEDED", now: now) == .seconds(60))
        #expect(FCMResponseTable.retryDelay(retryAfter: "600", errorCode: "QUOTA_EXCEEDED", now: now) == .seconds(600))
    }

    @Test func messageNameOfASuccessBody() {
        func name(_ text: String) -> String? { FCMResponseTable.messageName(in: Array(text.utf8)) }
        #expect(name(#"{"name":"projects/p/messages/0:1%a"}"#) == "projects/p/messages/0:1%a")
        #expect(name("{\n  \"name\": \"projects/p/messages/1\"\n}\n") == "projects/p/messages/1")
        // Escapes and unusual shapes go through the full parser.
        #expect(name(#"{"name":"projects/p/messages/a\/b"}"#) == "projects/p/messages/a/b")
        #expect(name(#"{"other":{"name":"inner"},"name":"outer"}"#) == "outer")
        #expect(name(#"{"other":1}"#) == nil)
        #expect(name("not json") == nil)
        #expect(name("") == nil)
    }
}
