import Crypto
import Norq
import NorqAPNs
import NorqCore
import NorqTesting
import Testing

/// Router -> APNsProvider -> APNs emulator over TLS HTTP/2 on 127.0.0.1 (port 0).
@Suite(.serialized, .timeLimit(.minutes(1)))
struct RouterEmulatorTests {
    static func token(_ i: Int) -> String { hexToken(i + 0xabc000) }

    @Test("retries 429/500/503 with the same apns-id, no retry on 410/400, hook for invalid tokens, dedup")
    func endToEnd() async throws {
        let key = P256.Signing.PrivateKey()
        let retried = Self.token(1), gone = Self.token(2), bad = Self.token(3), plain = Self.token(4)
        let emulator = try APNsEmulator(configuration: APNsEmulator.Configuration(
            environmentName: "sandbox", teamID: "TEAM123456", keyID: "ABC123DEFG",
            signingPublicKeyPEM: key.publicKey.pemRepresentation))
        try await emulator.start()
        emulator.setFaults(.init(unregisteredTokens: [gone: 1_700_000_000_123], badTokens: [bad],
                                 failFirstAttempts: [retried: [.init(status: 429, reason: "TooManyRequests", retryAfterSeconds: 1),
                                                               .internalServerError,
                                                               .init(status: 503, reason: "ServiceUnavailable")]]))
        var configuration = APNsConfiguration(
            authentication: .token(keyID: "ABC123DEFG", teamID: "TEAM123456", privateKeyPEM: key.pemRepresentation,
                                   keySource: "test"),
            bundleID: "com.example.app", production: false)
        configuration.sandboxEndpoint = APNsEndpoint(host: "localhost", port: emulator.port)
        configuration.additionalTrustRootsPEM = emulator.caCertificatePEM
        let provider = try APNsProvider(name: "apns", configuration: configuration,
                                        policy: DeliveryPolicy(retry: RetryPolicy(retries: 3, backoff: .milliseconds(1),
                                                                                  maxBackoff: .milliseconds(2))),
                                        tokenCache: APNsTokenCache())
        let sleeper = SleepRecorder()
        let events = InvalidTokenTests.Events()
        let router = try NotificationRouter(providers: [provider], clock: sleeper.clock, onInvalidToken: { event in
            events.list.withLock { $0.append(event) }
        })
        let to = recipients([retried, gone, bad, plain].map { ios($0) })
        let options = RouterSendOptions(idempotencyKey: "e2e-1")
        let report = try await router.send(content: PushContent(title: "Hello", body: "World"), to: to, options: options)
        #expect(report.outcomes.count == 4)
        #expect(report.outcomes[0].result.kind == "delivered")
        #expect(report.outcomes[0].attempts == 4)
        #expect(sleeper.recorded.first == .seconds(1))
        let retriedIDs = Set(emulator.requests.filter { $0.path.hasSuffix(retried) }.map(\.apnsID))
        #expect(retriedIDs == [RequestID.make(idempotencyKey: "e2e-1", token: retried)])
        #expect(report.outcomes[1].attempts == 1 && report.outcomes[2].attempts == 1)
        #expect(report.outcomes[3].result.kind == "delivered")
        #expect(Set(events.all.map(\.reason)) == ["Unregistered", "BadDeviceToken"])
        #expect(events.all.first { $0.reason == "Unregistered" }?.invalidSince == 1_700_000_000_123)

        let before = emulator.requests.count
        let repeated = try await router.send(content: PushContent(title: "Hello", body: "World"), to: to, options: options)
        #expect(repeated.duplicates == 4)
        #expect(emulator.requests.count == before)

        await router.shutdown(gracePeriod: .seconds(1))
        try? await emulator.shutdown()
    }
}
