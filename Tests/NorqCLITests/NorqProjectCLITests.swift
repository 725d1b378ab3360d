import Foundation
import Testing

/// The Norq fixture project (`examples/norq-project`) end to end: validate, test, render, send (issue 17).
@Suite(.serialized) struct NorqProjectCLITests {
    static let project = "examples/norq-project"
    static let shipped = "transactional/orders/order-shipped"

    @Test func validateListsPushTemplatesAndWhatIsNotServed() throws {
        let result = try CLI.run(["validate", "-c", Self.project])
        #expect(result.status == 0, "\(result)")
        let out = result.stdout
        #expect(out.contains("notifications: examples/norq-project/./notifications"), "\(result)")
        #expect(out.contains("resend (type resend, email): not served by this router"), "\(result)")
        #expect(out.contains("twilio (type twilio, sms, whatsapp): not served by this router"), "\(result)")
        #expect(out.contains("console (type console, from "), "console is a real push provider: \(result)")
        #expect(out.contains("email: resend (not served by this router: it sends push only)"), "\(result)")
        #expect(out.contains("\(Self.shipped): ok (rendered with 2 samples)"), "\(result)")
        #expect(out.contains("system/security-alert: ok"), "\(result)")
        #expect(out.contains("promotional/weekly-digest: ok"), "\(result)")
        #expect(out.contains("transactional/welcome: no push template (email.md not served by this router)"), "\(result)")
        #expect(out.hasSuffix("valid\n"), "\(result)")
        #expect(!result.stderr.contains("error["), "\(result)")
    }

    @Test func validateJSONFromTheProjectFolder() throws {
        let result = try CLI.run(["validate", "--config", Self.project + "/norq.config.yaml", "--json"])
        #expect(result.status == 0, "\(result)")
        let object = try #require(try parseJSON(result.stdout) as? [String: Any])
        #expect(object["templatesKey"] as? String == "notifications")
        let unserved = try #require(object["notServedProviders"] as? [[String: Any]])
        #expect(unserved.compactMap { $0["name"] as? String } == ["resend", "twilio"])
        let checks = try #require(object["templateChecks"] as? [[String: Any]])
        #expect(checks.compactMap { $0["template"] as? String } == [
            "promotional/weekly-digest", "system/security-alert", Self.shipped, "transactional/welcome",
        ])
    }

    @Test func testRunsTheProjectsTests() throws {
        let result = try CLI.run(["test", "-c", Self.project])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("PASS \(Self.shipped) › partial signature"), "\(result)")
        #expect(result.stdout.contains("PASS system/security-alert › names the device"), "\(result)")
        #expect(result.stdout.contains("4 passed, 0 failed"), "\(result)")
    }

    @Test func renderByNorqID() throws {
        let result = try CLI.run(["render", Self.shipped, "-c", Self.project, "--sample", "No carrier"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("title: Order #ORD-456 shipped"), "\(result)")
        #expect(result.stdout.contains("Hey there, your order is on its way!"), "\(result)")
        #expect(!result.stdout.contains("Carrier"), "\(result)")
        let request = try CLI.run(["render", "promotional/weekly-digest", "-c", Self.project, "--to",
                                   Self.project + "/recipients.json", "--send-time", "1700000000"])
        #expect(request.status == 0, "\(request)")
        #expect(request.stdout.contains("apns-topic: com.example.MyApp\n"), "\(request)")
        #expect(request.stdout.contains("POST console://console/android"), "\(request)")
        let other = try CLI.run(["render", "promotional/weekly-digest", "-c", Self.project, "--to",
                                 #"[{"token": "\#(token1)", "platform": "ios"}]"#, "--topic", "com.example.Watch"])
        #expect(other.status == 0, "\(other)")
        #expect(other.stdout.contains("apns-topic: com.example.Watch\n"), "--topic wins over the template: \(other)")
        let shipped = try CLI.run(["render", Self.shipped, "-c", Self.project, "--to",
                                   #"[{"token": "\#(token1)", "platform": "ios"}]"#, "--send-time", "1700000000"])
        #expect(shipped.stdout.contains("apns-expiration: 1700086400\n"), "\"1d\" is relative to the send: \(shipped)")
    }

    @Test func dataIsCheckedAgainstTheSchema() throws {
        let result = try CLI.run(["render", Self.shipped, "-c", Self.project, "--sample", "Default",
                                  "--data", #"{"order": {"id": 7}}"#])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("error[template/data-schema]: --data: data.order.id: expected string, got integer"),
                "\(result)")
        #expect(result.stderr.contains("data.schema.yaml:"), "the schema file is named: \(result)")
    }

    @Test func sendThroughTheEmulatorAndConsole() throws {
        let result = try CLI.run(["send", Self.shipped, "-c", Self.project, "--to", Self.project + "/recipients.json",
                                  "--emulator"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("delivered  ios token a1b2c3d4… (user-1) via apns  apns-id "), "\(result)")
        #expect(result.stdout.contains("  apns-unique-id "), "the emulator answers one, as the sandbox does: \(result)")
        #expect(result.stdout.contains("delivered  android token fcm-demo… (user-1) via console  message-id "), "\(result)")
        #expect(result.stdout.contains("console console: POST console://console/android"), "\(result)")
        #expect(result.stdout.contains("2 tokens: 2 delivered"), "\(result)")
    }

    @Test func unknownIDSuggestsTheNorqID() throws {
        let result = try CLI.run(["render", "order-shipped", "-c", Self.project])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("error[template/not-found]"), "\(result)")
        #expect(result.stderr.contains("did you mean '\(Self.shipped)'?"), "\(result)")
    }

    @Test func discoveryScansDownFromAParentFolder() throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        for (folder, provider) in [("node_modules/pkg", "skipped"), ("apps/mobile/project", "found")] {
            let url = dir.appendingPathComponent(folder)
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            try Data("providers:\n  \(provider):\n    type: console\n    config: {}\n".utf8)
                .write(to: url.appendingPathComponent("norq.config.yaml"))
        }
        let result = try CLI.run(["validate"], directory: dir.path)
        // Unless a norq.yaml sits in a parent of the temporary folder, the scan down finds the project.
        if !result.stdout.contains("config: /tmp/norq.") && !result.stdout.contains("config: /norq.") {
            #expect(result.status == 0, "\(result)")
            #expect(result.stdout.contains("apps/mobile/project/norq.config.yaml"), "\(result)")
            #expect(result.stdout.contains("found (type console"), "\(result)")
        }
    }

    @Test func strictValidateFailsOnWarnings() throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let notification = dir.appendingPathComponent("notifications/system/ping")
        try FileManager.default.createDirectory(at: notification, withIntermediateDirectories: true)
        try Data("notifications: ./notifications\nproviders:\n  console:\n    config: {}\n".utf8)
            .write(to: dir.appendingPathComponent("norq.config.yaml"))
        try Data("---\ntitle: Ping\nheaders:\n  apns-expiration: 3600\n---\nHi {{{name}}}\n".utf8)
            .write(to: notification.appendingPathComponent("push.md"))
        try Data("Default:\n  name: Ada\n".utf8).write(to: notification.appendingPathComponent("data.samples.yaml"))
        let lenient = try CLI.run(["validate", "-c", dir.path])
        #expect(lenient.status == 0, "\(lenient)")
        #expect(lenient.stderr.contains("push.md:4:"), "\(lenient)")
        #expect(lenient.stderr.contains("warning[push/implausible-expiration]"), "\(lenient)")
        #expect(lenient.stderr.contains("3600 is 1970-01-01T01:00:00Z; write \"1h\" for an hour from now"), "\(lenient)")
        #expect(lenient.stderr.contains("push.md:6:4: warning[template/raw-expression]"), "\(lenient)")
        #expect(lenient.stdout.contains("2 warnings\nvalid\n"), "\(lenient)")
        let strict = try CLI.run(["validate", "-c", dir.path, "--strict"])
        #expect(strict.status == 1, "\(strict)")
        #expect(strict.stdout.hasSuffix("invalid\n"), "\(strict)")
    }

    @Test func channelsTakesShortC() throws {
        let result = try CLI.run(["channels", "list", "-c", quickstart, "--dry-run"])
        #expect(result.status == 0, "\(result)")
    }

    @Test func environmentOptionIsTheDefaultAndATokensOwnWins() throws {
        let to = #"[{"token": "\#(token1)", "platform": "ios", "environment": "sandbox"}, {"token": "\#(String(token1.reversed()))", "platform": "ios"}]"#
        let result = try CLI.run(["render", "order-shipped", "-c", quickstart, "--to", to, "--environment", "production"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("POST https://api.sandbox.push.apple.com/3/device/\(token1)\n"), "\(result)")
        #expect(result.stdout.contains("POST https://api.push.apple.com/3/device/\(String(token1.reversed()))\n"), "\(result)")
    }

    @Test func helpSaysWhatEnvironmentAndIdempotencyDo() throws {
        let result = try CLI.run(["send", "--help"])
        let text = result.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" }).joined(separator: " ")
        #expect(text.contains("a token's own \"environment\" always wins"), "\(result)")
        #expect(text.contains("Across runs it protects only with a durable store (--store, or store: in the config)"), "\(result)")
        #expect(text.contains("Without one, two runs with the same key both send."), "\(result)")
    }

    @Test func initThenNewThenTest() throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let initialized = try CLI.run(["init", "--directory", dir.path])
        #expect(initialized.status == 0, "\(initialized)")
        let again = try CLI.run(["init", "--directory", dir.path])
        #expect(again.status == 1 && again.stderr.contains("error[cli/already-exists]"), "\(again)")
        let created = try CLI.run(["new", "transactional/account/welcome-back", "-c", dir.path])
        #expect(created.status == 0, "\(created)")
        #expect(created.stdout.contains("notifications/transactional/account/welcome-back/push.md"), "\(created)")
        let twice = try CLI.run(["new", "transactional/account/welcome-back", "-c", dir.path])
        #expect(twice.status == 1 && twice.stderr.contains("error[cli/already-exists]"), "\(twice)")
        let badID = try CLI.run(["new", "marketing/Welcome", "-c", dir.path])
        #expect(badID.status == 1 && badID.stderr.contains("error[template/invalid-id]"), "\(badID)")
        let tested = try CLI.run(["test", "-c", dir.path])
        #expect(tested.status == 0, "\(tested)")
        #expect(tested.stdout.contains("2 passed, 0 failed"), "\(tested)")
        let validated = try CLI.run(["validate", "-c", dir.path, "--strict"])
        #expect(validated.status == 0, "\(validated)")
        let sent = try CLI.run(["send", "transactional/account/welcome-back", "-c", dir.path, "--to",
                                #"[{"token": "\#(token1)", "platform": "ios"}]"#])
        #expect(sent.status == 0, "\(sent)")
        #expect(sent.stdout.contains("console console: POST console://console/ios"), "\(sent)")
        #expect(sent.stdout.contains("\"title\": \"Welcome Back\""), "\(sent)")
    }

    @Test func scaffoldingWhereAFileBlocksTheFolder() throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let blocker = dir.appendingPathComponent("not-a-folder")
        try Data("x".utf8).write(to: blocker)
        let result = try CLI.run(["init", "--directory", blocker.appendingPathComponent("project").path])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("error[cli/write-failed]"), "\(result)")
    }

    @Test func providerListSaysConfigOrEnv() throws {
        let result = try CLI.run(["provider", "list", "-c", Self.project])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("apns  apns  configured (config)  push: ios"), "\(result)")
        #expect(result.stdout.contains("console  console  configured (config)  push: android, ios, web"), "\(result)")
        #expect(result.stdout.contains("resend  resend  configured (config)  not served by this router (email)"), "\(result)")
        let empty = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: empty) }
        let env = try CLI.run(["provider", "list", "--json"], environment: [
            "NORQ_APNS_KEY_ID": "DEMO000000", "NORQ_APNS_TEAM_ID": "TEAM123ABC", "NORQ_APNS_BUNDLE_ID": "com.example.MyApp",
            "NORQ_APNS_KEY_PATH": CLI.packageRoot.path + "/examples/keys/AuthKey_DEMO000000.p8",
        ], directory: empty.path)
        #expect(env.status == 0, "\(env)")
        let object = try #require(try parseJSON(env.stdout) as? [String: Any])
        let providers = try #require(object["providers"] as? [[String: Any]])
        #expect(providers.first?["configured"] as? String == "env", "\(env)")
    }
}

/// The Expo example project (`examples/expo-project`, issue 31): `routing: push: expo` sends through the in-process
/// Expo emulator, and `--wait-receipts` reports the receipts.
@Suite struct ExpoProjectCLITests {
    static let project = "examples/expo-project"
    static let shipped = "transactional/orders/order-shipped"

    @Test func validates() throws {
        let result = try CLI.run(["validate", "-c", Self.project])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("expo (type expo"), "\(result)")
        #expect(result.stdout.contains("auth: anonymous (no access token)"), "\(result)")
    }

    @Test func sendsThroughTheExpoEmulatorAndWaitsForReceipts() throws {
        let accepted = try CLI.run(["send", Self.shipped, "-c", Self.project, "--to", Self.project + "/recipients.json",
                                    "--sample", "Default", "--emulator"])
        #expect(accepted.status == 0, "\(accepted)")
        #expect(accepted.stdout.contains("Expo emulator (in-process)"), "\(accepted)")
        #expect(accepted.stdout.contains("accepted   ios token Exponent… (user-1) via expo  expo-ticket "), "\(accepted)")
        #expect(accepted.stdout.contains("2 tokens: 0 delivered, 2 accepted, 0 rejected"), "\(accepted)")
        let waited = try CLI.run(["send", Self.shipped, "-c", Self.project, "--to", Self.project + "/recipients.json",
                                  "--sample", "Default", "--emulator", "--wait-receipts", "20"])
        #expect(waited.status == 0, "\(waited)")
        #expect(waited.stdout.contains("receipt: delivered  android token Exponent… (user-1) via expo  expo-ticket "), "\(waited)")
        #expect(waited.stdout.contains("2 tokens: 2 delivered, 0 rejected"), "\(waited)")
    }
}
