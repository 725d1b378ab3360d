import Crypto
import Foundation
import Norq
import NorqAPNs
import NorqCore
import NorqTesting
import ServiceLifecycle
import Testing

/// The emulator, an APNs provider on it and a router: what durable delivery tests run against.
struct DurableRig: Sendable {
    let emulator: APNsEmulator
    let router: NotificationRouter
    let key: P256.Signing.PrivateKey

    static func make(faults: APNsEmulator.Faults = .init(),
                     retry: RetryPolicy = RetryPolicy(retries: 3, backoff: .milliseconds(20), maxBackoff: .milliseconds(50)),
                     recordLimit: Int = 10_000)
        async throws -> DurableRig {
        let key = P256.Signing.PrivateKey()
        var configuration = APNsEmulator.Configuration(environmentName: "sandbox", teamID: "TEAM123ABC",
                                                       signingKeys: ["KEY123ABCD": key.publicKey.pemRepresentation],
                                                       faults: faults)
        configuration.recordLimit = recordLimit
        let emulator = try APNsEmulator(configuration: configuration)
        try await emulator.start()
        var apns = APNsConfiguration(authentication: .token(keyID: "KEY123ABCD", teamID: "TEAM123ABC",
                                                            privateKeyPEM: key.pemRepresentation, keySource: "test"),
                                     bundleID: "com.example.app", production: false)
        apns.sandboxEndpoint = APNsEndpoint(host: "localhost", port: emulator.port)
        apns.additionalTrustRootsPEM = emulator.caCertificatePEM
        let provider = try APNsProvider(name: "apns", configuration: apns,
                                        policy: DeliveryPolicy(retry: retry, maxInFlight: 500),
                                        tokenCache: APNsTokenCache())
        let router = try NotificationRouter(providers: [provider], shutdownGracePeriod: .seconds(2))
        return DurableRig(emulator: emulator, router: router, key: key)
    }

    func shutdown() async {
        await router.shutdown(gracePeriod: .seconds(1))
        try? await emulator.shutdown()
    }

    /// Tokens as APNs has them (64 hex characters), numbered.
    static func token(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return "f" + String(repeating: "0", count: 63 - hex.count) + hex
    }

    static func recipients(_ count: Int, from start: Int = 0) -> [Recipient] {
        (start..<(start + count)).map { Recipient(id: "u\($0)", tokens: [PushToken(token: token($0), platform: .ios)]) }
    }

    static let content = PushContent(title: "Order shipped", body: "On its way")

    /// Requests the emulator answered, per apns-id.
    func requestsByID() -> [String: Int] {
        var counts: [String: Int] = [:]
        for request in emulator.requests { counts[request.header("apns-id") ?? "none", default: 0] += 1 }
        return counts
    }
}

/// Runs `body` while `worker` runs; stops the worker gracefully afterwards.
func withWorker<T: Sendable>(_ worker: DurableWorker, _ body: () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await worker.run() }
        do {
            let value = try await body()
            worker.stop()
            try await group.waitForAll()
            return value
        } catch {
            worker.stop()
            group.cancelAll()
            throw error
        }
    }
}
