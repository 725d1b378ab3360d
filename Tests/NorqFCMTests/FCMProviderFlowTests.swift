import Foundation
@testable import NorqFCM
import NorqCore
import Logging
import Synchronization
import Testing

/// The provider's delivery flow over a scripted transport (the TLS end-to-end tests use the emulator).
@Suite struct FCMProviderFlowTests {
    let android = PushToken(token: "fcm-token-android:APA91b" + String(repeating: "x", count: 20), platform: .android)

    func provider(api: ScriptedTransport, token: ScriptedTransport, clock: TestWallClock = TestWallClock())
        throws -> FCMProvider {
        try FCMProvider(name: "fcm", configuration: try demoConfiguration(), policy: DeliveryPolicy(),
                        logger: Logger(label: "test"), clock: clock.clock, transport: api, tokenTransport: token)
    }

    func tokenEndpoint() -> ScriptedTransport {
        let issued = Atomic<Int>(0)
        return ScriptedTransport { request in
            let n = issued.add(1, ordering: .relaxed).newValue
            #expect(request.path == "/token")
            #expect(request.authority == "oauth2.googleapis.com")
            return .success(jsonResponse(200, #"{"access_token":"token-\#(n)","expires_in":3600,"token_type":"Bearer"}"#))
        }
    }

    @Test func deliversWithTheBearerTokenAndReadsTheMessageName() async throws {
        let token = tokenEndpoint()
        let api = ScriptedTransport { request in
            #expect(request.headers.contains(HTTPHeader("authorization", "Bearer token-1")))
            return .success(jsonResponse(200, #"{"name":"projects/norq-demo/messages/0:123"}"#))
        }
        let fcm = try provider(api: api, token: token)
        let request = try fcm.prepare(PushContent(title: "Hi", body: "there"), for: android, options: SendOptions())
        #expect(request.path == "/v1/projects/norq-demo/messages:send")
        #expect(request.authority == "fcm.googleapis.com")
        #expect(request.displayHeaders.first { $0.name == "authorization" }?.value.contains("redacted") == true)
        for _ in 0..<3 {
            let response = try await fcm.deliver(request, deadline: .now + .seconds(5))
            #expect(response.classification == .delivered)
            #expect(response.messageID == "projects/norq-demo/messages/0:123")
        }
        #expect(token.count == 1)
        #expect(api.count == 3)
    }

    @Test func unauthenticatedRenewsOnceAndSendsAgain() async throws {
        let token = tokenEndpoint()
        let api = ScriptedTransport { request in
            if request.headers.contains(HTTPHeader("authorization", "Bearer token-1")) {
                return .success(jsonResponse(401, fcmErrorBody(status: 401, canonical: "UNAUTHENTICATED")))
            }
            return .success(jsonResponse(200, #"{"name":"projects/norq-demo/messages/1"}"#))
        }
        let fcm = try provider(api: api, token: token)
        let request = try fcm.prepare(PushContent(title: "Hi"), for: android, options: SendOptions())
        let response = try await fcm.deliver(request, deadline: .now + .seconds(5))
        #expect(response.classification == .delivered)
        #expect(token.count == 2)
        #expect(api.count == 2)
    }

    @Test func repeatedUnauthenticatedIsAProviderProblemNotAnInvalidToken() async throws {
        let token = tokenEndpoint()
        let api = ScriptedTransport { _ in .success(jsonResponse(401, fcmErrorBody(status: 401, canonical: "UNAUTHENTICATED"))) }
        let fcm = try provider(api: api, token: token)
        let request = try fcm.prepare(PushContent(title: "Hi"), for: android, options: SendOptions())
        let response = try await fcm.deliver(request, deadline: .now + .seconds(5))
        #expect(response.classification == .credentials)
        #expect(response.reason == "UNAUTHENTICATED")
        #expect(api.count == 2)  // one resend, not a loop
        #expect(token.count == 2)
    }

    @Test func thirdPartyAuthErrorIsNotRetriedWithANewToken() async throws {
        let token = tokenEndpoint()
        let api = ScriptedTransport { _ in
            .success(jsonResponse(401, fcmErrorBody(status: 401, canonical: "UNAUTHENTICATED", errorCode: "THIRD_PARTY_AUTH_ERROR")))
        }
        let fcm = try provider(api: api, token: token)
        let ios = PushToken(token: "ios-fcm-token:APA91bxyz", platform: .ios)
        let request = try fcm.prepare(PushContent(title: "Hi"), for: ios, options: SendOptions())
        let response = try await fcm.deliver(request, deadline: .now + .seconds(5))
        #expect(response.classification == .credentials)
        #expect(response.reason == "THIRD_PARTY_AUTH_ERROR")
        #expect(api.count == 1)
        #expect(token.count == 1)
    }

    @Test func tokenEndpointRefusalFailsTheDeliveryAsNotProcessed() async throws {
        let token = ScriptedTransport { _ in .success(jsonResponse(400, #"{"error":"invalid_grant"}"#)) }
        let api = ScriptedTransport { _ in .success(jsonResponse(200, "{}")) }
        let fcm = try provider(api: api, token: token)
        let request = try fcm.prepare(PushContent(title: "Hi"), for: android, options: SendOptions())
        await #expect(throws: NorqError.self) { _ = try await fcm.deliver(request, deadline: .now + .seconds(5)) }
        do {
            _ = try await fcm.deliver(request, deadline: .now + .seconds(5))
        } catch {
            #expect(error.code == "fcm/token-request-failed")
            #expect(!error.possiblyProcessed)
        }
        #expect(api.count == 0)
    }

    @Test func quotaExceededIsRetriedAfterAtLeastAMinute() async throws {
        let token = tokenEndpoint()
        let api = ScriptedTransport { _ in
            .success(jsonResponse(429, fcmErrorBody(status: 429, canonical: "RESOURCE_EXHAUSTED", errorCode: "QUOTA_EXCEEDED"),
                                  headers: [HTTPHeader("retry-after", "5")]))
        }
        let fcm = try provider(api: api, token: token)
        let request = try fcm.prepare(PushContent(title: "Hi"), for: android, options: SendOptions())
        let response = try await fcm.deliver(request, deadline: .now + .seconds(5))
        #expect(response.classification == .retryAfterDelay)
        #expect(response.retryAfter == .seconds(60))
        let decision = RetryPolicy.default.decision(afterAttempt: 1, failure: DeliveryFailure(response),
                                                    remaining: .seconds(120), randomUnit: 0.5)
        #expect(decision == .retry(after: .seconds(60)))
        // Within a 30 s send deadline it is not retried sooner: the router gives up on the deadline.
        #expect(RetryPolicy.default.decision(afterAttempt: 1, failure: DeliveryFailure(response), remaining: .seconds(30),
                                             randomUnit: 0.5) == .giveUp(.deadline))
    }
}
