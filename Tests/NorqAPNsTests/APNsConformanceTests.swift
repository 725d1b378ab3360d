import NorqAPNs
import NorqCore
import NorqProviderTesting
import NorqTesting
import Testing

/// The provider conformance suite (NorqProviderTesting) run by the APNs provider against its emulator.
@Suite(.serialized, .timeLimit(.minutes(1))) struct APNsConformanceTests {
    @Test func apnsProviderConforms() async throws {
        let silent = APNsEndToEndTests.token(200)
        let setup = try await APNsEndToEndTests.setup(configureEmulator: { $0.faults.silentTokens = [silent] })
        let emulator = setup.emulator
        let tokens = (1...5).map { Fixtures.iosToken(APNsEndToEndTests.token($0)) }
        let suite = ProviderConformance(.init(
            provider: setup.provider, tokens: tokens, silentToken: Fixtures.iosToken(silent),
            received: { emulator.requests.filter { $0.status == 200 }.map { .init(path: $0.path, body: $0.body) } }))
        let failures = await suite.run()
        #expect(failures.isEmpty, "\(failures)")
        try await emulator.shutdown()
    }
}
