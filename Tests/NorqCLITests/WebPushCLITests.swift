import Foundation
import Testing

/// `norq emulator --webpush` as a standalone push service, and `norq send` to the subscriptions it printed.
@Suite(.serialized) struct WebPushCLITests {
    @Test func standaloneWebPushEmulatorReceivesASend() throws {
        let dir = try CLI.temporaryDirectory()
        let root = CLI.packageRoot.path
        let caPath = dir.appendingPathComponent("ca.pem").path
        let emulator = try CLI.start(["emulator", "--webpush", "--subscriptions", "2", "--ca-out", caPath])
        defer { _ = emulator.stop() }
        let banner = try #require(emulator.waitForOutput { $0.contains("Ctrl-C") }, "emulator did not start")
        let start = try #require(banner.firstIndex(of: "["))
        let end = try #require(banner.lastIndex(of: "]"))
        let tokens = String(banner[start...end])
        let config = dir.appendingPathComponent("norq.yaml")
        try Data("""
            templates: \(root)/templates
            providers:
              webpush:
                config:
                  vapidPublicKey: BHXaCvRuSqOM-0R0CiHhjsBqNOemIUNyHKWXEaEFUglsWC7ykNPTJV0D-G0NvygNCbpPl7-MvV9q9JE44pwVNZs
                  vapidPrivateKey: \(root)/examples/keys/vapid-demo.pem
                  subject: mailto:ops@example.com
                  allowPrivateEndpoints: true
                  caPath: \(caPath)

            """.utf8).write(to: config)
        let result = try CLI.run(["send", "order-shipped", "--config", config.path, "--sample", "default", "--to", tokens])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("2 tokens: 2 delivered"), "\(result)")
        // Without allowPrivateEndpoints the SSRF guard refuses 127.0.0.1 before sending.
        try Data(String(decoding: try Data(contentsOf: config), as: UTF8.self)
            .replacingOccurrences(of: "allowPrivateEndpoints: true", with: "allowPrivateEndpoints: false").utf8).write(to: config)
        let refused = try CLI.run(["send", "order-shipped", "--config", config.path, "--sample", "default", "--to", tokens])
        #expect(refused.status == 2, "\(refused)")
        #expect(refused.stdout.contains("webpush/endpoint-not-allowed"), "\(refused)")
    }

    @Test func validateShowsThePublicKeyOnly() throws {
        let result = try CLI.run(["validate", "--config", "examples/quickstart/norq.yaml"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("webpush (type webpush"), "\(result)")
        #expect(result.stdout.contains("vapidPrivateKey: ../keys/vapid-demo.pem (not shown)"), "\(result)")
        #expect(!result.stdout.contains("PRIVATE KEY"), "\(result)")
    }
}
