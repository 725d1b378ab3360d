import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Every example of README.md and docs/*.md runs as written (issue 34): each runnable shell block (see
/// `RunnableBlock`) runs against the in-process emulators or a local `norq serve`, with the executables already
/// built beside this test bundle; the Swift block of "Library use" is the runnable library example, to the byte.
@Suite(.serialized) struct ExamplesTests {
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The folder holding the built `norq` and `norq-example-library` (beside the test bundle, else .build/debug).
    static let products: URL = {
        var candidates: [URL] = []
        for bundle in Bundle.allBundles + [Bundle.main] {
            candidates.append(bundle.bundleURL)
            candidates.append(bundle.bundleURL.deletingLastPathComponent())
        }
        candidates.append(packageRoot.appendingPathComponent(".build/debug"))
        return candidates.first {
            FileManager.default.isExecutableFile(atPath: $0.appendingPathComponent("norq").path)
                && FileManager.default.isExecutableFile(atPath: $0.appendingPathComponent("norq-example-library").path)
        } ?? candidates[candidates.count - 1]
    }()

    /// README.md and every docs/*.md.
    static func markdownFiles() throws -> [String] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: packageRoot.appendingPathComponent("docs").path)
        return ["README.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
    }

    static func read(_ path: String) throws -> String {
        try String(contentsOf: packageRoot.appendingPathComponent(path), encoding: .utf8)
    }

    /// Every runnable block of the README and docs (a file that does not parse fails `markersParse`).
    static let blocks: [RunnableBlock] = {
        guard let files = try? markdownFiles() else { return [] }
        return files.flatMap { file in (try? read(file)).flatMap { try? RunnableBlock.parse($0, file: file) } ?? [] }
    }()

    @Test func markersParse() throws {
        for file in try Self.markdownFiles() {
            _ = try RunnableBlock.parse(try Self.read(file), file: file)
        }
    }

    /// The examples the issue names stay marked: removing a marker fails here, not silently.
    @Test func theKnownExamplesAreMarkedRunnable() {
        let readme = Self.blocks.filter { $0.file == "README.md" }
        #expect(readme.contains { $0.script.contains("norq send order-shipped") && $0.script.contains("--emulator") && $0.expectedOutput != nil })
        #expect(readme.contains { $0.script.contains("swift run norq-example-library --emulator") })
        #expect(Self.blocks.contains { $0.file == "docs/server.md" && $0.serveArguments != nil && $0.script.contains("$S/v1/sends") })
    }

    @Test(arguments: blocks)
    func runnableExampleRuns(_ block: RunnableBlock) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("norq-examples-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var environment = ["NO_COLOR": "1",
                           "NORQ_KEY_OPS": Self.randomKey(), "NORQ_KEY_CHECKOUT": Self.randomKey()]
        var script = block.script
        var server: Process?
        defer {
            if let server, server.isRunning {
                kill(server.processIdentifier, SIGTERM)
                let end = Date().addingTimeInterval(30)
                while server.isRunning, Date() < end { usleep(20_000) }
                if server.isRunning { kill(server.processIdentifier, SIGKILL) }
            }
        }
        if let arguments = block.serveArguments {
            #expect(script.contains("127.0.0.1:8080"), "\(block): a block with serve= uses the placeholder 127.0.0.1:8080")
            let (process, port) = try Self.serve(arguments + ["--store", directory.appendingPathComponent("norq.db").path,
                                                              "--port", "0"], environment: environment, in: directory)
            server = process
            script = script.replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(port)")
        }
        environment["PATH"] = Self.products.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let prelude = """
            set -e
            swift() {
              if [ "$1" = run ]; then shift; "$@"; else echo "swift $*: a runnable example may only 'swift run' a built product" >&2; return 127; fi
            }

            """
        let result = try Self.run(["/bin/bash", "-c", prelude + script], environment: environment, timeout: 120)
        #expect(result.status == 0 && !result.timedOut, "\(block) failed:\n\(result)")
        for text in block.expectations {
            #expect(result.stdout.contains(text), "\(block): the output lacks '\(text)':\n\(result)")
        }
        if let expected = block.expectedOutput {
            let shown = expected.map(RunnableBlock.normalized).filter { !$0.isEmpty }.sorted()
            let actual = result.stdout.split(separator: "\n").map { RunnableBlock.normalized(String($0)) }
                .filter { !$0.isEmpty }.sorted()
            #expect(shown == actual, "\(block): the output differs from the one the text shows:\n\(result)")
        }
    }

    /// README "Library use" shows examples/library/main.swift as it is.
    @Test func libraryUseIsTheRunnableExample() throws {
        let readme = try Self.read("README.md")
        let section = try #require(readme.range(of: "\n## Library use\n"), "README.md has no 'Library use' section")
        let rest = readme[section.upperBound...]
        let sectionEnd = rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex
        let open = try #require(rest[..<sectionEnd].range(of: "\n```swift\n"), "no ```swift block in 'Library use'")
        let close = try #require(rest[open.upperBound...].range(of: "\n```\n"))
        let shown = String(rest[open.upperBound..<close.lowerBound]) + "\n"
        let example = try Self.read("examples/library/main.swift")
        #expect(shown == example, "README.md 'Library use' differs from examples/library/main.swift: copy the file into the README")
    }

    @Test func parserReadsMarkersAndLeavesOtherBlocksAlone() throws {
        let text = """
            ```sh
            echo not marked
            ```
            <!-- runnable expect="a b" expect='"x":1' serve="-c f.yaml --emulator" -->
            ```sh
            echo one
            ```
            <!-- runnable expect-output -->
            ```sh
            echo two
            ```

            ```
            two 12 dc37b8b6-524a-5c17-ace3-2db5ee837e21 at https://localhost:4431/x in 0.25 s
            ```
            """
        let blocks = try RunnableBlock.parse(text, file: "t.md")
        #expect(blocks.count == 2)
        #expect(blocks.first?.script == "echo one\n")
        #expect(blocks.first?.expectations == ["a b", #""x":1"#])
        #expect(blocks.first?.serveArguments == ["-c", "f.yaml", "--emulator"])
        #expect(blocks.last?.expectedOutput == ["two 12 dc37b8b6-524a-5c17-ace3-2db5ee837e21 at https://localhost:4431/x in 0.25 s"])
        #expect(blocks.last.map { $0.expectedOutput!.map(RunnableBlock.normalized) } == ["two 12 <uuid> at https://localhost:<port>/x in <t> s"])
        #expect(throws: RunnableBlock.ParseError.self) { try RunnableBlock.parse("<!-- runnable -->\n```swift\n```\n", file: "t.md") }
        #expect(throws: RunnableBlock.ParseError.self) { try RunnableBlock.parse("<!-- runnable bogus -->\n```sh\n```\n", file: "t.md") }
    }

    // MARK: processes

    static func randomKey() -> String {
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    struct Result: CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String
        var timedOut: Bool
        var description: String { "exit \(status)\(timedOut ? " (timed out)" : "")\nstdout:\n\(stdout)\nstderr:\n\(stderr)" }
    }

    final class Bytes: Sendable {
        let data = Mutex(Data())
    }

    /// Runs `arguments` in the package root with `environment` added; kills it after `timeout` seconds.
    static func run(_ arguments: [String], environment: [String: String], timeout: Double) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        process.currentDirectoryURL = packageRoot
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        let outBytes = Bytes(), errBytes = Bytes()
        let group = DispatchGroup()
        try process.run()
        DispatchQueue.global().async(group: group) {
            let data = out.fileHandleForReading.readDataToEndOfFile()
            outBytes.data.withLock { $0 = data }
        }
        DispatchQueue.global().async(group: group) {
            let data = err.fileHandleForReading.readDataToEndOfFile()
            errBytes.data.withLock { $0 = data }
        }
        let end = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < end { usleep(20_000) }
        let timedOut = process.isRunning
        if timedOut { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        _ = group.wait(timeout: .now() + 5)
        return Result(status: process.terminationStatus,
                      stdout: String(decoding: outBytes.data.withLock { $0 }, as: UTF8.self),
                      stderr: String(decoding: errBytes.data.withLock { $0 }, as: UTF8.self), timedOut: timedOut)
    }

    /// Starts `norq serve arguments` (output in `directory`) and waits at most 60 s for the port it prints.
    static func serve(_ arguments: [String], environment: [String: String], in directory: URL) throws -> (Process, Int) {
        let process = Process()
        process.executableURL = products.appendingPathComponent("norq")
        process.arguments = ["serve"] + arguments
        process.currentDirectoryURL = packageRoot
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let out = directory.appendingPathComponent("serve.out"), err = directory.appendingPathComponent("serve.err")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let end = Date().addingTimeInterval(60)
        while Date() < end {
            let text = (try? String(contentsOf: out, encoding: .utf8)) ?? ""
            if let range = text.range(of: "listening on http://127.0.0.1:"),
               let port = Int(text[range.upperBound...].prefix { $0.isNumber }) {
                return (process, port)
            }
            if !process.isRunning { break }
            usleep(50_000)
        }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        let log = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
        throw RunnableBlock.ParseError("norq serve \(arguments.joined(separator: " ")) did not start (exit \(process.terminationStatus)):\n\(log)")
    }
}
