import Foundation
import Testing

/// `norq preview` as a command: its options and its failures, through the built binary.
@Suite(.serialized, .timeLimit(.minutes(2))) struct PreviewCommandTests {
    /// Runs `norq` to its end (bounded) and returns its exit status and output.
    static func run(_ arguments: [String]) throws -> (status: Int32?, output: String) {
        let process = try NorqProcess(arguments)
        let end = Date().addingTimeInterval(30)
        while process.process.isRunning, Date() < end { usleep(20_000) }
        if process.process.isRunning { return (process.stop(), process.output) }
        usleep(50_000)  // the last output
        return (process.process.terminationStatus, process.output)
    }

    @Test func aPortOutOfRangeIsAUsageError() throws {
        let (status, output) = try Self.run(["preview", "--port", "70000"])
        #expect(status == 1, "\(output)")
        #expect(output.contains("error[cli/invalid-option]: --port must be from 0 to 65535"), "\(output)")
    }

    @Test func aPortInUseFailsWithPreviewBindFailed() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        let first = try NorqProcess(["preview", "--config", fixture.config, "--port", "0"])
        defer { first.stop() }
        let line = try #require(first.waitForOutput { $0.contains("norq preview: http://127.0.0.1:") }, "\(first.output)")
        let port = try #require(line.components(separatedBy: "127.0.0.1:").last.flatMap { Int($0.prefix { $0.isNumber }) })
        let (status, output) = try Self.run(["preview", "--config", fixture.config, "--port", "\(port)"])
        #expect(status == 1, "\(output)")
        #expect(output.contains("error[preview/bind-failed]: could not listen on 127.0.0.1:\(port)"), "\(output)")
        #expect(first.stop() == 0)
    }

    /// `--open` starts `xdg-open` with the page's address (a stand-in on PATH records it), and says so when there
    /// is none.
    @Test func openStartsTheBrowserWithThePageAddress() async throws {
        let fixture = try PreviewFixture()
        defer { fixture.remove() }
        let bin = fixture.root.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let record = fixture.root.appendingPathComponent("opened.txt").path
        try "#!/bin/sh\necho \"$1\" > '\(record)'\n".write(toFile: bin.appendingPathComponent("xdg-open").path,
                                                       atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: bin.appendingPathComponent("xdg-open").path)
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = bin.path + ":/bin"
        let preview = try NorqProcess(["preview", "--config", fixture.config, "--port", "0", "--open"], environment: environment)
        defer { preview.stop() }
        let line = try #require(preview.waitForOutput { $0.contains("norq preview: http://127.0.0.1:") }, "\(preview.output)")
        let url = try #require(line.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
        let end = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: record), Date() < end { usleep(20_000) }
        usleep(100_000)
        #expect((try? String(contentsOfFile: record, encoding: .utf8)) == url + "\n")
        #expect(preview.stop() == 0)

        environment["PATH"] = fixture.root.appendingPathComponent("empty").path
        let without = try NorqProcess(["preview", "--config", fixture.config, "--port", "0", "--open"], environment: environment)
        defer { without.stop() }
        #expect(without.waitForOutput { $0.contains("--open: no xdg-open on PATH; open http://127.0.0.1:") } != nil,
                "\(without.output)")
    }

    @Test func helpSaysItListensOnLoopbackOnly() throws {
        let (status, output) = try Self.run(["preview", "--help"])
        #expect(status == 0)
        #expect(output.contains("127.0.0.1"))
        #expect(output.contains("--open"))
    }
}
