import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: commands on fd 3,
/// answers on fd 4, each a JSON message ended by a NUL byte), through two FIFOs that a shell gives Chromium as
/// fds 3 and 4. Every wait is bounded; only 127.0.0.1 resolves (`--host-resolver-rules`), so a page's images
/// from other hosts fail at once instead of reaching the internet.
final class Chromium: Sendable {
    /// The Chromium executable: `NORQ_CHROMIUM`, else `chromium`, `chromium-browser` or `google-chrome` on PATH.
    static let path: String? = {
        let environment = ProcessInfo.processInfo.environment
        if let explicit = environment["NORQ_CHROMIUM"], FileManager.default.isExecutableFile(atPath: explicit) {
            return explicit
        }
        let directories = (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            for directory in directories {
                let candidate = "\(directory)/\(name)"
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            }
        }
        return nil
    }()

    /// `NORQ_REQUIRE_BROWSER` is set (scripts/test.sh sets it): a missing Chromium fails the test instead of skipping it.
    static let required = ProcessInfo.processInfo.environment["NORQ_REQUIRE_BROWSER"].map { !$0.isEmpty && $0 != "0" } ?? false

    let process: Process
    let directory: URL
    let commands: Int32
    let answers: Int32
    let inbox = Inbox()
    let nextID = Mutex(0)

    /// What the reader thread has read, and its stop and finished flags.
    final class Inbox: Sendable {
        let bytes = Mutex<[UInt8]>([])
        let stop = Mutex(false)
        let finished = Mutex(false)
    }

    init(executable: String) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("norq-chromium-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let input = directory.appendingPathComponent("in").path
        let output = directory.appendingPathComponent("out").path
        guard mkfifo(input, 0o600) == 0, mkfifo(output, 0o600) == 0 else {
            throw BrowserError("mkfifo failed: errno \(errno)")
        }
        // O_RDWR on a FIFO does not wait for the other end (Linux), so neither side blocks in open().
        commands = Glibc.open(input, O_RDWR)
        answers = Glibc.open(output, O_RDWR)
        guard commands >= 0, answers >= 0 else { throw BrowserError("opening the FIFOs failed: errno \(errno)") }
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", #"exec "$NORQ_CHROMIUM_PATH" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run --remote-debugging-pipe --window-size=1280,1100 --host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1" --user-data-dir="$NORQ_CHROMIUM_PROFILE" about:blank 3<"$NORQ_CHROMIUM_IN" 4>"$NORQ_CHROMIUM_OUT""#]
        var environment = ProcessInfo.processInfo.environment
        environment["NORQ_CHROMIUM_PATH"] = executable
        environment["NORQ_CHROMIUM_PROFILE"] = directory.appendingPathComponent("profile").path
        environment["NORQ_CHROMIUM_IN"] = input
        environment["NORQ_CHROMIUM_OUT"] = output
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let answers = self.answers
        let inbox = self.inbox
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while !inbox.stop.withLock({ $0 }) {
                var descriptor = pollfd(fd: answers, events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, 100) > 0 else { continue }
                let count = read(answers, &buffer, buffer.count)
                if count <= 0 { break }
                inbox.bytes.withLock { $0.append(contentsOf: buffer[0..<count]) }
            }
            inbox.finished.withLock { $0 = true }
        }
        reader.start()
        try process.run()
    }

    /// Sends a command (to a page's session when given); returns its id.
    @discardableResult
    func send(_ method: String, _ params: [String: Any] = [:], session: String? = nil) throws -> Int {
        let id = nextID.withLock { value in
            value += 1
            return value
        }
        var message: [String: Any] = ["id": id, "method": method, "params": params]
        if let session { message["sessionId"] = session }
        var bytes = [UInt8](try JSONSerialization.data(withJSONObject: message))
        bytes.append(0)
        let written = bytes.withUnsafeBytes { write(commands, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw BrowserError("writing to Chromium failed: errno \(errno)") }
        return id
    }

    /// The answer to command `id` (its `result`), waiting at most `timeout`.
    func answer(_ id: Int, timeout: Duration = .seconds(15)) async throws -> [String: Any] {
        let clock = ContinuousClock()
        let start = clock.now
        while clock.now - start < timeout {
            let messages = inbox.bytes.withLock { bytes in
                bytes.split(separator: 0, omittingEmptySubsequences: true).map { Array($0) }
            }
            for message in messages {
                guard let object = try? JSONSerialization.jsonObject(with: Data(message)) as? [String: Any],
                      object["id"] as? Int == id else { continue }
                if let error = object["error"] { throw BrowserError("Chromium: \(error)") }
                return object["result"] as? [String: Any] ?? [:]
            }
            guard process.isRunning else { throw BrowserError("Chromium exited (status \(process.terminationStatus))") }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw BrowserError("no answer from Chromium to command \(id) within \(timeout)")
    }

    func call(_ method: String, _ params: [String: Any] = [:], session: String? = nil) async throws -> [String: Any] {
        try await answer(try send(method, params, session: session))
    }

    /// Opens `url` in a new page; returns the page's session.
    func open(_ url: String) async throws -> String {
        let target = try await call("Target.createTarget", ["url": "about:blank"])
        guard let targetID = target["targetId"] as? String else { throw BrowserError("no targetId: \(target)") }
        let attached = try await call("Target.attachToTarget", ["targetId": targetID, "flatten": true])
        guard let session = attached["sessionId"] as? String else { throw BrowserError("no sessionId: \(attached)") }
        _ = try await call("Page.navigate", ["url": url], session: session)
        return session
    }

    /// The value of a JavaScript expression in the page (a string; use JSON.stringify for more).
    func evaluate(_ expression: String, session: String) async throws -> String? {
        let result = try await call("Runtime.evaluate", ["expression": expression, "returnByValue": true], session: session)
        return (result["result"] as? [String: Any])?["value"] as? String
    }

    /// Evaluates `expression` until `condition` holds (bounded); the last value and how long it took.
    func waitUntil(_ expression: String, session: String, timeout: Duration = .seconds(15),
                   _ condition: (String) -> Bool) async throws -> (value: String, after: Duration) {
        let clock = ContinuousClock()
        let start = clock.now
        var last: String?
        while clock.now - start < timeout {
            last = try await evaluate(expression, session: session)
            if let last, condition(last) { return (last, clock.now - start) }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw BrowserError("the page did not get there within \(timeout); last: \(last ?? "nil")")
    }

    /// A PNG of the page.
    func screenshot(session: String) async throws -> Data {
        let result = try await call("Page.captureScreenshot", ["format": "png", "captureBeyondViewport": true],
                                    session: session)
        guard let base64 = result["data"] as? String, let data = Data(base64Encoded: base64) else {
            throw BrowserError("no screenshot data")
        }
        return data
    }

    /// Closes the browser (and kills it when it does not go within 5 s).
    func close() {
        _ = try? send("Browser.close")
        let end = Date().addingTimeInterval(5)
        while process.isRunning, Date() < end { usleep(20_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        inbox.stop.withLock { $0 = true }
        while !inbox.finished.withLock({ $0 }) { usleep(20_000) }
        Glibc.close(commands)
        Glibc.close(answers)
        try? FileManager.default.removeItem(at: directory)
    }
}

struct BrowserError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
