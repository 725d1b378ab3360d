import Foundation
import Crypto
import _CryptoExtras
import Logging
import Norq
import NorqAPNs
import NorqCore
@testable import NorqFCM
import NorqTesting
import Synchronization
import Testing

/// A started FCM emulator trusting the demo service account, and the provider configuration pointing at it.
struct FCMEmulatorFixture {
    let emulator: FCMEmulator
    let configuration: FCMConfiguration

    static func start(faults: FCMEmulator.Faults = .init(), tokenLifetime: Duration = .seconds(3600),
                      configure: (inout FCMConfiguration) -> Void = { _ in }) async throws -> FCMEmulatorFixture {
        var emulatorConfiguration = FCMEmulator.Configuration(projectID: "norq-demo", accessTokenLifetime: tokenLifetime,
                                                              faults: faults)
        try emulatorConfiguration.trust(serviceAccountJSON: FCMPaths.demoAccountJSON)
        let emulator = try FCMEmulator(configuration: emulatorConfiguration)
        try await emulator.start()
        var configuration = try demoConfiguration()
        configuration.endpoint = FCMURL(host: "127.0.0.1", port: emulator.port)
        configuration.tokenEndpoint = FCMURL(host: "127.0.0.1", port: emulator.port, path: "/token")
        configuration.additionalTrustRootsPEM = emulator.caCertificatePEM
        configuration.requestTimeout = .seconds(5)
        configure(&configuration)
        return FCMEmulatorFixture(emulator: emulator, configuration: configuration)
    }

    func provider(name: String = "fcm", retry: RetryPolicy = RetryPolicy(retries: 3, backoff: .milliseconds(1),
                                                                         maxBackoff: .milliseconds(2))) throws -> FCMProvider {
        try FCMProvider(name: name, configuration: configuration, policy: DeliveryPolicy(retry: retry))
    }
}

let androidToken = "dAndroid0001:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx"
let androidToken2 = "dAndroid0002:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx"
let iosViaFCMToken = "fIOS00000001:APA91bGq3nLZpFzR8aQ"

@Suite(.serialized) struct FCMEndToEndTests {
    @Test func deliversOverTLSWithAMintedAccessToken() async throws {
        let fixture = try await FCMEmulatorFixture.start()
        let fcm = try fixture.provider()
        let request = try fcm.prepare(PushContent(title: "Hello", body: "world", data: ["n": 1]),
                                      for: PushToken(token: androidToken, platform: .android), options: SendOptions())
        let response = try await fcm.deliver(request, deadline: .now + .seconds(10))
        #expect(response.classification == .delivered)
        #expect(response.messageID?.hasPrefix("projects/norq-demo/messages/") == true)
        let sent = fixture.emulator.deliveredMessages
        #expect(sent.count == 1)
        #expect(sent.first?.target?.value == androidToken)
        #expect(sent.first?.blocks == ["android"])
        #expect((sent.first?.message?["data"] as? [String: String])?["n"] == "1")
        #expect(fixture.emulator.issuedTokenCount == 1)
        await fcm.shutdown()
        try await fixture.emulator.shutdown()
    }

    @Test func expiredAccessTokenIsRenewedOnceAndTheSendRepeated() async throws {
        let fixture = try await FCMEmulatorFixture.start()
        let fcm = try fixture.provider()
        let request = try fcm.prepare(PushContent(title: "Hi"), for: PushToken(token: androidToken, platform: .android),
                                      options: SendOptions())
        #expect(try await fcm.deliver(request, deadline: .now + .seconds(10)).classification == .delivered)
        fixture.emulator.expireAccessTokens()
        let second = try await fcm.deliver(request, deadline: .now + .seconds(10))
        #expect(second.classification == .delivered)
        #expect(fixture.emulator.issuedTokenCount == 2)
        let statuses = fixture.emulator.requests.filter { $0.path.hasSuffix(":send") }.map(\.status)
        #expect(statuses == [200, 401, 200])
        await fcm.shutdown()
        try await fixture.emulator.shutdown()
    }

    @Test func serviceAccountTheEmulatorDoesNotTrustFailsAsAProviderError() async throws {
        var emulatorConfiguration = FCMEmulator.Configuration(projectID: "norq-demo")
        let stranger = try _RSAKeyJSON()
        try emulatorConfiguration.trust(serviceAccountJSON: stranger)  // trusts another key only
        let emulator = try FCMEmulator(configuration: emulatorConfiguration)
        try await emulator.start()
        var configuration = try demoConfiguration()
        configuration.endpoint = FCMURL(host: "127.0.0.1", port: emulator.port)
        configuration.tokenEndpoint = FCMURL(host: "127.0.0.1", port: emulator.port, path: "/token")
        configuration.additionalTrustRootsPEM = emulator.caCertificatePEM
        let fcm = try FCMProvider(name: "fcm", configuration: configuration)
        let request = try fcm.prepare(PushContent(title: "Hi"), for: PushToken(token: androidToken, platform: .android),
                                      options: SendOptions())
        do {
            _ = try await fcm.deliver(request, deadline: .now + .seconds(10))
            Issue.record("expected a token-request failure")
        } catch {
            #expect(error.code == "fcm/token-request-failed")
            #expect(!error.possiblyProcessed)
        }
        #expect(emulator.requests.allSatisfy { $0.path == "/token" })
        await fcm.shutdown()
        try await emulator.shutdown()
    }

    @Test func emulatorAnswersAreClassifiedByTheTable() async throws {
        let faults = FCMEmulator.Faults(unregisteredTokens: ["gone:1"], senderIDMismatchTokens: ["other:1"],
                                        thirdPartyAuthErrorTokens: ["ios:1"], invalidTokens: ["bad:1"])
        let fixture = try await FCMEmulatorFixture.start(faults: faults)
        let fcm = try fixture.provider()
        func send(_ token: String, _ platform: Platform = .android) async throws -> DeliveryResponse {
            let request = try fcm.prepare(PushContent(title: "x"), for: PushToken(token: token, platform: platform),
                                          options: SendOptions())
            return try await fcm.deliver(request, deadline: .now + .seconds(10))
        }
        let gone = try await send("gone:1")
        #expect(gone.classification == .tokenInvalid)
        #expect(gone.reason == "UNREGISTERED")
        #expect(try await send("other:1").classification == .tokenQuarantined)
        let auth = try await send("ios:1", .ios)
        #expect(auth.classification == .credentials)
        #expect(auth.reason == "THIRD_PARTY_AUTH_ERROR")
        #expect(try await send("bad:1").classification == .tokenInvalid)
        await fcm.shutdown()
        try await fixture.emulator.shutdown()
    }

    @Test func emulatorRefusesWhatFCMRefuses() async throws {
        let fixture = try await FCMEmulatorFixture.start()
        let fcm = try fixture.provider()
        // A hand-built request the provider would never prepare: non-string data and a lowercase priority.
        var request = try fcm.prepare(PushContent(title: "x"), for: PushToken(token: androidToken, platform: .android),
                                      options: SendOptions())
        request.body = Array(#"{"message":{"token":"\#(androidToken)","data":{"n":1},"android":{"priority":"high"}}}"#.utf8)
        let response = try await fcm.deliver(request, deadline: .now + .seconds(10))
        #expect(response.status == 400)
        #expect(response.reason == "INVALID_ARGUMENT")
        #expect(response.classification == .permanent)
        await fcm.shutdown()
        try await fixture.emulator.shutdown()
    }
}

/// A service-account JSON with a fresh RSA key the demo emulator does not know.
func _RSAKeyJSON() throws -> String {
    let key = try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation
    return JSONValue.object(["type": "service_account", "client_email": "stranger@x.iam.gserviceaccount.com",
                             "private_key": .string(key)]).compactDescription
}
