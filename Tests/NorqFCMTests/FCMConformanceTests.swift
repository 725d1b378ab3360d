import NorqCore
@testable import NorqFCM
import NorqProviderTesting
import NorqTesting
import Testing

/// The provider conformance suite (NorqProviderTesting) run by the FCM provider against its emulator over TLS.
@Suite(.serialized, .timeLimit(.minutes(1))) struct FCMConformanceTests {
    @Test func fcmProviderConforms() async throws {
        let silent = "silent:APA91bNeverAnswered"
        let fixture = try await FCMEmulatorFixture.start(faults: FCMEmulator.Faults(silentTokens: [silent]))
        let emulator = fixture.emulator
        let tokens = (1...5).map { PushToken(token: "conformance-\($0):APA91b", platform: $0 == 3 ? .ios : .android) }
        let suite = ProviderConformance(.init(
            provider: try fixture.provider(), tokens: tokens, silentToken: PushToken(token: silent, platform: .android),
            received: {
                emulator.requests.filter { $0.status == 200 && $0.path.hasSuffix(":send") }
                    .map { .init(path: $0.path, body: $0.body) }
            }))
        let failures = await suite.run()
        #expect(failures.isEmpty, "\(failures)")
        try await emulator.shutdown()
    }
}
