import Foundation
import Testing

/// Warnings and errors where the author is (issue 32): `render` and `send` warn about an `apns-expiration` in the
/// past (an error with `--strict`), recipient errors name the file and the JSON path, a conflicting loc key names
/// its line.
@Suite(.serialized) struct AuthorWarningsCLITests {
    /// A templates folder with template `t` (its push.md `pushMD`, one sample), and the quickstart's providers.
    func templates(_ pushMD: String) throws -> URL {
        let dir = try CLI.temporaryDirectory()
        let folder = dir.appendingPathComponent("t")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(pushMD.utf8).write(to: folder.appendingPathComponent("push.md"))
        try Data("Default: {}\n".utf8).write(to: folder.appendingPathComponent("data.samples.yaml"))
        return dir
    }

    static let pastExpiration = "---\ntitle: Hi\nheaders:\n  apns-expiration: 3600\n---\nHello\n"

    @Test func renderAndSendWarnAboutAnExpirationInThePastAndStrictRefuses() throws {
        let dir = try templates(Self.pastExpiration)
        let render = try CLI.run(["render", "t", "--config", quickstart, "--templates", dir.path])
        #expect(render.status == 0, "\(render)")
        #expect(render.stderr.contains("t/push.md:4:3: warning[push/implausible-expiration]: apns-expiration 3600"), "\(render)")
        #expect(render.stderr.contains("write \"1h\" for an hour from now"), "\(render)")
        let strict = try CLI.run(["render", "t", "--config", quickstart, "--templates", dir.path, "--strict"])
        #expect(strict.status == 1, "\(strict)")
        #expect(strict.stderr.contains("t/push.md:4:3: error[push/implausible-expiration]"), "\(strict)")
        #expect(!strict.stdout.contains("Hello"), "\(strict)")
        let token = "[{\"token\": \"\(String(repeating: "ab", count: 32))\", \"platform\": \"ios\"}]"
        let send = try CLI.run(["send", "t", "--config", quickstart, "--templates", dir.path, "--emulator",
                                "--to", token])
        #expect(send.status == 0, "\(send)")
        #expect(send.stderr.contains("warning[push/implausible-expiration]"), "\(send)")
        let strictSend = try CLI.run(["send", "t", "--config", quickstart, "--templates", dir.path, "--emulator",
                                      "--strict", "--to", token])
        #expect(strictSend.status == 1, "\(strictSend)")
        #expect(strictSend.stderr.contains("error[push/implausible-expiration]"), "\(strictSend)")
        #expect(!strictSend.stdout.contains("delivered"), "\(strictSend)")
        // A duration is relative to the send: no warning.
        try Data("---\ntitle: Hi\nheaders:\n  apns-expiration: 1h\n---\nHello\n".utf8)
            .write(to: dir.appendingPathComponent("t/push.md"))
        let relative = try CLI.run(["render", "t", "--config", quickstart, "--templates", dir.path, "--strict"])
        #expect(relative.status == 0 && !relative.stderr.contains("warning"), "\(relative)")
    }

    @Test func recipientErrorsNameTheFileAndTheJSONPath() throws {
        let dir = try CLI.temporaryDirectory()
        let file = dir.appendingPathComponent("recipients.json")
        let good = "{\"push\": {\"tokens\": [{\"token\": \"\(String(repeating: "ab", count: 32))\", \"platform\": \"ios\"}]}}"
        func write(_ bad: String) throws {
            try Data("[\(good), \(good), \(good), {\"push\": {\"tokens\": [{\"token\": \"\(String(repeating: "cd", count: 32))\", \"platform\": \"ios\"}, \(bad)]}}]".utf8)
                .write(to: file)
        }
        try write("{\"token\": \"abcdef0123456789\"}")
        let missing = try CLI.run(["render", "order-shipped", "--config", quickstart, "--to", file.path])
        #expect(missing.status == 1, "\(missing)")
        #expect(missing.stderr.contains("\(file.path): error[push/missing-platform]: [3].push.tokens[1]: push token"), "\(missing)")
        try write("{\"token\": \"abcdef0123456789\", \"platform\": \"ios\", \"environment\": \"staging\"}")
        let environment = try CLI.run(["send", "order-shipped", "--config", quickstart, "--to", file.path])
        #expect(environment.status == 1, "\(environment)")
        #expect(environment.stderr.contains("\(file.path): error[push/invalid-environment]: [3].push.tokens[1]: environment"), "\(environment)")
        let inline = try CLI.run(["render", "order-shipped", "--config", quickstart, "--to",
                                  "[{\"token\": \"abc\", \"platform\": \"ios\"}, {\"token\": \"abc\"}]"])
        #expect(inline.status == 1 && inline.stderr.contains("--to: error[push/missing-platform]: [1]: push token"), "\(inline)")
    }

    @Test func conflictingLocKeyNamesItsLine() throws {
        let dir = try templates("---\ntitle: Hi\nios:\n  sound: default\n  loc-key: GREETING\n---\nHello\n")
        let render = try CLI.run(["render", "t", "--config", quickstart, "--templates", dir.path])
        #expect(render.status == 1, "\(render)")
        #expect(render.stderr.contains("t/push.md:5:3: error[push/conflicting-loc-key]"), "\(render)")
    }
}
