import NorqAPNs
import NorqBuiltIns
import NorqConfig
import NorqCore
import NorqLocalEmulators
import NorqTesting
import NorqWebPush
import Testing

/// `LocalEmulators.startForServing` (what `norq serve --emulator` runs), in-process: every configured provider
/// gets its emulator, APNs channel management is pointed at the APNs emulator (which records the call), and each
/// emulator keeps a bounded number of records.
@Suite(.timeLimit(.minutes(1))) struct ServingEmulatorsTests {
    @Test func everyProviderIsPointedAtItsEmulatorChannelManagementIncluded() async throws {
        let path = ServedNorq.packageRoot.appendingPathComponent("examples/quickstart/norq.yaml").path
        let loaded = try ConfigurationLoader(registry: .builtIn).load(path: path)
        let emulators = try await LocalEmulators.startForServing(loaded)
        let apns = try #require(emulators.apnsEmulator)
        let fcm = try #require(emulators.fcmEmulator)
        let webPush = try #require(emulators.webPushEmulator, "the Web Push emulator starts for a web push provider")
        #expect(apns.configuration.recordLimit == 10_000)
        #expect(fcm.configuration.recordLimit == 10_000)
        #expect(webPush.configuration.recordLimit == 10_000)
        #expect(webPush.configuration.acceptUnknownSubscriptions)

        let apnsSettings = try #require(emulators.configuration.providers.lazy.compactMap { $0.configuration as? APNsConfiguration }.first)
        let local = APNsEndpoint(host: "localhost", port: apns.port)
        #expect(apnsSettings.managementSandboxEndpoint == local)
        #expect(apnsSettings.managementProductionEndpoint == local)
        #expect(apnsSettings.sandboxEndpoint == local && apnsSettings.productionEndpoint == local)
        let webSettings = try #require(emulators.configuration.providers.lazy.compactMap { $0.configuration as? WebPushConfiguration }.first)
        #expect(webSettings.originOverride == WebPushOriginOverride(host: "127.0.0.1", port: webPush.port))

        // A reloaded configuration (SIGHUP) is pointed the same way.
        let again = emulators.pointed(loaded)
        let reloaded = try #require(again.providers.lazy.compactMap { $0.configuration as? APNsConfiguration }.first)
        #expect(reloaded.managementSandboxEndpoint == local && reloaded.managementProductionEndpoint == local)

        // A channel create through the provider reaches the APNs emulator, which records it.
        let provider = try APNsProvider(name: "apns", configuration: apnsSettings)
        let channel = try await provider.createChannel()
        await provider.shutdown()
        let recorded = apns.requests.filter { $0.method == "POST" && $0.path.hasSuffix("/channels") }
        #expect(recorded.count == 1)
        #expect(recorded.first?.status == 201)
        #expect(recorded.first?.authority == "localhost:\(apns.port)")
        #expect(!channel.id.isEmpty)
        await emulators.shutdown()
    }
}
