import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Runs the built `norq` executable (next to the test bundle) with a timeout.
enum CLI {
    /// The package root (three levels above this file).
    static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `.build/<triple>/debug/norq`, found beside the test bundle.
    static let executable: URL = {
        var candidates: [URL] = []
        let bundle = Bundle.main.bundleURL
        candidates.append(bundle.appendingPathComponent("norq"))
        candidates.append(bundle.deletingLastPathComponent().appendingPathComponent("norq"))
        for bundle in Bundle.allBundles {
            candidates.append(bundle.bundleURL.deletingLastPathComponent().appendingPathComponent("norq"))
        }
        candidates.append(packageRoot.appendingPathComponent(".build/debug/norq"))
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[candidates.count - 1]
    }()

    struct Result: CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String
        var timedOut: Bool
        var description: String { "exit \(status)\(timedOut ? " (timed out)" : "")\nstdout:\n\(stdout)\nstderr:\n\(stderr)" }
    }

    /// Collects a pipe's bytes as they arrive.
    final class Collector: Sendable {
        let bytes = Mutex<[UInt8]>([])
        init(_ pipe: Pipe) {
            pipe.fileHandleForReading.readabilityHandler = { [self] handle in
                let data = handle.availableData
                if data.isEmpty {
                    handle.readabilityHandler = nil
                } else {
                    self.bytes.withLock { $0.append(contentsOf: data) }
                }
            }
        }
        var text: String { String(decoding: bytes.withLock { $0 }, as: UTF8.self) }
    }

    /// A started process (for the long-running emulator).
    final class Running: Sendable {
        let process: Process
        let out: Collector
        let err: Collector
        init(process: Process, out: Collector, err: Collector) {
            self.process = process
            self.out = out
            self.err = err
        }

        /// Waits (bounded) until stdout satisfies `condition`.
        func waitForOutput(timeout: Double = 20, _ condition: (String) -> Bool) -> String? {
            let end = Date().addingTimeInterval(timeout)
            while Date() < end {
                let text = out.text
                if condition(text) { return text }
                if !process.isRunning { return condition(out.text) ? out.text : nil }
                usleep(20_000)
            }
            return nil
        }

        func stop(signal number: Int32 = SIGTERM, timeout: Double = 10) -> Int32? {
            if process.isRunning { kill(process.processIdentifier, number) }
            let end = Date().addingTimeInterval(timeout)
            while process.isRunning, Date() < end { usleep(20_000) }
            if process.isRunning {
                process.terminate()
                return nil
            }
            return process.terminationStatus
        }
    }

    /// A `norq` process in the package root with piped output, no stdin and no colours (not started).
    static func makeProcess(_ arguments: [String], environment: [String: String],
                            directory: String? = nil) -> (Process, Pipe, Pipe) {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = directory.map {
            $0.hasPrefix("/") ? URL(fileURLWithPath: $0) : packageRoot.appendingPathComponent($0)
        } ?? packageRoot
        var env = ProcessInfo.processInfo.environment
        env["NO_COLOR"] = "1"
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        return (process, out, err)
    }

    static func start(_ arguments: [String], environment: [String: String] = [:]) throws -> Running {
        let (process, out, err) = makeProcess(arguments, environment: environment)
        let running = Running(process: process, out: Collector(out), err: Collector(err))
        try process.run()
        return running
    }

    /// Runs `norq arguments...` in the package root (or `directory`); kills it after `timeout` seconds.
    static func run(_ arguments: [String], timeout: Double = 60, environment: [String: String] = [:],
                    directory: String? = nil) throws -> Result {
        let (process, out, err) = makeProcess(arguments, environment: environment, directory: directory)
        let outBytes = DataBox(), errBytes = DataBox()
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
        while process.isRunning, Date() < end { usleep(10_000) }
        var timedOut = false
        if process.isRunning {
            timedOut = true
            process.terminate()
        }
        process.waitUntilExit()
        _ = group.wait(timeout: .now() + 5)
        return Result(status: process.terminationStatus,
                      stdout: String(decoding: outBytes.data.withLock { $0 }, as: UTF8.self),
                      stderr: String(decoding: errBytes.data.withLock { $0 }, as: UTF8.self), timedOut: timedOut)
    }

    final class DataBox: Sendable {
        let data = Mutex<Data>(Data())
    }

    /// A fresh temporary directory.
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("norq-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}
