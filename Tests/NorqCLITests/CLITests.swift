import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

let quickstart = "examples/quickstart/norq.yaml"
let recipientsFile = "examples/quickstart/recipients.json"
let token1 = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"

func parseJSON(_ text: String) throws -> Any {
    try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
}

@Suite(.serialized) struct RenderTests {
    @Test func rendersContentWithTheDefaultSample() throws {
        let result = try CLI.run(["render", "order-shipped", "--config", quickstart, "--sample", "default"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("title: Order #ORD-123 shipped"), "\(result)")
        #expect(result.stdout.contains("body: Hey Gaurav, your order is on its way!"), "\(result)")
        #expect(result.stdout.contains("action url: https://track.example.com/123"), "\(result)")
        #expect(result.stdout.contains("apns-collapse-id: order-ORD-123"), "\(result)")
        #expect(!result.stdout.contains("\u{1B}["), "no colours when stdout is not a terminal")
        #expect(result.stderr.isEmpty)
    }

    @Test func rendersInlineDataAndNamedSample() throws {
        let inline = try CLI.run(["render", "order-shipped", "--config", quickstart, "--data",
                                  #"{"order": {"id": "X-9", "items": []}, "user": {"first_name": "Lin"}, "tracking_url": "https://t.example/9"}"#])
        #expect(inline.status == 0, "\(inline)")
        #expect(inline.stdout.contains("Order #X-9 shipped"), "\(inline)")
        #expect(inline.stdout.contains("Hey Lin,"), "\(inline)")
        let named = try CLI.run(["render", "order-shipped", "--config", quickstart, "--sample", "no first name"])
        #expect(named.status == 0, "\(named)")
        #expect(named.stdout.contains("Hey there,"), "\(named)")
    }

    @Test func contentJSONParses() throws {
        let result = try CLI.run(["render", "order-shipped", "--config", quickstart, "--sample", "Default", "--json"])
        #expect(result.status == 0, "\(result)")
        let object = try #require(try parseJSON(result.stdout) as? [String: Any])
        #expect(object["title"] as? String == "Order #ORD-123 shipped")
        #expect(object["image"] as? String == "https://cdn.example.com/shipped-banner.png")
        let data = try #require(object["data"] as? [String: Any])
        #expect(data["orderId"] as? String == "ORD-123")
    }

    @Test func printsTheExactRequestPerToken() throws {
        let result = try CLI.run(["render", "order-shipped", "--config", quickstart, "--sample", "default",
                                  "--to", recipientsFile, "--idempotency-key", "k1", "--send-time", "1700000000"])
        #expect(result.status == 0, "\(result)")
        let out = result.stdout
        #expect(out.contains("POST https://api.sandbox.push.apple.com/3/device/\(token1)\n"), "\(result)")
        #expect(out.contains("routing: apns via routing push"), "\(result)")
        #expect(out.contains("apns-topic: com.example.MyApp\napns-push-type: alert\napns-priority: 10\napns-expiration: 1700003600\napns-collapse-id: order-ORD-123\napns-id: "), "\(result)")
        #expect(out.contains("authorization: bearer <redacted ES256 JWT kid=DEMO000000 iss=TEAM123ABC>"), "\(result)")
        #expect(out.contains("bytes of 4,096 allowed"), "\(result)")
        #expect(out.contains("\"aps\": {"), "pretty body: \(result)")
        #expect(out.contains("POST https://push.example.net/push/demo-web-1\nttl: 3600\nurgency: high\ntopic: order-ORD-123\ncontent-encoding: aes128gcm\n"), "\(result)")
        #expect(out.contains("authorization: vapid t=<redacted ES256 JWT aud=https://push.example.net exp="), "\(result)")
        #expect(out.contains("base64url:"), "the encrypted web body: \(result)")
        #expect(!out.contains("eyJ"), "no JWT is ever printed")
        #expect(!result.stderr.contains("eyJ"))
    }

    @Test func productionTokenGoesToTheProductionHost() throws {
        let to = #"[{"token": "\#(token1)", "platform": "ios", "environment": "production"}]"#
        let result = try CLI.run(["render", "order-shipped", "--config", quickstart, "--to", to, "--json"])
        #expect(result.status == 0, "\(result)")
        let object = try #require(try parseJSON(result.stdout) as? [String: Any])
        let deliveries = try #require(object["deliveries"] as? [[String: Any]])
        #expect(deliveries.count == 1)
        let request = try #require(deliveries[0]["request"] as? [String: Any])
        #expect(request["url"] as? String == "https://api.push.apple.com/3/device/\(token1)")
        #expect(request["environment"] as? String == "production")
        #expect(request["payloadLimit"] as? Int == 4096)
        let headers = try #require(request["headers"] as? [[String: String]])
        #expect(headers.map { $0["name"] ?? "" } == ["apns-topic", "apns-push-type", "apns-priority", "apns-expiration",
                                                     "apns-collapse-id", "apns-id", "authorization"])
        #expect(headers.last?["value"] == "bearer <redacted ES256 JWT kid=DEMO000000 iss=TEAM123ABC>")
        #expect(deliveries[0]["routing"] as? String == "routing push")
    }

    @Test func tokenWithoutRequestExitsTwo() throws {
        let to = #"[{"token": "nothex", "platform": "ios"}, {"token": "https://push.example/x", "platform": "web", "keys": {"p256dh": "p", "auth": "a"}}]"#
        let result = try CLI.run(["render", "order-shipped", "--config", quickstart, "--to", to])
        #expect(result.status == 2, "\(result)")
        #expect(result.stdout.contains("no request: error[apns/invalid-token-format]"), "\(result)")
        // The quick start routes web tokens to webpush, which refuses keys that are not a P-256 point.
        #expect(result.stdout.contains("no request: error[webpush/invalid-p256dh]"), "\(result)")
    }
}

@Suite(.serialized) struct BadInputTests {
    func expectFailure(_ arguments: [String], code: String, status: Int32 = 1, contains: String? = nil,
                       sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try CLI.run(arguments)
        #expect(result.status == status, "\(result)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains("error[\(code)]"), "\(result)", sourceLocation: sourceLocation)
        if let contains {
            #expect(result.stderr.contains(contains), "\(result)", sourceLocation: sourceLocation)
        }
        #expect(!result.stderr.contains("\u{1B}["), sourceLocation: sourceLocation)
    }

    @Test func missingDataFile() throws {
        try expectFailure(["render", "order-shipped", "--config", quickstart, "--data", "no/such/data.json"],
                          code: "cli/file-not-found", contains: "--data: no such file 'no/such/data.json'")
    }

    @Test func badInlineDataJSON() throws {
        try expectFailure(["render", "order-shipped", "--config", quickstart, "--data", #"{"order": "#],
                          code: "push/invalid-json", contains: "--data:1:")
    }

    @Test func badDataFileJSONPointsAtTheLine() throws {
        let dir = try CLI.temporaryDirectory()
        let file = dir.appendingPathComponent("data.json")
        try Data("{\n  \"order\": {\"id\": 1,}\n}\n".utf8).write(to: file)
        try expectFailure(["render", "order-shipped", "--config", quickstart, "--data", file.path],
                          code: "push/invalid-json", contains: "\(file.path):2:")
    }

    @Test func unknownTemplate() throws {
        try expectFailure(["render", "order-shiped", "--config", quickstart], code: "template/not-found",
                          contains: "order-shipped")
        try expectFailure(["send", "nope", "--config", quickstart, "--to", recipientsFile, "--emulator"],
                          code: "template/not-found")
    }

    @Test func unknownSample() throws {
        try expectFailure(["render", "order-shipped", "--config", quickstart, "--sample", "weekend"],
                          code: "cli/unknown-sample", contains: "\"Default\", \"No first name\"")
    }

    @Test func missingAndBadRecipients() throws {
        try expectFailure(["render", "order-shipped", "--config", quickstart, "--to", "missing.json"],
                          code: "cli/file-not-found", contains: "--to: no such file")
        try expectFailure(["render", "order-shipped", "--config", quickstart, "--to", "[{\"token\": 1"],
                          code: "push/invalid-json", contains: "--to:1:")
        try expectFailure(["render", "order-shipped", "--config", quickstart, "--to", #"[{"token": "ab", "platform": "fax"}]"#],
                          code: "push/unknown-platform")
        try expectFailure(["render", "order-shipped", "--config", quickstart, "--to", "[]"],
                          code: "cli/missing-recipients")
        try expectFailure(["send", "order-shipped", "--config", quickstart], code: "cli/missing-recipients")
    }

    @Test func missingConfig() throws {
        try expectFailure(["render", "order-shipped", "--config", "no/norq.yaml", "--to", recipientsFile],
                          code: "config/not-found")
    }

    @Test func badEnvironment() throws {
        try expectFailure(["render", "order-shipped", "--config", quickstart, "--to", recipientsFile,
                           "--environment", "staging"], code: "push/invalid-environment")
    }

    @Test func usageErrorIs64() throws {
        let result = try CLI.run(["render", "order-shipped", "--bogus"])
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains("--bogus"))
    }

    @Test func errorsAsJSONWhenAsked() throws {
        let result = try CLI.run(["render", "order-shipped", "--config", quickstart, "--sample", "x", "--json"])
        #expect(result.status == 1)
        let object = try #require(try parseJSON(result.stdout) as? [String: Any])
        let error = try #require(object["error"] as? [String: Any])
        #expect(error["code"] as? String == "cli/unknown-sample")
    }

    @Test func emulatorWithoutAPNsProvider() throws {
        let dir = try CLI.temporaryDirectory()
        let config = dir.appendingPathComponent("norq.yaml")
        try Data("templates: \(CLI.packageRoot.path)/templates\n".utf8).write(to: config)
        try expectFailure(["send", "order-shipped", "--config", config.path, "--to", recipientsFile, "--emulator"],
                          code: "cli/no-apns-provider")
    }

    @Test func emulatorKeyOptions() throws {
        try expectFailure(["emulator", "--key", "nope.p8", "--team", "TEAM123ABC"], code: "cli/file-not-found")
        try expectFailure(["emulator", "--key", "README.md", "--team", "TEAM123ABC", "--key-id", "ABC"],
                          code: "cli/invalid-option")
        try expectFailure(["emulator", "--key", "README.md", "--team", "TEAM123ABC"], code: "cli/invalid-option",
                          contains: "--key-id")
    }

    @Test func emulatorPortInUse() throws {
        let first = try CLI.start(["emulator", "--port", "0"])
        defer { _ = first.stop() }
        let banner = try #require(first.waitForOutput { $0.contains("Ctrl-C") }, "emulator did not start")
        let port = try #require(banner.split(separator: "\n").first?.split(separator: ":").last.map(String.init))
        try expectFailure(["emulator", "--port", port], code: "cli/emulator-failed")
    }
}

@Suite(.serialized) struct ValidateAndTestCommandTests {
    @Test func validatesConfigAndEveryTemplate() throws {
        let result = try CLI.run(["validate", "--config", quickstart])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("order-shipped: ok (rendered with 2 samples)"), "\(result)")
        #expect(result.stdout.hasSuffix("valid\n"))
        let json = try CLI.run(["validate", "--config", quickstart, "--json"])
        #expect(json.status == 0, "\(json)")
        let object = try #require(try parseJSON(json.stdout) as? [String: Any])
        #expect(object["valid"] as? Bool == true)
        let checks = try #require(object["templateChecks"] as? [[String: Any]])
        #expect(checks.contains { $0["template"] as? String == "order-shipped" && $0["ok"] as? Bool == true })
    }

    /// A templates directory with one good template and one whose sample fails to render.
    func brokenTemplates() throws -> URL {
        let dir = try CLI.temporaryDirectory()
        let good = dir.appendingPathComponent("hello")
        try FileManager.default.createDirectory(at: good, withIntermediateDirectories: true)
        try Data("---\ntitle: \"Hi {{name}}\"\n---\nHello {{name}}!\n".utf8).write(to: good.appendingPathComponent("push.md"))
        try Data("Default:\n  name: Ada\n".utf8).write(to: good.appendingPathComponent("data.samples.yaml"))
        try Data("""
            tests:
              - name: greets
                assert:
                  body: { eq: "Hello Ada!" }
              - name: wrong on purpose
                assert:
                  title: { eq: "Bye" }

            """.utf8).write(to: good.appendingPathComponent("tests.yaml"))
        let bad = dir.appendingPathComponent("broken")
        try FileManager.default.createDirectory(at: bad, withIntermediateDirectories: true)
        try Data("---\ntitle: Hi\n---\nHello {{user.name}}!\n".utf8).write(to: bad.appendingPathComponent("push.md"))
        try Data("Default:\n  other: 1\n".utf8).write(to: bad.appendingPathComponent("data.samples.yaml"))
        return dir
    }

    @Test func validateReportsTemplateErrorsWithLocation() throws {
        let dir = try brokenTemplates()
        let result = try CLI.run(["validate", "--config", quickstart, "--templates", dir.path])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("\(dir.path)/broken/push.md:4:"), "\(result)")
        #expect(result.stderr.contains(": error[template/missing-variable]"), "\(result)")
        #expect(result.stdout.contains("broken: 1 error"), "\(result)")
        #expect(result.stdout.hasSuffix("invalid\n"))
        let json = try CLI.run(["validate", "--config", quickstart, "--templates", dir.path, "--json"])
        #expect(json.status == 1)
        let object = try #require(try parseJSON(json.stdout) as? [String: Any])
        #expect(object["valid"] as? Bool == false)
    }

    @Test func testCommandPassesOnTheExamples() throws {
        let result = try CLI.run(["test", "order-shipped", "--config", quickstart])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("PASS order-shipped › body greets the customer"), "\(result)")
        #expect(result.stdout.contains(" 0 failed"), "\(result)")
        let all = try CLI.run(["test", "--config", quickstart, "--json"])
        #expect(all.status == 0, "\(all)")
        let object = try #require(try parseJSON(all.stdout) as? [String: Any])
        #expect((object["passed"] as? Int ?? 0) > 5)
        #expect(object["failed"] as? Int == 0)
    }

    @Test func testCommandFailsOnAFailingCase() throws {
        let dir = try brokenTemplates()
        let result = try CLI.run(["test", "hello", "--templates", dir.path, "--config", quickstart])
        #expect(result.status == 1, "\(result)")
        #expect(result.stdout.contains("PASS hello › greets"), "\(result)")
        #expect(result.stdout.contains("FAIL hello › wrong on purpose"), "\(result)")
        #expect(result.stdout.contains("1 passed, 1 failed"), "\(result)")
        let unknown = try CLI.run(["test", "nope", "--templates", dir.path, "--config", quickstart])
        #expect(unknown.status == 1)
        #expect(unknown.stderr.contains("error[template/not-found]"))
    }
}

@Suite(.serialized) struct SendTests {
    @Test func sendsThroughTheInProcessEmulator() throws {
        let result = try CLI.run(["send", "order-shipped", "--config", quickstart, "--sample", "default",
                                  "--to", recipientsFile, "--emulator"])
        #expect(result.status == 0, "\(result)")
        let delivered = result.stdout.split(separator: "\n").filter { $0.hasPrefix("delivered") }
        #expect(delivered.count == 5, "\(result)")
        #expect(result.stdout.contains("ios token a1b2c3d4… (user-1) via apns  apns-id "), "\(result)")
        #expect(result.stdout.contains("android token dQw4w9Wg… (user-1) via fcm  fcm-message projects/norq-demo/messages/"), "\(result)")
        #expect(result.stdout.contains("ios token fX7tQ2kL… (user-2) via fcm  fcm-message projects/norq-demo/messages/"), "\(result)")
        #expect(result.stdout.contains("FCM emulator (in-process) at https://localhost:"), "\(result)")
        #expect(result.stdout.contains("5 tokens: 5 delivered, 0 rejected, 0 failed, 0 skipped"), "\(result)")
        // The demo web subscription goes to the in-process push-service emulator, which decrypts it.
        #expect(result.stdout.contains("(user-3) via webpush"), "\(result)")
    }

    @Test func sendJSONAndExitTwoWhenSomeAreNotDelivered() throws {
        let to = #"[{"token": "\#(token1)", "platform": "ios"}, {"token": "zz", "platform": "ios"}]"#
        let result = try CLI.run(["send", "order-shipped", "--config", quickstart, "--to", to, "--emulator", "--json"])
        #expect(result.status == 2, "\(result)")
        let object = try #require(try parseJSON(result.stdout) as? [String: Any])
        let summary = try #require(object["summary"] as? [String: Any])
        #expect(summary["delivered"] as? Int == 1)
        #expect(summary["failed"] as? Int == 1)
    }

    /// A standalone emulator with an injected 410 for one token: send reports it rejected and exits 2.
    @Test func standaloneEmulatorFaultsAndExitTwo() throws {
        let dir = try CLI.temporaryDirectory()
        let root = CLI.packageRoot.path
        let emulator = try CLI.start(["emulator", "--key", "examples/keys/AuthKey_DEMO000000.p8", "--team", "TEAM123ABC",
                                      "--unregistered", token1, "--ca-out", dir.appendingPathComponent("ca.pem").path])
        defer { _ = emulator.stop() }
        let banner = try #require(emulator.waitForOutput { $0.contains("Ctrl-C") }, "emulator did not start")
        #expect(banner.contains("auth: ES256 JWT with kid=DEMO000000 iss=TEAM123ABC"))
        let endpoint = try #require(banner.split(separator: "\n").first?.split(separator: " ").last.map(String.init))
        let config = dir.appendingPathComponent("norq.yaml")
        try Data("""
            templates: \(root)/templates
            providers:
              apns:
                config:
                  keyId: DEMO000000
                  teamId: TEAM123ABC
                  keyPath: \(root)/examples/keys/AuthKey_DEMO000000.p8
                  bundleId: com.example.MyApp
                  endpoint: \(endpoint)
                  caPath: \(dir.appendingPathComponent("ca.pem").path)

            """.utf8).write(to: config)
        let iosOnly = #"[{"id": "user-1", "push": {"tokens": [{"token": "\#(token1)", "platform": "ios"}]}}, {"id": "user-2", "push": {"tokens": [{"token": "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0", "platform": "ios"}]}}]"#
        let result = try CLI.run(["send", "order-shipped", "--config", config.path, "--to", iosOnly])
        #expect(result.status == 2, "\(result)")
        #expect(result.stdout.contains("rejected   ios token a1b2c3d4… (user-1) via apns  410 Unregistered error[apns/unregistered] (token-invalid)  invalid since "), "\(result)")
        #expect(result.stdout.contains("delivered  ios token 0f1e2d3c… (user-2)"), "\(result)")
        #expect(result.stdout.contains("not all delivered: 2 tokens: 1 delivered, 1 rejected"), "\(result)")
    }

    /// The dry run prints exactly what the emulator then receives (only the JWT differs).
    @Test func dryRunIsByteIdenticalToTheWire() throws {
        let dir = try CLI.temporaryDirectory()
        let root = CLI.packageRoot.path
        let emulator = try CLI.start(["emulator", "--config", quickstart, "--log-requests",
                                      "--ca-out", dir.appendingPathComponent("ca.pem").path])
        defer { _ = emulator.stop() }
        let banner = try #require(emulator.waitForOutput { $0.contains("Ctrl-C") }, "emulator did not start")
        let endpoint = try #require(banner.split(separator: "\n").first?.split(separator: " ").last.map(String.init))
        #expect(endpoint.hasPrefix("https://127.0.0.1:"))
        let config = dir.appendingPathComponent("norq.yaml")
        try Data("""
            templates: \(root)/templates
            providers:
              apns:
                config:
                  keyId: DEMO000000
                  teamId: TEAM123ABC
                  keyPath: \(root)/examples/keys/AuthKey_DEMO000000.p8
                  bundleId: com.example.MyApp
                  endpoint: \(endpoint)
                  caPath: \(dir.appendingPathComponent("ca.pem").path)

            """.utf8).write(to: config)
        let sendTime = String(Int(Date().timeIntervalSince1970))
        let common = ["order-shipped", "--config", config.path, "--sample", "default", "--to",
                      #"[{"token": "\#(token1)", "platform": "ios"}]"#, "--idempotency-key", "order-1", "--send-time", sendTime]
        let dry = try CLI.run(["render"] + common + ["--json"])
        #expect(dry.status == 0, "\(dry)")
        let sent = try CLI.run(["send"] + common)
        #expect(sent.status == 0, "\(sent)")
        let log = try #require(emulator.waitForOutput { $0.contains("\"bodyText\"") }, "no request logged")
        let line = try #require(log.split(separator: "\n").first { $0.hasPrefix("{") })
        let received = try #require(try parseJSON(String(line)) as? [String: Any])

        let object = try #require(try parseJSON(dry.stdout) as? [String: Any])
        let deliveries = try #require(object["deliveries"] as? [[String: Any]])
        let request = try #require(deliveries.first?["request"] as? [String: Any])
        #expect(request["bodyText"] as? String == received["bodyText"] as? String)
        #expect(request["bodyBytes"] as? Int == received["bodyBytes"] as? Int)
        #expect(request["path"] as? String == received["path"] as? String)
        #expect(request["authority"] as? String == received["authority"] as? String)
        #expect(request["method"] as? String == received["method"] as? String)
        let printed = try #require(request["headers"] as? [[String: String]])
        let wire = try #require(received["headers"] as? [[String: String]])
        func comparable(_ headers: [[String: String]]) -> [String] {
            headers.map { ($0["name"] ?? "") + ": " + ($0["name"] == "authorization" ? "<jwt>" : ($0["value"] ?? "")) }
        }
        #expect(comparable(printed) == comparable(wire))
        #expect(wire.last?["value"]?.hasPrefix("bearer eyJ") == true, "a real JWT went over the wire")
        #expect(received["status"] as? Int == 200)
        // The apns-id the send reported is the one printed by the dry run.
        let apnsID = try #require(printed.first { $0["name"] == "apns-id" }?["value"])
        #expect(sent.stdout.contains("apns-id \(apnsID)"), "\(sent)")
        #expect(emulator.stop(signal: SIGINT) == 0)
    }
}
