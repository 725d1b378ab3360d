import Crypto
import Foundation
import NorqAPNs
import NorqConfig
import NorqCore
import NorqTesting

/// Starts the in-process APNs emulator for a configuration and points the configuration's APNs providers at it.
enum EmulatorSetup {
    /// The accepted JWT keys and team of the configuration's APNs providers (token auth only).
    struct Credentials {
        var keys: [String: String] = [:]
        var teams: Set<String> = []
        var apnsProviders = 0
    }

    static func credentials(of configuration: NorqConfiguration) throws(NorqError) -> Credentials {
        var credentials = Credentials()
        for instance in configuration.providers {
            guard let apns = instance.configuration as? APNsConfiguration else { continue }
            credentials.apnsProviders += 1
            if case .token(let keyID, let teamID, let pem, _) = apns.authentication {
                credentials.keys[keyID] = try publicKeyPEM(fromPEM: pem, source: "provider \(instance.name)")
                credentials.teams.insert(teamID)
            }
        }
        guard credentials.apnsProviders > 0 else {
            throw NorqError(.cliNoAPNsProvider, "the configuration has no APNs provider to point at the emulator",
                            at: configuration.file.map { SourceLocation(file: $0) })
        }
        return credentials
    }

    /// The P-256 public key (PEM) of a private key PEM (PKCS#8 `.p8` or SEC1), or the public key PEM itself.
    static func publicKeyPEM(fromPEM pem: String, source: String) throws(NorqError) -> String {
        if let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) { return key.publicKey.pemRepresentation }
        if let key = try? P256.Signing.PublicKey(pemRepresentation: pem) { return key.pemRepresentation }
        throw NorqError(.cliInvalidOption, "\(source): not a P-256 private or public key in PEM form")
    }

    /// Starts an emulator accepting the configuration's keys and rewrites every APNs provider's endpoints
    /// (sandbox and production) and trust roots to it.
    static func attach(to configuration: NorqConfiguration) async throws(NorqError) -> (NorqConfiguration, APNsEmulator) {
        let credentials = try credentials(of: configuration)
        let emulator: APNsEmulator
        do {
            emulator = try APNsEmulator(configuration: .init(
                teamID: credentials.teams.count == 1 ? credentials.teams.first : nil,
                signingKeys: credentials.keys))
            try await emulator.start()
        } catch {
            throw NorqError(.cliEmulatorFailed, "the APNs emulator could not start: \(error)")
        }
        var rewritten = configuration
        let endpoint = APNsEndpoint(host: "localhost", port: emulator.port)
        for index in rewritten.providers.indices {
            guard var apns = rewritten.providers[index].configuration as? APNsConfiguration else { continue }
            apns.sandboxEndpoint = endpoint
            apns.productionEndpoint = endpoint
            apns.additionalTrustRootsPEM = emulator.caCertificatePEM
            apns.caPath = "(in-process emulator CA)"
            apns.proxy = nil
            rewritten.providers[index].configuration = apns
        }
        return (rewritten, emulator)
    }
}
