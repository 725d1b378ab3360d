import Crypto
import Foundation
import NorqAPNs
package import NorqConfig
package import NorqCore
import NorqExpo
package import NorqFCM
package import NorqTesting

/// Starts the in-process emulators for a configuration (APNs for its APNs providers, FCM for its FCM providers)
/// and points those providers at them.
package enum EmulatorSetup {
    /// The accepted JWT keys and team of the configuration's APNs providers (token auth only).
    package struct Credentials {
        package var keys: [String: String] = [:]
        package var teams: Set<String> = []
        package var apnsProviders = 0
    }

    /// The emulators started for a configuration, and the configuration pointed at them.
    package struct Attached: Sendable {
        package var configuration: NorqConfiguration
        package var apns: APNsEmulator?
        package var fcm: FCMEmulator?
        package var expo: ExpoEmulator?

        /// `configuration` with every APNs provider (device pushes and channel management) and FCM provider pointed
        /// at these emulators (at start, and again for a configuration reloaded while they run).
        package func pointed(_ configuration: NorqConfiguration) -> NorqConfiguration {
            var configuration = configuration
            for index in configuration.providers.indices {
                if let apns, var settings = configuration.providers[index].configuration as? APNsConfiguration {
                    let endpoint = APNsEndpoint(host: "localhost", port: apns.port)
                    settings.sandboxEndpoint = endpoint
                    settings.productionEndpoint = endpoint
                    // Channel management (broadcast channels) too: the emulator serves `/1/apps/.../channels`, so
                    // no request (and no name lookup) goes to api-manage-broadcast.push.apple.com.
                    settings.managementSandboxEndpoint = endpoint
                    settings.managementProductionEndpoint = endpoint
                    settings.additionalTrustRootsPEM = apns.caCertificatePEM
                    settings.caPath = "(in-process emulator CA)"
                    settings.proxy = nil
                    configuration.providers[index].configuration = settings
                }
                if let fcm, var settings = configuration.providers[index].configuration as? FCMConfiguration {
                    settings.endpoint = FCMURL(host: "localhost", port: fcm.port)
                    settings.tokenEndpoint = FCMURL(host: "localhost", port: fcm.port, path: "/token")
                    settings.additionalTrustRootsPEM = fcm.caCertificatePEM
                    settings.caPath = "(in-process emulator CA)"
                    settings.proxy = nil
                    configuration.providers[index].configuration = settings
                }
                if let expo, var settings = configuration.providers[index].configuration as? ExpoConfiguration {
                    settings.endpoint = ExpoURL(host: "localhost", port: expo.port)
                    settings.additionalTrustRootsPEM = expo.caCertificatePEM
                    settings.caPath = "(in-process emulator CA)"
                    configuration.providers[index].configuration = settings
                }
            }
            return configuration
        }

        package func shutdown() async {
            try? await apns?.shutdown()
            try? await fcm?.shutdown()
            try? await expo?.shutdown()
        }
    }

    package static func credentials(of configuration: NorqConfiguration, requireAPNs: Bool = true) throws(NorqError) -> Credentials {
        var credentials = Credentials()
        for instance in configuration.providers {
            guard let apns = instance.configuration as? APNsConfiguration else { continue }
            credentials.apnsProviders += 1
            if case .token(let keyID, let teamID, let pem, _) = apns.authentication {
                credentials.keys[keyID] = try publicKeyPEM(fromPEM: pem, source: "provider \(instance.name)")
                credentials.teams.insert(teamID)
            }
        }
        guard credentials.apnsProviders > 0 || !requireAPNs else {
            throw NorqError(.cliNoAPNsProvider, "the configuration has no APNs provider to point at the emulator",
                            at: configuration.file.map { SourceLocation(file: $0) })
        }
        return credentials
    }

    /// The service-account JSON keys of the configuration's FCM providers.
    package static func fcmServiceAccounts(of configuration: NorqConfiguration) -> [FCMServiceAccount] {
        configuration.providers.compactMap { ($0.configuration as? FCMConfiguration)?.serviceAccount }
    }

    /// The P-256 public key (PEM) of a private key PEM (PKCS#8 `.p8` or SEC1), or the public key PEM itself.
    package static func publicKeyPEM(fromPEM pem: String, source: String) throws(NorqError) -> String {
        if let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) { return key.publicKey.pemRepresentation }
        if let key = try? P256.Signing.PublicKey(pemRepresentation: pem) { return key.pemRepresentation }
        throw NorqError(.cliInvalidOption, "\(source): not a P-256 private or public key in PEM form")
    }

    /// An FCM emulator trusting `accounts` (any project id), started on `host:port`.
    package static func startFCM(accounts: [FCMServiceAccount], host: String = "127.0.0.1", port: Int = 0,
                         recordRequests: Bool = true, faults: FCMEmulator.Faults = .init()) async throws(NorqError) -> FCMEmulator {
        do {
            var configuration = FCMEmulator.Configuration(host: host, port: port, recordRequests: recordRequests,
                                                          faults: faults)
            for account in accounts {
                let json = JSONValue.object(["client_email": .string(account.clientEmail),
                                             "private_key": .string(account.privateKeyPEM)]).compactDescription
                try configuration.trust(serviceAccountJSON: json)
            }
            let emulator = try FCMEmulator(configuration: configuration)
            try await emulator.start()
            return emulator
        } catch {
            throw NorqError(.cliEmulatorFailed, "the FCM emulator could not start on \(host):\(port): \(error)")
        }
    }

    /// Starts an APNs emulator when the configuration has APNs providers and an FCM emulator when it has FCM
    /// providers, and rewrites those providers' endpoints and trust roots to them. At least one is required.
    package static func attach(to configuration: NorqConfiguration,
                               onAPNsRequest: (@Sendable (RecordedRequest) -> Void)? = nil) async throws(NorqError) -> Attached {
        let credentials = try credentials(of: configuration, requireAPNs: false)
        let accounts = fcmServiceAccounts(of: configuration)
        let hasExpo = configuration.providers.contains { $0.configuration is ExpoConfiguration }
        guard credentials.apnsProviders > 0 || !accounts.isEmpty || hasExpo else {
            throw NorqError(.cliNoAPNsProvider, "the configuration has no APNs, FCM or Expo provider to point at the emulator",
                            at: configuration.file.map { SourceLocation(file: $0) })
        }
        var attached = Attached(configuration: configuration)
        if credentials.apnsProviders > 0 {
            let emulator: APNsEmulator
            do {
                var settings = APNsEmulator.Configuration(
                    teamID: credentials.teams.count == 1 ? credentials.teams.first : nil,
                    signingKeys: credentials.keys)
                settings.onRequest = onAPNsRequest
                emulator = try APNsEmulator(configuration: settings)
                try await emulator.start()
            } catch {
                throw NorqError(.cliEmulatorFailed, "the APNs emulator could not start: \(error)")
            }
            attached.apns = emulator
        }
        if !accounts.isEmpty {
            let emulator: FCMEmulator
            do throws(NorqError) {
                emulator = try await startFCM(accounts: accounts)
            } catch {
                await attached.shutdown()
                throw error
            }
            attached.fcm = emulator
        }
        if hasExpo {
            do {
                // At most 10,000 records and 100,000 receipts, the newest: a long `norq serve --emulator` stays small.
                let emulator = try ExpoEmulator()
                try await emulator.start()
                attached.expo = emulator
            } catch {
                await attached.shutdown()
                throw NorqError(.cliEmulatorFailed, "the Expo emulator could not start: \(error)")
            }
        }
        attached.configuration = attached.pointed(configuration)
        return attached
    }
}
