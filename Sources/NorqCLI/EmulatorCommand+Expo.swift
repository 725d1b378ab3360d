import Foundation
import NorqCore
import NorqTesting

extension EmulatorCommand {
    /// Starts the Expo emulator (`--expo`) with the faults of the shared options that apply to it; returns it, the
    /// path of its CA certificate and the banner lines.
    func startExpo() async throws(NorqError) -> (ExpoEmulator, String, String) {
        var faults = ExpoEmulator.Faults()
        faults.unregisteredTokens = Set(unregistered)
        faults.latency = .milliseconds(latencyMs)
        let emulator: ExpoEmulator
        do {
            var configuration = ExpoEmulator.Configuration(host: host, port: expoPort, accessToken: expoAccessToken,
                                                           recordRequests: logRequests, faults: faults)
            configuration.recordLimit = 1_000
            emulator = try ExpoEmulator(configuration: configuration)
            try await emulator.start()
        } catch {
            throw NorqError(.cliEmulatorFailed, "the Expo emulator could not start on \(host):\(expoPort): \(error)")
        }
        let caPath = (NSTemporaryDirectory() as NSString)
            .appendingPathComponent("norq-expo-emulator-\(getpid())-\(emulator.port)-ca.pem")
        do {
            try emulator.writeCACertificate(to: caPath)
        } catch {
            try? await emulator.shutdown()
            throw NorqError(.cliEmulatorFailed, "cannot write the Expo emulator's CA certificate to \(caPath): \(error)")
        }
        var lines = "Expo emulator listening on \(emulator.endpoint)\n"
        lines += "Expo CA certificate: \(caPath)\n"
        lines += "Expo auth: " + (expoAccessToken == nil ? "none (anonymous)" : "Bearer access token required") + "\n"
        lines += "norq.yaml (expo): endpoint: \(emulator.endpoint)  caPath: \(caPath)\n"
        return (emulator, caPath, lines)
    }
}
