import Foundation
import Testing

/// `norq lint` / `norq validate` report first what `norq send` refuses (issue 32): each routed provider's own
/// `prepare` runs on every sample, and its refusal names the template's file and the line of the key.
@Suite(.serialized) struct LintCommandTests {
    /// A self-signed certificate and its key encrypted with the passphrase `secret` (made once with openssl for
    /// this test; not a secret).
    static let certificatePEM = """
-----BEGIN CERTIFICATE-----
MIIBiDCCAS+gAwIBAgIUbLCsLE/vO5Bg6kGLWEsiFGqXA2MwCgYIKoZIzj0EAwIw
GTEXMBUGA1UEAwwObm9ycS1saW50LXRlc3QwIBcNMjYxMTI3MjA1NzAwWhgPMjEy
NjExMDMyMDU3MDBaMBkxFzAVBgNVBAMMDm5vcnEtbGludC10ZXN0MFkwEwYHKoZI
zj0CAQYIKoZIzj0DAQcDQgAEIZw8rnbPEcal0zg0x2OxCpMC+o2GmmM7t98KfiHT
lBZieZXZVYLAcdcvrHcEQBtbrfRRJXOEWphR31Po+eVxXaNTMFEwHQYDVR0OBBYE
FDNmbiLHFhmKhQQUH4MUgoqeZHXHMB8GA1UdIwQYMBaAFDNmbiLHFhmKhQQUH4MU
goqeZHXHMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDRwAwRAIgDh/tQnU1
EcRNNnF1OQ7Z3iDAFQdguzSTrU13DHT8mh0CIF+RVZHKl/8HVFQX1Qwdh3O0yM77
abALyFf/w/MsBO+B
-----END CERTIFICATE-----
"""
    static let encryptedKeyPEM = """
-----BEGIN ENCRYPTED PRIVATE KEY-----
MIHjME4GCSqGSIb3DQEFDTBBMCkGCSqGSIb3DQEFDDAcBAgAAHCk+FbDtgICCAAw
DAYIKoZIhvcNAgkFADAUBggqhkiG9w0DBwQI4pjNiPlzt1sEgZAhAjmnhfee2w9k
EbrIz9tepc+bZyZ/C+QmwNxP3cUJt+FhP+Ft6wWeVgMwIBUmxDBEEjShz61e6X4d
jGRu44YRxydV5vAsydLp4hLgk+Cjygx6pbhnLVGzxT2GNphJyUr3AYN3gFsygfWP
KkZ/jZbiSD1EaIEFEwFqTvpHZ2VpZFpr+C/WpsncnrKuNIcGm9s=
-----END ENCRYPTED PRIVATE KEY-----
"""

    /// A project: `norq.yaml` with a token-auth APNs provider routed for every push (plus `extra` providers), and
    /// one template `t` whose push.md is `pushMD` with one sample.
    func project(pushMD: String, extraProviders: String = "", samples: String? = "Default: {}\n") throws -> URL {
        let dir = try CLI.temporaryDirectory()
        let folder = dir.appendingPathComponent("templates/t")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(pushMD.utf8).write(to: folder.appendingPathComponent("push.md"))
        if let samples { try Data(samples.utf8).write(to: folder.appendingPathComponent("data.samples.yaml")) }
        try Data("""
            templates: ./templates
            providers:
              apns:
                config:
                  keyId: DEMO000000
                  teamId: TEAM123ABC
                  keyPath: \(CLI.packageRoot.path)/examples/keys/AuthKey_DEMO000000.p8
                  bundleId: com.example.MyApp
            \(extraProviders)
            routing:
              push: apns

            """.utf8).write(to: dir.appendingPathComponent("norq.yaml"))
        return dir
    }

    @Test func backgroundPushAtPriority10IsAnErrorAtTheLineOfApnsPriority() throws {
        let dir = try project(pushMD: """
            ---
            ios:
              content-available: true
            headers:
              apns-push-type: background
              apns-priority: 10
            ---

            """)
        let config = dir.appendingPathComponent("norq.yaml").path
        let lint = try CLI.run(["lint", "--config", config])
        #expect(lint.status == 1, "\(lint)")
        #expect(lint.stdout.contains("templates/t/push.md:6:3: error[apns/bad-priority]: provider apns for ios tokens refuses template \"t\""), "\(lint)")
        #expect(lint.stdout.contains("1 template: 1 error, 0 warnings"), "\(lint)")
        let validate = try CLI.run(["validate", "--config", config])
        #expect(validate.status == 1, "\(validate)")
        #expect(validate.stderr.contains("push.md:6:3: error[apns/bad-priority]"), "\(validate)")
        // The same template at priority 5 passes both.
        try Data("---\nios:\n  content-available: true\nheaders:\n  apns-push-type: background\n  apns-priority: 5\n---\n".utf8)
            .write(to: dir.appendingPathComponent("templates/t/push.md"))
        let fixed = try CLI.run(["lint", "--config", config, "--strict"])
        #expect(fixed.status == 0, "\(fixed)")
    }

    @Test func mdmPushOnATokenAuthProviderIsAnError() throws {
        let dir = try project(pushMD: """
            ---
            title: Enroll
            headers:
              apns-push-type: mdm
            ---
            Check in.

            """)
        let lint = try CLI.run(["lint", "--config", dir.appendingPathComponent("norq.yaml").path, "--json"])
        #expect(lint.status == 1, "\(lint)")
        let object = try #require(try parseJSON(lint.stdout) as? [String: Any])
        let findings = try #require(object["findings"] as? [[String: Any]])
        let mdm = try #require(findings.first { $0["code"] as? String == "apns/push-type-requires-certificate" }, "\(lint)")
        #expect(mdm["severity"] as? String == "error")
        #expect((mdm["file"] as? String)?.hasSuffix("templates/t/push.md") == true)
        #expect(mdm["line"] as? Int == 4 && mdm["column"] as? Int == 3, "\(mdm)")
        #expect(mdm["template"] as? String == "t" && mdm["provider"] as? String == "apns" && mdm["platform"] as? String == "ios")
        #expect(object["passed"] as? Bool == false && object["errors"] as? Int == 1)
    }

    /// A certificate provider whose encrypted key has no passphrase: validate loads the credentials and names the
    /// instance and the config line; sends to the token provider routing uses are not blocked by it.
    @Test func encryptedCertificateKeyWithoutPassphraseIsReportedAndDoesNotBlockOtherSends() throws {
        let scratch = try CLI.temporaryDirectory()
        let certPath = scratch.appendingPathComponent("cert.pem"), keyPath = scratch.appendingPathComponent("key.pem")
        try Data(Self.certificatePEM.utf8).write(to: certPath)
        try Data(Self.encryptedKeyPEM.utf8).write(to: keyPath)
        let dir = try project(pushMD: "---\ntitle: Hi\n---\nHello\n", extraProviders: """
              apns-cert:
                type: apns
                config:
                  certPath: \(certPath.path)
                  certKeyPath: \(keyPath.path)
                  bundleId: com.example.MyApp
            """)
        let config = dir.appendingPathComponent("norq.yaml").path
        let validate = try CLI.run(["validate", "--config", config])
        #expect(validate.status == 1, "\(validate)")
        #expect(validate.stderr.contains("norq.yaml:9:3: error[apns/invalid-certificate]: provider apns-cert (type apns, "), "\(validate)")
        #expect(validate.stderr.contains("wrong format or passphrase"), "\(validate)")
        let lint = try CLI.run(["lint", "--config", config])
        #expect(lint.status == 1 && lint.stdout.contains("error[apns/invalid-certificate]: provider apns-cert"), "\(lint)")
        // With the passphrase the same key loads.
        let withPassphrase = try String(contentsOfFile: config, encoding: .utf8)
            .replacingOccurrences(of: "      bundleId: com.example.MyApp\nrouting", with: "      bundleId: com.example.MyApp\n      passphrase: secret\nrouting")
        try Data(withPassphrase.utf8).write(to: URL(fileURLWithPath: config))
        let fixed = try CLI.run(["validate", "--config", config])
        #expect(fixed.status == 0, "\(fixed)")
        try Data(withPassphrase.replacingOccurrences(of: "      passphrase: secret\n", with: "").utf8)
            .write(to: URL(fileURLWithPath: config))
        // A send routed to `apns` goes on; a token that names `apns-cert` fails with the instance's error.
        let token = String(repeating: "ab", count: 32)
        let render = try CLI.run(["render", "t", "--config", config, "--to",
                                  "[{\"token\": \"\(token)\", \"platform\": \"ios\"}]"])
        #expect(render.status == 0, "\(render)")
        #expect(render.stdout.contains("POST https://api.sandbox.push.apple.com/3/device/"), "\(render)")
        let named = try CLI.run(["render", "t", "--config", config, "--to",
                                 "[{\"token\": \"\(token)\", \"platform\": \"ios\", \"provider\": \"apns-cert\"}]"])
        #expect(named.status == 2, "\(named)")
        #expect(named.stdout.contains("apns/invalid-certificate") && named.stdout.contains("apns-cert"), "\(named)")
        let send = try CLI.run(["send", "t", "--config", config, "--emulator", "--to",
                                "[{\"token\": \"\(token)\", \"platform\": \"ios\"}]"])
        #expect(send.status == 0, "\(send)")
        #expect(send.stdout.contains("1 delivered"), "\(send)")
    }

    /// A payload over FCM's limit for Android but within APNs' and Web Push's: one error naming fcm and the
    /// template's file, none for the others.
    @Test func payloadOverOneProvidersLimitOnly() throws {
        let dir = try CLI.temporaryDirectory()
        let big = dir.appendingPathComponent("big")
        try FileManager.default.createDirectory(at: big, withIntermediateDirectories: true)
        let tag = String(repeating: "t", count: 300), body = String(repeating: "x", count: 3900)
        try Data("---\ntitle: Hi\nandroid:\n  tag: \(tag)\n---\n\(body)\n".utf8).write(to: big.appendingPathComponent("push.md"))
        try Data("Default: {}\n".utf8).write(to: big.appendingPathComponent("data.samples.yaml"))
        let lint = try CLI.run(["lint", "--config", quickstart, "--templates", dir.path, "--json"])
        #expect(lint.status == 1, "\(lint)")
        let object = try #require(try parseJSON(lint.stdout) as? [String: Any])
        let findings = try #require(object["findings"] as? [[String: Any]])
        let errors = findings.filter { $0["severity"] as? String == "error" }
        #expect(errors.count == 1, "\(findings)")
        let error = try #require(errors.first)
        #expect(error["code"] as? String == "template/payload-too-large")
        #expect((error["file"] as? String)?.hasSuffix("big/push.md") == true && error["line"] as? Int == 1, "\(error)")
        let message = try #require(error["message"] as? String)
        #expect(message.contains("template \"big\"") && message.contains("fcm message for android tokens"), "\(message)")
        #expect(!message.contains("apns payload") && !message.contains("webpush"), "\(message)")
        // Within every limit once the tag is short.
        try Data("---\ntitle: Hi\nandroid:\n  tag: short\n---\n\(body)\n".utf8).write(to: big.appendingPathComponent("push.md"))
        let fixed = try CLI.run(["lint", "--config", quickstart, "--templates", dir.path])
        #expect(fixed.status == 0, "\(fixed)")
    }

    @Test func templateWithoutSamplesIsAWarningAndStrictFailsOnIt() throws {
        let dir = try project(pushMD: "---\ntitle: Hi {{name}}\n---\nHello\n", samples: nil)
        let config = dir.appendingPathComponent("norq.yaml").path
        let lint = try CLI.run(["lint", "--config", config])
        #expect(lint.status == 0, "\(lint)")
        #expect(lint.stdout.contains("templates/t/push.md:1:1: warning[template/no-samples]"), "\(lint)")
        let strict = try CLI.run(["lint", "--config", config, "--strict"])
        #expect(strict.status == 1, "\(strict)")
        #expect(strict.stdout.contains("(--strict: warnings fail)"), "\(strict)")
    }

    @Test func lintNamesOnlyTheTemplatesAskedFor() throws {
        let result = try CLI.run(["lint", "order-shipped", "--config", quickstart, "--json"])
        #expect(result.status == 0, "\(result)")
        let object = try #require(try parseJSON(result.stdout) as? [String: Any])
        let templates = try #require(object["templates"] as? [[String: Any]])
        #expect(templates.map { $0["template"] as? String } == ["order-shipped"], "\(templates)")
        let unknown = try CLI.run(["lint", "no-such-template", "--config", quickstart])
        #expect(unknown.status == 1 && unknown.stdout.contains("error[template/not-found]"), "\(unknown)")
    }

    /// Norq's `parse/error` is `template/syntax-error` here (and three finer codes); `--json` gives both.
    @Test func aSyntaxErrorCarriesNorqsParseErrorCode() throws {
        let dir = try project(pushMD: "---\ntitle: Hi\n---\nHello {{name\n")
        let lint = try CLI.run(["lint", "--config", dir.appendingPathComponent("norq.yaml").path, "--json"])
        #expect(lint.status == 1, "\(lint)")
        let object = try #require(try parseJSON(lint.stdout) as? [String: Any])
        let findings = try #require(object["findings"] as? [[String: Any]])
        let syntax = try #require(findings.first { $0["code"] as? String == "template/syntax-error" }, "\(lint)")
        #expect(syntax["norqCode"] as? String == "parse/error")
        #expect(syntax["line"] as? Int == 4, "\(syntax)")
    }

    /// `apns/invalid-live-activity` names the template, the sample and a line (issue 32's "names no template").
    @Test func anIncompleteLiveActivityNamesTheTemplateAndLine() throws {
        let dir = try project(pushMD: "---\nheaders:\n  apns-push-type: liveactivity\nios:\n  event: update\n---\n")
        let validate = try CLI.run(["validate", "--config", dir.appendingPathComponent("norq.yaml").path])
        #expect(validate.status == 1, "\(validate)")
        #expect(validate.stderr.contains("templates/t/push.md:5:3: error[apns/invalid-live-activity]: provider apns for ios tokens refuses template \"t\" (sample \"Default\"): a Live Activity update needs content-state"), "\(validate)")
    }
}
