import NorqAPNs
import NorqCore
import Testing

/// `PushProvider.health()` for APNs: what `norq serve`'s `/readyz` asks.
@Suite(.serialized, .timeLimit(.minutes(1))) struct APNsHealthTests {
    @Test("ready before any connection and after a delivery; not ready once the endpoint refuses connections")
    func healthFollowsTheLastConnectionAttempt() async throws {
        let setup = try await APNsEndToEndTests.setup()
        #expect(setup.provider.health() == .ready, "nothing tried yet")
        let delivered = try await APNsEndToEndTests.send(setup.provider, PushContent(title: "health"))
        #expect(delivered.status == 200)
        #expect(setup.provider.health() == .ready)
        await setup.provider.shutdown()

        // The same emulator's port, closed: the connection attempt fails, and the provider says so.
        let port = setup.emulator.port
        try await setup.emulator.shutdown()
        var configuration = Fixtures.tokenConfiguration(key: setup.key)
        configuration.sandboxEndpoint = APNsEndpoint(host: "127.0.0.1", port: port)
        configuration.connectionRetryLimit = 1
        let refused = try APNsProvider(name: "apns-down", configuration: configuration, tokenCache: APNsTokenCache())
        #expect(refused.health() == .ready, "nothing tried yet")
        let outcome = await APNsEndToEndTests.outcome(refused, PushContent(title: "health"), token: Fixtures.iosToken(),
                                                      timeout: .seconds(3))
        #expect(outcome == "provider/transport-failed")
        let health = refused.health()
        #expect(!health.isReady)
        #expect(health.detail?.contains("apns-down cannot connect to https://127.0.0.1:\(port)") == true, "\(health)")
        await refused.shutdown()
    }
}
