import Foundation
import Testing

/// The CLI with the FCM provider: validate, the standalone FCM emulator.
@Suite(.serialized) struct CLIFCMTests {
    @Test func validateShowsTheFCMProviderWithoutKeyMaterial() throws {
        let result = try CLI.run(["validate", "--config", quickstart])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("norq-demo@norq-demo.iam.gserviceaccount.com"), "\(result)")
        #expect(!result.stdout.contains("PRIVATE KEY"), "\(result)")
        #expect(!result.stdout.contains("MIIE"), "\(result)")
    }

    @Test func serverKeyIsRefusedWithItsCode() throws {
        let dir = try CLI.temporaryDirectory()
        let config = dir.appendingPathComponent("norq.yaml")
        try Data("""
            templates: \(CLI.packageRoot.path)/templates
            providers:
              fcm:
                config:
                  projectId: norq-demo
                  serverKey: AAAAlegacy

            """.utf8).write(to: config)
        let result = try CLI.run(["validate", "--config", config.path])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("error[provider/fcm-legacy-server-key]"), "\(result)")
        #expect(result.stderr.contains("norq.yaml:6:"), "\(result)")
    }

    @Test func standaloneEmulatorWithFCM() throws {
        let emulator = try CLI.start(["emulator", "--config", quickstart, "--fcm"])
        defer { _ = emulator.stop() }
        let banner = try #require(emulator.waitForOutput { $0.contains("Ctrl-C") }, "emulator did not start")
        #expect(banner.contains("FCM emulator listening on https://127.0.0.1:"), "\(banner)")
        #expect(banner.contains("FCM auth: RS256 assertions of norq-demo@norq-demo.iam.gserviceaccount.com"), "\(banner)")
        #expect(banner.contains("tokenEndpoint: https://127.0.0.1:"), "\(banner)")
    }

    @Test func validateChecksPushTypesAgainstTheProviderTypes() throws {
        let dir = try CLI.temporaryDirectory()
        let folder = dir.appendingPathComponent("templates/bad-type")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data("---\ntitle: Hi\nheaders:\n  apns-push-type: banner\n---\nBody\n".utf8)
            .write(to: folder.appendingPathComponent("push.md"))
        let result = try CLI.run(["validate", "--config", quickstart, "--templates", dir.appendingPathComponent("templates").path])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("error[push/invalid-push-type]"), "\(result)")
        // The list in the hint is the APNs provider type's own (APNsPushType.all).
        #expect(result.stderr.contains("alert, background, complication, controls, fileprovider, liveactivity"), "\(result)")
    }

    @Test func renderShowsValidateOnlyInTheFCMBody() throws {
        let to = #"[{"token": "fcm-token-1:APA91b", "platform": "android"}]"#
        let result = try CLI.run(["render", "order-shipped", "--config", quickstart, "--sample", "default", "--to", to,
                                  "--validate-only"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains(#""validate_only": true"#), "\(result)")
        let plain = try CLI.run(["render", "order-shipped", "--config", quickstart, "--sample", "default", "--to", to])
        #expect(!plain.stdout.contains("validate_only"), "\(plain)")
    }
}
