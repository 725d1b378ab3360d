import Crypto
import Foundation
import Norq
import NorqAPNs
import NorqCore
import NorqStore
import NorqStoreSQLite
import NorqTesting
import Testing

/// The token registry per environment end to end (issue 29): two emulators, one per APNs environment, the
/// sandbox one answering `BadDeviceToken` for a token the production one accepts (as APNs does for a production
/// token sent to sandbox); the router's APNs provider (sandbox by default) on a SQLite store.
@Suite struct DurableEnvironmentTests {
    @Test func badDeviceTokenInSandboxStillSendsInProduction() async throws {
        let token = DurableRig.token(42)
        let key = P256.Signing.PrivateKey()
        func emulator(_ environment: String, faults: APNsEmulator.Faults) async throws -> APNsEmulator {
            let emulator = try APNsEmulator(configuration: APNsEmulator.Configuration(
                environmentName: environment, teamID: "TEAM123ABC",
                signingKeys: ["KEY123ABCD": key.publicKey.pemRepresentation], faults: faults))
            try await emulator.start()
            return emulator
        }
        let sandbox = try await emulator("sandbox", faults: .init(badTokens: [token]))
        let production = try await emulator("production", faults: .init())
        var apns = APNsConfiguration(authentication: .token(keyID: "KEY123ABCD", teamID: "TEAM123ABC",
                                                            privateKeyPEM: key.pemRepresentation, keySource: "test"),
                                     bundleID: "com.example.app", production: false)
        apns.sandboxEndpoint = APNsEndpoint(host: "localhost", port: sandbox.port)
        apns.productionEndpoint = APNsEndpoint(host: "localhost", port: production.port)
        apns.additionalTrustRootsPEM = sandbox.caCertificatePEM + "\n" + production.caCertificatePEM
        let provider = try APNsProvider(name: "apns", configuration: apns,
                                        policy: DeliveryPolicy(retry: RetryPolicy(retries: 1, backoff: .milliseconds(20)),
                                                               maxInFlight: 50),
                                        tokenCache: APNsTokenCache())
        let router = try NotificationRouter(providers: [provider], shutdownGracePeriod: .seconds(2))
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try await SQLiteDeliveryStore.open(path: directory.appendingPathComponent("norq.db").path,
                                                       settings: DurableDeliveryTests.settings)
        do {
            try await store.migrate()
            let durable = DurableDelivery(router: router, store: store, settings: DurableDeliveryTests.settings)
            try await withWorker(DurableWorker(delivery: durable)) {
                func send(_ environment: PushEnvironment?, options: RouterSendOptions = RouterSendOptions())
                    async throws -> PushOutcome.Result {
                    let recipient = Recipient(id: "u", tokens: [PushToken(token: token, platform: .ios,
                                                                          environment: environment)])
                    let receipt = try await durable.enqueue(content: DurableRig.content, to: [recipient], options: options)
                    let report = try await durable.wait(for: receipt.sendID, timeout: .seconds(30))
                    return try #require(report.outcomes.first).result
                }
                // The provider's default (sandbox): BadDeviceToken, recorded for sandbox.
                guard case .rejected(let rejection) = try await send(nil) else {
                    Issue.record("the sandbox send must be rejected")
                    return
                }
                #expect(rejection.reason == "BadDeviceToken")
                let registry = try await store.invalidTokens(limit: 10)
                #expect(registry.count == 1)
                #expect(registry.first?.token == token && registry.first?.provider == "apns")
                #expect(registry.first?.environment == "sandbox" && registry.first?.reason == "BadDeviceToken")
                // Production (the send's options, then the token's own): delivered, not skipped.
                guard case .delivered = try await send(nil, options: RouterSendOptions(environment: .production)) else {
                    Issue.record("a production send of the token must be delivered")
                    return
                }
                guard case .delivered = try await send(.production) else {
                    Issue.record("a production token must be delivered")
                    return
                }
                #expect(production.requests.count == 2)
                // Sandbox again (the token's own environment, then the default): skipped at enqueue, not sent.
                for environment in [PushEnvironment.sandbox, nil] {
                    guard case .skipped(let skip) = try await send(environment) else {
                        Issue.record("a sandbox send of the token must be skipped")
                        return
                    }
                    #expect(skip.code == .tokenInvalid)
                }
                #expect(sandbox.requests.count == 1)
                #expect(try await store.invalidTokens(limit: 10).count == 1)
            }
        } catch {
            await store.close()
            await router.shutdown(gracePeriod: .seconds(1))
            try? await sandbox.shutdown()
            try? await production.shutdown()
            throw error
        }
        await store.close()
        await router.shutdown(gracePeriod: .seconds(1))
        try? await sandbox.shutdown()
        try? await production.shutdown()
    }
}
