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

    /// `--emulator` moves the providers' push-service origin to the in-process emulator and leaves the web tokens
    /// as they are, so a durable send repeated with the same idempotency key is the same send (not
    /// `idempotency/key-reused`), whatever port the emulator got on each run.
    @Test func durableRepeatWithWebTokensThroughTheEmulatorIsTheSameSend() throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let db = dir.appendingPathComponent("norq.db").path
        let keys = #""keys": {"p256dh": "BKCjp1WSg7IDKe3dkSVMishklWs4459OXVoS2crjl1jqju8PbORmCsqtxo2LmsRbX2fMOyuft4jx5Ueznj5Tp_Q", "auth": "SCcgLAlycoK6hUuYKyV4MQ"}"#
        // The quick start's demo subscription (decrypted by the emulator) and one on another push service and path.
        let recipients = """
            [{"id": "user-3", "push": {"tokens": [{"platform": "web", "token": "https://push.example.net/push/demo-web-1", \(keys)}]}},
             {"id": "user-4", "push": {"tokens": [{"platform": "web", "token": "https://fcm.googleapis.com/fcm/send/cRmVNSZMDD0:APA91bHq", \(keys)}]}}]
            """
        let send = ["send", "order-shipped", "--config", "examples/quickstart/norq.yaml", "--sample", "default",
                    "--to", recipients, "--emulator", "--store", db, "--idempotency-key", "web-order-1"]
        let first = try CLI.run(send)
        #expect(first.status == 0, "\(first)")
        #expect(first.stdout.contains("ok: 2 tokens: 2 delivered"), "\(first)")
        #expect(first.stdout.contains("delivered  web token https://push.example.net/…["), "\(first)")
        #expect(first.stdout.contains("delivered  web token https://fcm.googleapis.com/…["), "\(first)")
        #expect(!first.stdout.contains("demo-web-1") && !first.stdout.contains("APA91bHq"), "never a whole endpoint")
        let again = try CLI.run(send)
        #expect(again.status == 0, "\(again)")
        #expect(again.stdout.contains("idempotency key repeated: original send"), "\(again)")
        #expect(again.stdout.contains("ok: 2 tokens: 2 delivered"), "\(again)")
        #expect(!again.stderr.contains("idempotency/key-reused"), "\(again)")
    }

    @Test func validateShowsThePublicKeyOnly() throws {
        let result = try CLI.run(["validate", "--config", "examples/quickstart/norq.yaml"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("webpush (type webpush"), "\(result)")
        #expect(result.stdout.contains("vapidPrivateKey: ../keys/vapid-demo.pem (not shown)"), "\(result)")
        #expect(!result.stdout.contains("PRIVATE KEY"), "\(result)")
    }
}
