import Foundation
import NorqCore
import NorqLocalEmulators
import NorqTesting

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension EmulatorCommand {
    /// `norq emulator --webpush`: the push-service emulator as a standalone server. Prints its origin, its CA
    /// and the subscriptions it issued (as recipient tokens), then decrypts and checks what it receives.
    func serveWebPush() async throws(NorqError) {
        guard (1...1000).contains(subscriptions) else {
            throw NorqError(.cliInvalidOption, "--subscriptions must be between 1 and 1000")
        }
        let faults = WebPushEmulator.Faults(latency: .milliseconds(latencyMs), goAwayAfterStreams: goawayAfter,
                                            dropConnectionAfterStreams: dropAfter)
        let emulator: WebPushEmulator
        do {
            emulator = try WebPushEmulator(configuration: .init(
                host: host, port: port, endpointHost: host == "0.0.0.0" ? "127.0.0.1" : host,
                httpVersion: http1 ? .http1 : .http2, maxConcurrentStreams: maxStreams, faults: faults))
            try await emulator.start()
        } catch {
            throw NorqError(.cliEmulatorFailed, "the Web Push emulator could not start on \(host):\(port): \(error)")
        }
        let caPath = caOut ?? (NSTemporaryDirectory() as NSString)
            .appendingPathComponent("norq-webpush-emulator-\(getpid())-\(emulator.port)-ca.pem")
        do {
            try emulator.writeCACertificate(to: caPath)
        } catch {
            try? await emulator.shutdown()
            throw NorqError(.cliEmulatorFailed, "cannot write the CA certificate to \(caPath): \(error)")
        }
        let issued = (0..<subscriptions).map { _ in emulator.subscribe() }
        for token in unregistered { emulator.unsubscribe(token) }
        let tokens: [JSONValue] = issued.map { subscription in
            ["platform": "web", "token": .string(subscription.endpoint),
             "keys": ["p256dh": .string(subscription.p256dh), "auth": .string(subscription.auth)]]
        }
        var banner = "Web Push emulator (\(http1 ? "HTTP/1.1" : "HTTP/2")) listening on \(emulator.origin)\n"
        banner += "CA certificate: \(caPath)\n"
        banner += "norq.yaml: webpush config: allowPrivateEndpoints: true  caPath: \(caPath)\n"
        banner += "subscriptions (recipient tokens; the emulator holds their private keys and decrypts):\n"
        banner += JSONValue.array(tokens).prettyPrinted() + "\n"
        banner += "Ctrl-C to stop.\n"
        Console.out(banner)
        await Self.waitForSignal(printing: nil)
        if logRequests {
            for message in emulator.messages {
                let line: JSONValue = [
                    "path": .string(message.path), "status": .int(Int64(message.status)),
                    "reason": .optional(message.reason), "ttl": message.ttl.map { .int(Int64($0)) } ?? .null,
                    "topic": .optional(message.topic), "urgency": .optional(message.urgency),
                    "plaintext": .optional(message.plaintextString),
                ]
                Console.out(line.compactDescription + "\n")
            }
        }
        try? await emulator.shutdown()
        if caOut == nil { try? FileManager.default.removeItem(atPath: caPath) }
        Console.err("emulator stopped\n")
    }
}
