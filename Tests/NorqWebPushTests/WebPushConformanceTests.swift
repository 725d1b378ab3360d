import NorqCore
import NorqProviderTesting
import NorqTesting
import NorqWebPush
import Testing

/// The provider conformance suite (NorqProviderTesting) run by the Web Push provider against the push-service
/// emulator over TLS HTTP/2. Each body is encrypted afresh per call (a fresh ephemeral key and salt), so `prepare`
/// is checked to be pure but for the body's bytes.
@Suite(.serialized, .timeLimit(.minutes(1))) struct WebPushConformanceTests {
    @Test func webPushProviderConforms() async throws {
        let keys = VAPIDKeyPair.generate()
        let emulator = try WebPushEmulator(configuration: .init())
        try await emulator.start()
        let silent = emulator.subscribe()
        emulator.setFaults(WebPushEmulator.Faults(silentSubscriptions: [silent.id]))
        func token(_ subscription: WebPushEmulator.Subscription) -> PushToken {
            PushToken(token: subscription.endpoint, platform: .web,
                      keys: WebPushKeys(p256dh: subscription.p256dh, auth: subscription.auth))
        }
        let configuration = WebPushConfiguration(
            vapidKeys: keys, subject: "mailto:ops@example.com", allowPrivateEndpoints: true,
            additionalTrustRootsPEM: emulator.caCertificatePEM, caPath: "(emulator)", requestTimeout: .seconds(5))
        let provider = try WebPushProvider(name: "webpush", configuration: configuration)
        var content = PushContent(title: "conformance", body: "every body decrypted by the emulator")
        content.headers.collapseID = "conformance"
        let suite = ProviderConformance(.init(
            provider: provider, tokens: (0..<5).map { _ in token(emulator.subscribe()) }, content: content,
            silentToken: token(silent),
            received: {
                emulator.messages.filter { $0.status == 201 && $0.plaintext != nil }.map { .init(path: $0.path, body: $0.body) }
            },
            bodyEncryptedPerCall: true))
        let failures = await suite.run()
        #expect(failures.isEmpty, "\(failures)")
        try await emulator.shutdown()
    }
}
