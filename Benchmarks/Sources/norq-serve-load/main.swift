import Foundation
import NIOCore
import NIOPosix

// norq-serve-load: the load generator of Benchmarks/serve.sh (issue 19's Performance section). A closed loop of
// HTTP/1.1 keep-alive clients, each with one `POST /v1/sends` in flight at a time, against a running `norq serve`.
// It depends on NIO only, so that its release build does not rebuild the router.
//
//   norq-serve-load --port P --key KEY [--host 127.0.0.1] [--clients 200] [--seconds 30] [--warmup 3]
//                   [--template order-shipped-bench] [--threads 1] [--server-pid PID] [--label TEXT]
//   norq-serve-load --port P --key KEY --big 10000 [--repeat 3]    one N-recipient send at a time
//
// Prints one JSON line. Load mode: `accepted_per_s` (202 answers completed inside the measured window / its
// length), `p50_ms`/`p90_ms`/`p99_ms`/`max_ms` (request written to answer read, measured window only), `errors` by
// kind (a status other than 202, a connection error, a 10 s timeout), `server_rss_mb` at start/middle/end and
// `server_hwm_mb` (VmRSS / VmHWM of --server-pid from /proc), `server_cpu_s` over the measured window.
// Big mode: the latency and status of each N-recipient request.

struct LoadOptions {
    var host = "127.0.0.1"
    var port = 8080
    var key = ""
    var clients = 200
    var seconds = 30.0
    var warmup = 3.0
    var template = "order-shipped-bench"
    var threads = 1
    var serverPID: Int?
    var label = ""
    var big: Int?
    var repeatCount = 3
    var timeoutSeconds: Int64 = 10
    /// The route (`/v1/render` takes the same body and answers 200: the server without the store).
    var path = "/v1/sends"
    var expect = 202

    static let usage = """
    usage: norq-serve-load --port P --key KEY [--host H] [--clients N] [--seconds S] [--warmup S] [--template NAME]
                           [--threads T] [--server-pid PID] [--label TEXT] [--big N [--repeat R]] [--timeout S]
                           [--path /v1/sends|/v1/render --expect STATUS]
    """

    static func parse(_ arguments: [String]) throws -> LoadOptions {
        var options = LoadOptions()
        var rest = arguments[...]
        while let name = rest.popFirst() {
            guard let value = rest.popFirst() else { throw LoadError("\(name) needs a value\n\(usage)") }
            func int() throws -> Int {
                guard let number = Int(value), number > 0 else { throw LoadError("\(name) needs a positive integer") }
                return number
            }
            func double() throws -> Double {
                guard let number = Double(value), number >= 0 else { throw LoadError("\(name) needs a number") }
                return number
            }
            switch name {
            case "--host": options.host = value
            case "--port": options.port = try int()
            case "--key": options.key = value
            case "--clients": options.clients = try int()
            case "--seconds": options.seconds = try double()
            case "--warmup": options.warmup = try double()
            case "--template": options.template = value
            case "--threads": options.threads = try int()
            case "--server-pid": options.serverPID = try int()
            case "--label": options.label = value
            case "--big": options.big = try int()
            case "--repeat": options.repeatCount = try int()
            case "--timeout": options.timeoutSeconds = Int64(try int())
            case "--path": options.path = value
            case "--expect": options.expect = try int()
            default: throw LoadError("unknown option \(name)\n\(usage)")
            }
        }
        return options
    }
}

struct LoadError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A 64-hex-digit APNs device token, distinct per index (as the router benchmark's tokens).
func benchToken(_ index: Int) -> String {
    let hex = String(UInt64(truncatingIfNeeded: index) &* 0x9E37_79B9_7F4A_7C15, radix: 16)
    let digits = String(repeating: "0", count: 16 - hex.count) + hex
    return String(repeating: "a1b2c3d4", count: 6) + digits
}

/// The request head and body bytes of one send, written as raw HTTP/1.1 (the client parses only the answer).
struct RequestBytes {
    let head: String
    let body: [UInt8]

    init(host: String, port: Int, key: String, template: String, tokens: [String], path: String = "/v1/sends") {
        var body = "{\"template\":\"\(template)\",\"to\":["
        for (index, token) in tokens.enumerated() {
            if index > 0 { body += "," }
            body += "\"\(token)\""
        }
        body += "]}"
        self.body = Array(body.utf8)
        head = "POST \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nAuthorization: Bearer \(key)\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(self.body.count)\r\n\r\n"
    }

    func write(into buffer: inout ByteBuffer) {
        buffer.writeString(head)
        buffer.writeBytes(body)
    }
}

/// What one client saw. Touched only on its channel's event loop, read after the client finished.
final class ClientStats: @unchecked Sendable {
    // Safety: written only on the owning channel's event loop; read by the main task after `done` completed.
    var latenciesMicros: [UInt32] = []
    var accepted = 0
    var statuses: [Int: Int] = [:]
    var connectionErrors = 0
    var timeouts = 0
    var lastError: String?
}

/// One keep-alive connection in a closed loop: write a request, read the whole answer (status line, headers,
/// Content-Length body), record, write the next, until `stopAt`. A minimal HTTP/1.1 answer parser: `norq serve`
/// always answers with Content-Length.
final class LoadClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let stats: ClientStats
    let expect: Int
    let measureFrom: NIODeadline
    let stopAt: NIODeadline
    let timeout: TimeAmount
    let makeRequest: () -> RequestBytes
    let done: EventLoopPromise<Void>
    /// Requests left to send (nil: until `stopAt`).
    private var remaining: Int?
    private var pending = ByteBuffer()
    private var sentAt: NIODeadline?
    private var timeoutTask: Scheduled<Void>?
    private var finished = false

    init(stats: ClientStats, measureFrom: NIODeadline, stopAt: NIODeadline, timeout: TimeAmount,
         makeRequest: @escaping () -> RequestBytes, done: EventLoopPromise<Void>, requests: Int? = nil,
         expect: Int = 202) {
        self.expect = expect
        self.remaining = requests
        self.stats = stats
        self.measureFrom = measureFrom
        self.stopAt = stopAt
        self.timeout = timeout
        self.makeRequest = makeRequest
        self.done = done
    }

    func channelActive(context: ChannelHandlerContext) {
        sendNext(context: context)
    }

    private func sendNext(context: ChannelHandlerContext) {
        guard NIODeadline.now() < stopAt, remaining.map({ $0 > 0 }) ?? true else { return finish(context: context) }
        remaining = remaining.map { $0 - 1 }
        let request = makeRequest()
        var buffer = context.channel.allocator.buffer(capacity: request.head.utf8.count + request.body.count)
        request.write(into: &buffer)
        sentAt = .now()
        let channel = context.channel
        timeoutTask = context.eventLoop.scheduleTask(in: timeout) { [stats] in
            stats.timeouts += 1
            channel.close(promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = unwrapInboundIn(data)
        pending.writeBuffer(&incoming)
        while let status = parseAnswer() {
            record(status: status)
            sendNext(context: context)
            if finished { return }
        }
    }

    /// Takes one whole answer off `pending` and returns its status, or nil while it is incomplete.
    private func parseAnswer() -> Int? {
        let view = pending.readableBytesView
        guard let end = view.firstRange(of: [13, 10, 13, 10]) else { return nil }
        let headText = String(decoding: view[view.startIndex..<end.lowerBound], as: UTF8.self)
        let lines = headText.split(separator: "\r\n")
        guard let statusLine = lines.first else { return nil }
        let parts = statusLine.split(separator: " ")
        let status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
        var length = 0
        for line in lines.dropFirst() where line.lowercased().hasPrefix("content-length:") {
            length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        let total = (end.upperBound - view.startIndex) + length
        guard pending.readableBytes >= total else { return nil }
        pending.moveReaderIndex(forwardBy: total)
        pending.discardReadBytes()
        return status
    }

    private func record(status: Int) {
        timeoutTask?.cancel()
        timeoutTask = nil
        let now = NIODeadline.now()
        guard let sentAt, sentAt >= measureFrom, now <= stopAt else { return }
        stats.latenciesMicros.append(UInt32(clamping: (now - sentAt).nanoseconds / 1000))
        if status == expect { stats.accepted += 1 } else { stats.statuses[status, default: 0] += 1 }
    }

    private func finish(context: ChannelHandlerContext) {
        guard !finished else { return }
        finished = true
        timeoutTask?.cancel()
        context.close(promise: nil)
        done.succeed(())
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !finished {
            if NIODeadline.now() < stopAt { stats.connectionErrors += 1 }
            finished = true
            timeoutTask?.cancel()
            done.succeed(())
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        stats.lastError = "\(error)"
        context.close(promise: nil)
    }
}

/// VmRSS and VmHWM of a process in MB (nil when it cannot be read).
func memory(of pid: Int?) -> (rss: Double, hwm: Double)? {
    guard let pid, let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    func field(_ name: String) -> Double? {
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return nil }
        return line.split(separator: " ").dropFirst().first.flatMap { Double($0) }.map { $0 / 1024 }
    }
    guard let rss = field("VmRSS"), let hwm = field("VmHWM") else { return nil }
    return (rss, hwm)
}

/// utime + stime of a process in seconds (0 when unknown).
func cpuSeconds(of pid: Int?) -> Double {
    guard let pid, let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = text.lastIndex(of: ")") else { return 0 }
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

func percentile(_ sorted: [UInt32], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return 0 }
    let index = min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)
    return Double(sorted[max(0, index)]) / 1000
}

func rounded(_ value: Double, _ places: Double = 100) -> Double { (value * places).rounded() / places }

func json(_ object: [String: Any]) -> String {
    let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    return data.map { String(decoding: $0, as: UTF8.self) } ?? "{}"
}

func connect(_ options: LoadOptions, group: MultiThreadedEventLoopGroup,
             handler: @escaping @Sendable (Channel) -> any ChannelHandler) async throws -> Channel {
    try await ClientBootstrap(group: group)
        .channelOption(.socketOption(.tcp_nodelay), value: 1)
        .connectTimeout(.seconds(5))
        .channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(handler(channel)) }
        }
        .connect(host: options.host, port: options.port).get()
}

func runLoad(_ options: LoadOptions) async throws -> String {
    // The process exits after printing: the event loops end with it.
    let group = MultiThreadedEventLoopGroup(numberOfThreads: options.threads)
    let started = NIODeadline.now()
    // Clients connect over the first part of the warm-up; the window opens when every one of them is running.
    let measureFrom = started + .nanoseconds(Int64(options.warmup * 1e9))
    let stopAt = measureFrom + .nanoseconds(Int64(options.seconds * 1e9))
    let startMemory = memory(of: options.serverPID)
    let counter = ManagedAtomicCounter()
    var stats: [ClientStats] = []
    var finished: [EventLoopFuture<Void>] = []
    for _ in 0..<options.clients {
        let client = ClientStats()
        stats.append(client)
        let eventLoop = group.next()
        let done = eventLoop.makePromise(of: Void.self)
        finished.append(done.futureResult)
        let host = options.host, port = options.port, key = options.key, template = options.template
        let path = options.path, expect = options.expect
        let timeout = TimeAmount.seconds(options.timeoutSeconds)
        do {
            _ = try await connect(options, group: group) { _ in
                LoadClientHandler(stats: client, measureFrom: measureFrom, stopAt: stopAt, timeout: timeout,
                                  makeRequest: {
                                      RequestBytes(host: host, port: port, key: key, template: template,
                                                   tokens: [benchToken(counter.next())], path: path)
                                  }, done: done, expect: expect)
            }
        } catch {
            client.connectionErrors += 1
            client.lastError = "\(error)"
            done.succeed(())
        }
    }
    // Memory and CPU at the window's start, middle and end.
    func sleep(until deadline: NIODeadline) async throws {
        let left = deadline - .now()
        if left.nanoseconds > 0 { try await Task.sleep(nanoseconds: UInt64(left.nanoseconds)) }
    }
    try await sleep(until: measureFrom)
    let windowStartMemory = memory(of: options.serverPID)
    let cpuBefore = cpuSeconds(of: options.serverPID)
    try await sleep(until: measureFrom + .nanoseconds(Int64(options.seconds * 0.5e9)))
    let middleMemory = memory(of: options.serverPID)
    try await sleep(until: stopAt)
    let endMemory = memory(of: options.serverPID)
    let cpuAfter = cpuSeconds(of: options.serverPID)
    for future in finished { try await future.get() }

    var latencies: [UInt32] = []
    var accepted = 0, connectionErrors = 0, timeouts = 0
    var statuses: [Int: Int] = [:]
    var lastError: String?
    for client in stats {
        latencies += client.latenciesMicros
        accepted += client.accepted
        connectionErrors += client.connectionErrors
        timeouts += client.timeouts
        for (status, count) in client.statuses { statuses[status, default: 0] += count }
        lastError = lastError ?? client.lastError
    }
    latencies.sort()
    var errors: [String: Any] = ["connection": connectionErrors, "timeout": timeouts]
    for (status, count) in statuses { errors["status_\(status)"] = count }
    let errorCount = connectionErrors + timeouts + statuses.values.reduce(0, +)
    var result: [String: Any] = [
        "mode": "serve-load", "label": options.label, "path": options.path, "clients": options.clients, "seconds": options.seconds,
        "accepted": accepted, "accepted_per_s": rounded(Double(accepted) / options.seconds, 1),
        "p50_ms": rounded(percentile(latencies, 0.5)), "p90_ms": rounded(percentile(latencies, 0.9)),
        "p99_ms": rounded(percentile(latencies, 0.99)), "max_ms": rounded(percentile(latencies, 1)),
        "errors": errors, "error_count": errorCount,
        "server_cpu_s": rounded(cpuAfter - cpuBefore),
    ]
    if let lastError { result["last_error"] = String(lastError.prefix(200)) }
    if let startMemory, let windowStartMemory, let middleMemory, let endMemory {
        result["server_rss_mb"] = ["before": rounded(startMemory.rss, 10), "start": rounded(windowStartMemory.rss, 10),
                                   "middle": rounded(middleMemory.rss, 10), "end": rounded(endMemory.rss, 10)]
        result["server_hwm_mb"] = rounded(endMemory.hwm, 10)
    }
    return json(result)
}

/// Sends one `--big`-recipient request at a time, `--repeat` times, on one connection.
func runBig(_ options: LoadOptions, recipients: Int) async throws -> String {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    var latencies: [Double] = []
    var statuses: [Int] = []
    var bodyBytes = 0
    for round in 0..<options.repeatCount {
        let tokens = (0..<recipients).map { benchToken(10_000_000 * (round + 1) + $0) }
        let request = RequestBytes(host: options.host, port: options.port, key: options.key,
                                   template: options.template, tokens: tokens)
        bodyBytes = request.body.count
        let client = ClientStats()
        let done = group.next().makePromise(of: Void.self)
        let measureFrom = NIODeadline.now()
        let stopAt = measureFrom + .seconds(options.timeoutSeconds)
        _ = try await connect(options, group: group) { _ in
            LoadClientHandler(stats: client, measureFrom: measureFrom, stopAt: stopAt,
                              timeout: .seconds(options.timeoutSeconds),
                              makeRequest: { request }, done: done, requests: 1)
        }
        try await done.futureResult.get()
        let latency = client.latenciesMicros.first.map { Double($0) / 1000 } ?? -1
        latencies.append(rounded(latency))
        statuses.append(client.accepted > 0 ? 202 : client.statuses.keys.first ?? 0)
    }
    return json(["mode": "serve-big", "label": options.label, "recipients": recipients, "body_bytes": bodyBytes,
                 "latency_ms": latencies, "statuses": statuses,
                 "all_accepted": statuses.allSatisfy { $0 == 202 }])
}

/// A counter shared by the event loops (token indexes), behind a lock.
final class ManagedAtomicCounter: @unchecked Sendable {
    // Safety: `value` is read and written only under `lock`.
    private let lock = NSLock()
    private var value = 0
    func next() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }
}

do {
    let options = try LoadOptions.parse(Array(CommandLine.arguments.dropFirst()))
    guard !options.key.isEmpty else { throw LoadError("--key is required\n\(LoadOptions.usage)") }
    if let big = options.big {
        print(try await runBig(options, recipients: big))
    } else {
        print(try await runLoad(options))
    }
} catch {
    FileHandle.standardError.write(Data("norq-serve-load: \(error)\n".utf8))
    exit(1)
}
