import Foundation
import Testing

/// `norq test` and `norq validate` measure payloads with the configured providers' own rules.
@Suite(.serialized) struct CLIPayloadSizeTests {
    /// A template whose APNs payload and Web Push plaintext fit (a 3,900-byte body) but whose FCM Android message
    /// does not (a 300-character `android.tag`, which only FCM sends).
    func templates() throws -> URL {
        let dir = try CLI.temporaryDirectory()
        let big = dir.appendingPathComponent("big")
        try FileManager.default.createDirectory(at: big, withIntermediateDirectories: true)
        let tag = String(repeating: "t", count: 300), body = String(repeating: "x", count: 3900)
        try Data("---\ntitle: Hi\nandroid:\n  tag: \(tag)\n---\n\(body)\n".utf8).write(to: big.appendingPathComponent("push.md"))
        try Data("Default: {}\n".utf8).write(to: big.appendingPathComponent("data.samples.yaml"))
        try Data("tests:\n  - name: fits\n    assert:\n      payload_bytes: { lt: 5000 }\n".utf8)
            .write(to: big.appendingPathComponent("tests.yaml"))
        return dir
    }

    @Test func testAndValidateNameTheProviderWhoseLimitIsExceeded() throws {
        let dir = try templates()
        let test = try CLI.run(["test", "big", "--templates", dir.path, "--config", quickstart])
        #expect(test.status == 1, "\(test)")
        #expect(test.stdout.contains("FAIL big › fits"), "\(test)")
        #expect(test.stdout.contains("payload_bytes: too large: fcm message for android tokens: 4,"), "\(test)")
        #expect(test.stdout.contains("over the limit of 4,096"), "\(test)")
        #expect(!test.stdout.contains("apns payload") && !test.stdout.contains("webpush"), "\(test)")
        let json = try CLI.run(["test", "big", "--templates", dir.path, "--config", quickstart, "--json"])
        #expect(json.status == 1, "\(json)")
        let object = try #require(try parseJSON(json.stdout) as? [String: Any])
        let templates = try #require(object["templates"] as? [[String: Any]])
        let cases = try #require(templates.first?["cases"] as? [[String: Any]])
        let sizes = try #require(cases.first?["payloadSizes"] as? [[String: Any]])
        #expect(sizes.map { $0["provider"] as? String } == ["apns", "fcm", "webpush"], "\(sizes)")
        let fcm = sizes[1]
        #expect(fcm["platform"] as? String == "android" && fcm["limit"] as? Int == 4096)
        let bytes = try #require(fcm["bytes"] as? Int)
        #expect(bytes > 4096 && fcm["over"] as? Int == bytes - 4096, "\(fcm)")
        #expect(sizes[0]["over"] as? Int == 0 && sizes[2]["limit"] as? Int == 3993, "\(sizes)")
        let validate = try CLI.run(["validate", "--config", quickstart, "--templates", dir.path])
        #expect(validate.status == 1, "\(validate)")
        #expect(validate.stderr.contains("error[template/payload-too-large]"), "\(validate)")
        #expect(validate.stderr.contains("fcm message for android tokens"), "\(validate)")
    }

    @Test func onlyTheConfiguredProvidersAreMeasured() throws {
        let dir = try templates()
        let config = dir.appendingPathComponent("norq.yaml")
        try Data("""
            templates: \(dir.path)
            providers:
              apns:
                config:
                  keyId: DEMO000000
                  teamId: TEAM123ABC
                  keyPath: \(CLI.packageRoot.path)/examples/keys/AuthKey_DEMO000000.p8
                  bundleId: com.example.MyApp
            routing:
              push: apns

            """.utf8).write(to: config)
        let test = try CLI.run(["test", "big", "--config", config.path])
        #expect(test.status == 0, "\(test)")
        #expect(test.stdout.contains("PASS big › fits"), "\(test)")
        let validate = try CLI.run(["validate", "--config", config.path])
        #expect(validate.status == 0, "\(validate)")
    }
}
