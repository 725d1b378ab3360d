import NorqCore
import NorqExpo
import NorqProviderTesting
import NorqTesting
import Testing

/// The provider conformance suite (NorqProviderTesting) run by the Expo provider against its emulator over TLS.
@Suite(.serialized, .timeLimit(.minutes(1))) struct ExpoConformanceTests {
    @Test func expoProviderConforms() async throws {
        let silent = "ExponentPushToken[silent]"
        var configuration = ExpoEmulator.Configuration()
        configuration.faults.silentTokens = [silent]
        let emulator = try ExpoEmulator(configuration: configuration)
        try await emulator.start()
        let provider = try ExpoProvider(name: "expo", configuration: ExpoConfiguration(
            endpoint: try #require(ExpoURL.parse(emulator.endpoint)), additionalTrustRootsPEM: emulator.caCertificatePEM))
        let tokens = (1...5).map { PushToken(token: "ExponentPushToken[conformance-\($0)]", platform: $0 == 3 ? .ios : .android) }
        let suite = ProviderConformance(.init(
            provider: provider, tokens: tokens, silentToken: PushToken(token: silent, platform: .android),
            received: {
                emulator.requests.filter { $0.status == 200 && $0.path.hasSuffix("/push/send") }
                    .map { .init(path: $0.path, body: $0.detail.inflatedBody) }
            }))
        let failures = await suite.run()
        #expect(failures.isEmpty, "\(failures)")
        try await emulator.shutdown()
    }
}
