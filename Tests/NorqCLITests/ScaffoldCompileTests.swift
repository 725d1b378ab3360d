import Foundation
import Testing

/// `norq init --example`, `norq new --channels`, `norq compile` (issue 32).
@Suite(.serialized) struct ScaffoldCompileTests {
    @Test func initExampleWritesNorqsThreeNotificationsThatLintTestAndFormatClean() throws {
        let dir = try CLI.temporaryDirectory()
        let created = try CLI.run(["init", "--example"], directory: dir.path)
        #expect(created.status == 0, "\(created)")
        for id in ["system/security-alert", "transactional/order-confirmation", "promotional/weekly-digest"] {
            for file in ["push.md", "email.md", "sms.md", "slack.md", "data.schema.yaml", "data.samples.yaml", "tests.yaml"] {
                #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("notifications/\(id)/\(file)").path),
                        "\(id)/\(file)")
            }
        }
        let lint = try CLI.run(["lint", "--strict"], directory: dir.path)
        #expect(lint.status == 0 && lint.stdout.contains("3 templates: 0 errors, 0 warnings"), "\(lint)")
        let test = try CLI.run(["test"], directory: dir.path)
        #expect(test.status == 0 && test.stdout.contains("8 passed, 0 failed"), "\(test)")
        let fmt = try CLI.run(["fmt", "--check"], directory: dir.path)
        #expect(fmt.status == 0, "\(fmt)")
        let again = try CLI.run(["init", "--example"], directory: dir.path)
        #expect(again.status == 1 && again.stderr.contains("cli/already-exists"), "\(again)")
    }

    @Test func newWithChannelsScaffoldsEachChannelsFile() throws {
        let dir = try CLI.temporaryDirectory()
        #expect(try CLI.run(["init"], directory: dir.path).status == 0)
        let new = try CLI.run(["new", "transactional/welcome", "--channels", "push,email,sms"], directory: dir.path)
        #expect(new.status == 0, "\(new)")
        let folder = dir.appendingPathComponent("notifications/transactional/welcome")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(files == ["data.samples.yaml", "email.md", "push.md", "sms.md", "tests.yaml"], "\(files)")
        let emailOnly = try CLI.run(["new", "transactional/receipt", "--channels", "email"], directory: dir.path)
        #expect(emailOnly.status == 0, "\(emailOnly)")
        let receipt = try FileManager.default.contentsOfDirectory(atPath: dir.appendingPathComponent("notifications/transactional/receipt").path).sorted()
        #expect(receipt == ["data.samples.yaml", "email.md"], "\(receipt)")
        let lint = try CLI.run(["lint"], directory: dir.path)
        #expect(lint.status == 0, "\(lint)")
        let unknown = try CLI.run(["new", "transactional/x", "--channels", "push,fax"], directory: dir.path)
        #expect(unknown.status == 1 && unknown.stderr.contains("error[cli/invalid-option]: --channels: unknown channel \"fax\""), "\(unknown)")
    }

    @Test func compilePrintsNorqsOutputShape() throws {
        let result = try CLI.run(["compile", "order-shipped", "--config", quickstart])
        #expect(result.status == 0, "\(result)")
        let object = try #require(try parseJSON(result.stdout) as? [String: Any])
        #expect(object["title"] as? String == "Order #ORD-123 shipped")
        #expect(object["body"] as? String == "Hey Gaurav, your order is on its way!")
        #expect(object["image"] as? String == "https://cdn.example.com/shipped-banner.png")
        #expect(object["action_url"] as? String == "https://track.example.com/123")
        #expect(object["platforms"] as? [String] == ["ios", "android", "web"])
        let all = try CLI.run(["compile", "order-shipped", "--config", quickstart, "--all-samples"])
        let outputs = try #require(try parseJSON(all.stdout) as? [[String: Any]])
        #expect(outputs.map { $0["sample"] as? String } == ["Default", "No first name"], "\(all)")
        let noFirst = try #require(outputs.last?["output"] as? [String: Any])
        #expect((noFirst["body"] as? String)?.hasPrefix("Hey there") == true)
    }
}
