import Foundation
import Testing

/// `norq fmt [--check]` (issue 32): writes the canonical layout, `--check` writes nothing and exits 1, a second run
/// changes nothing.
@Suite(.serialized) struct FmtCommandTests {
    @Test func fmtWritesCheckReportsAndASecondRunChangesNothing() throws {
        let dir = try CLI.temporaryDirectory()
        let folder = dir.appendingPathComponent("t")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let push = folder.appendingPathComponent("push.md")
        let messy = "---\nheaders:\n    apns-priority: 10\ntitle: 'Hi'   # greeting\n---\nBody\n"
        try Data(messy.utf8).write(to: push)
        try Data("Default:\n    name: 'Ada'\n".utf8).write(to: folder.appendingPathComponent("data.samples.yaml"))
        let check = try CLI.run(["fmt", "--templates", dir.path, "--check", "--config", quickstart])
        #expect(check.status == 1, "\(check)")
        #expect(check.stdout.contains("would reformat \(push.path)"), "\(check)")
        #expect(try String(contentsOf: push, encoding: .utf8) == messy)
        let fmt = try CLI.run(["fmt", "--templates", dir.path, "--config", quickstart])
        #expect(fmt.status == 0, "\(fmt)")
        #expect(fmt.stdout.contains("2 files checked, 2 reformatted"), "\(fmt)")
        #expect(try String(contentsOf: push, encoding: .utf8) == "---\ntitle: Hi # greeting\nheaders:\n  apns-priority: 10\n---\nBody\n")
        let again = try CLI.run(["fmt", "--templates", dir.path, "--check", "--config", quickstart])
        #expect(again.status == 0 && again.stdout.contains("0 would be reformatted"), "\(again)")
    }

    @Test func unsupportedYAMLIsReportedAndLeftAlone() throws {
        let dir = try CLI.temporaryDirectory()
        let folder = dir.appendingPathComponent("t")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data("---\ntitle: Hi\n---\nBody\n".utf8).write(to: folder.appendingPathComponent("push.md"))
        let samples = folder.appendingPathComponent("data.samples.yaml")
        try Data("Default: &d\n  name: Ada\nOther: *d\n".utf8).write(to: samples)
        let fmt = try CLI.run(["fmt", "--templates", dir.path, "--config", quickstart])
        #expect(fmt.status == 1, "\(fmt)")
        #expect(fmt.stderr.contains("data.samples.yaml:1:1: error[template/fmt-unsupported]"), "\(fmt)")
        #expect(try String(contentsOf: samples, encoding: .utf8) == "Default: &d\n  name: Ada\nOther: *d\n")
    }
}
