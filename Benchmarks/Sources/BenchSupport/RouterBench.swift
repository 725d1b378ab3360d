import Foundation
import CoreMetrics
import Logging
import Norq
import NorqAPNs
import NorqCore
import NorqTemplates
import Synchronization

/// Per-request latencies, appended from many tasks. Kept as microseconds in 32 bits: the harness's own memory
/// counts in the peak RSS it reports (100,000 samples are 0.4 MB instead of 0.8 MB).
package final class LatencyRecorder: Sendable {
    private let samples: Mutex<[UInt32]>
    package init(capacity: Int) {
        var array: [UInt32] = []
        array.reserveCapacity(capacity)
        samples = Mutex(array)
    }
    package func record(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let microseconds = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
        samples.withLock { $0.append(UInt32(clamping: microseconds)) }
    }
    package func reset() { samples.withLock { $0.removeAll(keepingCapacity: true) } }
    package var all: [UInt32] { samples.withLock { $0 } }
}

/// The router's metrics as the benchmark keeps them: its delivery duration (`norq_delivery_duration`, from the
/// provider call to the answer, recorded by the router for every attempt) goes to a `LatencyRecorder`; every
/// other instrument is a no-op. Used instead of wrapping the provider in `TimedProvider` (FCM mode), so that the
/// process runs the router as an application does, without a wrapper's closure and clock reads per push.
package struct RouterLatencyMetrics: MetricsFactory {
    package let recorder: LatencyRecorder
    package init(recorder: LatencyRecorder) { self.recorder = recorder }

    private final class DurationHandler: TimerHandler {
        let recorder: LatencyRecorder
        init(recorder: LatencyRecorder) { self.recorder = recorder }
        func recordNanoseconds(_ duration: Int64) { recorder.record(.nanoseconds(duration)) }
    }

    package func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        label.hasSuffix("_delivery_duration") ? DurationHandler(recorder: recorder) : NOOPMetricsHandler.instance
    }
    package func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { NOOPMetricsHandler.instance }
    package func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        NOOPMetricsHandler.instance
    }
    package func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler { NOOPMetricsHandler.instance }
    package func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        NOOPMetricsHandler.instance
    }
    package func destroyCounter(_ handler: any CounterHandler) {}
    package func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {}
    package func destroyMeter(_ handler: any MeterHandler) {}
    package func destroyRecorder(_ handler: any RecorderHandler) {}
    package func destroyTimer(_ handler: any TimerHandler) {}
}

/// Wraps any provider to time each delivery (request written to response received), forwarding every
/// provider-owned fact (collapse id, invalid-token answers, reasons, message id name) so the router behaves
/// exactly as with the bare provider.
package final class TimedProvider<Inner: PushProvider>: PushProvider {
    package let inner: Inner
    package let recorder: LatencyRecorder
    package init(inner: Inner, recorder: LatencyRecorder) {
        self.inner = inner
        self.recorder = recorder
    }
    package var name: String { inner.name }
    package var typeName: String { inner.typeName }
    package var platforms: Set<Platform> { inner.platforms }
    package var policy: DeliveryPolicy { inner.policy }
    package var knownReasons: Set<String> { inner.knownReasons }
    package var messageIDName: String { inner.messageIDName }
    package var supportsValidateOnly: Bool { inner.supportsValidateOnly }
    package var readsRequestID: Bool { inner.readsRequestID }
    package func collapseID(of request: PreparedRequest) -> String? { inner.collapseID(of: request) }
    package func isInvalidTokenAnswer(_ response: DeliveryResponse) -> Bool { inner.isInvalidTokenAnswer(response) }

    package func prepare(_ content: PushContent, for token: PushToken, options: SendOptions) throws(NorqError) -> PreparedRequest {
        try inner.prepare(content, for: token, options: options)
    }

    package func prepare(_ content: PushContent, forChannel channel: ChannelRecipient,
                         options: SendOptions) throws(NorqError) -> PreparedRequest {
        try inner.prepare(content, forChannel: channel, options: options)
    }

    package func deliver(_ request: PreparedRequest, deadline: ContinuousClock.Instant) async throws(NorqError) -> DeliveryResponse {
        let start = ContinuousClock.now
        defer { recorder.record(start.duration(to: .now)) }
        return try await inner.deliver(request, deadline: deadline)
    }

    package func startDelivery(_ request: PreparedRequest, deadline: ContinuousClock.Instant,
                               completion: @escaping @Sendable (Result<DeliveryResponse, NorqError>) -> Void) {
        let start = ContinuousClock.now
        inner.startDelivery(request, deadline: deadline) { [recorder] result in
            recorder.record(start.duration(to: .now))
            completion(result)
        }
    }

    package func health() -> ProviderHealth { inner.health() }

    package func shutdown() async { await inner.shutdown() }
}

/// `--mode router`: N notifications through `NotificationRouter` in one bulk send (the template is compiled
/// once and rendered once per send; every token is routed, prepared with its own apns-id and JWT header,
/// and delivered over TLS HTTP/2 with at most `--in-flight` requests outstanding).
package struct RouterBench {
    package let options: Options
    package init(options: Options) { self.options = options }

    package static func quietLogger(_ label: String) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = .warning
        return logger
    }

    package static func readFile(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else { throw BenchError("cannot read \(path)") }
        return String(decoding: data, as: UTF8.self)
    }

    package static func jwtHeader(options: Options) throws -> String {
        let signer = try APNsJWTSigner(keyID: options.keyID, teamID: options.team, privateKeyPEM: try readFile(options.key))
        return "bearer " + signer.sign(issuedAt: Int64(Date().timeIntervalSince1970))
    }

    package func makeRouter(recorder: LatencyRecorder) throws -> (NotificationRouter, JSONValue) {
        try Self.makeRouter(options, provider: TimedProvider(inner: Self.makeAPNsProvider(options), recorder: recorder))
    }

    /// The APNs provider of the APNs modes: `--endpoint` as the sandbox endpoint, `--ca`, `--key`, `--connections`,
    /// `--in-flight` spread over the connections, `--timeout`.
    package static func makeAPNsProvider(_ options: Options) throws -> APNsProvider {
        let (host, port) = options.hostAndPort
        var configuration = APNsConfiguration(
            authentication: .token(keyID: options.keyID, teamID: options.team,
                                   privateKeyPEM: try readFile(options.key), keySource: options.key),
            bundleID: options.bundleID, production: false)
        configuration.sandboxEndpoint = APNsEndpoint(host: host, port: port)
        if let ca = options.ca { configuration.additionalTrustRootsPEM = try readFile(ca) }
        configuration.connectionsPerEndpoint = options.connections
        configuration.maxConcurrentStreamsPerConnection = (options.inFlight + options.connections - 1) / options.connections
        configuration.requestTimeout = .seconds(options.timeout)
        return try APNsProvider(name: "apns", configuration: configuration,
                                policy: DeliveryPolicy(retry: .default, maxInFlight: options.inFlight),
                                logger: quietLogger("norq.bench.apns"))
    }

    /// A router whose one (default) provider is `provider`, with `--templates`; and `--template`'s sample data.
    /// - Parameter metricsFactory: the router's metrics (nil: none are kept, as `MetricsSystem` is not bootstrapped).
    package static func makeRouter(_ options: Options, provider: any PushProvider,
                                   metricsFactory: (any MetricsFactory)? = nil) throws -> (NotificationRouter, JSONValue) {
        let library = try TemplateLibrary(directory: options.templates)
        let data = try library.template(named: options.template).defaultSample
        let router = try NotificationRouter(providers: [provider], defaultProvider: provider.name, templates: library,
                                            logger: quietLogger("norq.bench.router"), metricsFactory: metricsFactory)
        return (router, data)
    }

    package static func recipients(_ range: Range<Int>) -> [Recipient] {
        range.map { Recipient(tokens: [PushToken(token: BenchTokens.token($0), platform: .ios)]) }
    }

    /// One streaming send; returns outcome counts by kind (and by error code for the others).
    package func send(_ router: NotificationRouter, data: JSONValue, to recipients: [Recipient]) async throws -> [String: Int] {
        try await count(router.sendStreaming(template: options.template, data: data, to: recipients))
    }

    package func count(_ stream: PushOutcomeStream) async -> [String: Int] {
        var counts: [String: Int] = [:]
        var delivered = 0  // counted apart: a dictionary update per outcome cost the harness 3% of the client CPU
        for await outcome in stream {
            switch outcome.result {
            case .delivered: delivered += 1
            case .rejected(let rejected): counts["rejected:\(rejected.status):\(rejected.reason ?? "")", default: 0] += 1
            case .failed(let error): counts["failed:\(error.code.rawValue)", default: 0] += 1
            default: counts[outcome.result.kind, default: 0] += 1
            }
        }
        if delivered > 0 { counts["delivered", default: 0] += delivered }
        return counts
    }

    package func run() async throws -> RunResult {
        let recorder = LatencyRecorder(capacity: options.count + options.warmup)
        let (router, data) = try makeRouter(recorder: recorder)
        if options.warmup > 0 {
            let warm = try await send(router, data: data, to: Self.recipients(0..<min(options.warmup, options.count)))
            guard warm["delivered"] == min(options.warmup, options.count) else {
                await router.shutdown(gracePeriod: .seconds(1))
                throw BenchError("warm-up did not deliver everything: \(warm)")
            }
        }
        let recipients = options.input == "array" ? Self.recipients(0..<options.count) : []
        recorder.reset()
        // What the process holds before the send (the recipients, the warmed-up router and connection): the
        // router's own peak is roughly peak_rss_mb minus this.
        let rssBeforeSend = ProcessStats.currentRSSMegabytes()
        let cpuStart = ProcessStats.cpuSeconds()
        let start = ContinuousClock.now
        let counts = options.input == "array"
            ? try await send(router, data: data, to: recipients)
            : await count(try router.sendStreaming(template: options.template, data: data,
                                                   to: LazyRecipients(count: options.count)))
        let elapsed = start.duration(to: .now)
        let cpu = ProcessStats.cpuSeconds() - cpuStart
        await router.shutdown(gracePeriod: .seconds(5))
        var result = RunResult()
        result.add("client", options.input == "array" ? "norq-router" : "norq-router-streamed-input")
        if let label = options.label { result.add("label", label) }
        result.add("endpoint", options.endpoint)
        result.add("connections", options.connections)
        result.add("in_flight", options.inFlight)
        result.addDelivery(count: options.count, elapsed: elapsed, cpu: cpu, latencies: recorder.all, outcomes: counts)
        result.add("rss_before_send_mb", rssBeforeSend, digits: 1)
        return result
    }

    /// The exact request the router would send to the first benchmark token (for h2load and the AHC loop).
    package func prepared() throws -> PreparedRequest {
        let (router, data) = try makeRouter(recorder: LatencyRecorder(capacity: 0))
        let deliveries = try router.prepare(template: options.template, data: data, to: Self.recipients(0..<1))
        guard let request = deliveries.first?.request else {
            throw BenchError("the router prepared no request: \(String(describing: deliveries.first?.plan))")
        }
        return request
    }

    /// `--mode prepare`: writes body.json (the payload), headers.txt (`name: value` lines, the JWT included)
    /// and path.txt into `--out`.
    package func writePrepared() async throws {
        guard let directory = options.outDir else { throw BenchError("--mode prepare needs --out DIR") }
        let request = try prepared()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Data(request.body).write(to: URL(fileURLWithPath: directory + "/body.json"))
        let headers = request.headers.map { "\($0.name): \($0.value)\n" }.joined()
        try Data(headers.utf8).write(to: URL(fileURLWithPath: directory + "/headers.txt"))
        try Data((request.path + "\n").utf8).write(to: URL(fileURLWithPath: directory + "/path.txt"))
        print("{\"body_bytes\":\(request.body.count),\"headers\":\(request.headers.count)}")
    }
}

/// The benchmark's recipients as an async sequence, each made when the router reads it (nothing is held
/// beyond the router's current chunk).
struct LazyRecipients: AsyncSequence, Sendable {
    typealias Element = Recipient
    typealias Failure = Never
    let count: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        typealias Failure = Never
        let count: Int
        var index = 0
        mutating func next() async -> Recipient? {
            guard index < count else { return nil }
            defer { index += 1 }
            return Recipient(tokens: [PushToken(token: BenchTokens.token(index), platform: .ios)])
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(count: count) }
}
