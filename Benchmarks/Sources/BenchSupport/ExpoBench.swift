import Foundation
import Norq
import NorqCore
import NorqExpo

/// `--mode expo`: N notifications through `NotificationRouter` and `NorqExpo` (batched, 100 recipients a request)
/// to an Expo-shaped sink (`norq-bench-expo-sink`: one ok ticket per recipient of each request).
/// `--mode expo-prepare` writes the body of one 100-recipient request (uncompressed) for h2load.
package struct ExpoBench {
    package let options: Options
    package init(options: Options) { self.options = options }

    static func token(_ index: Int) -> String { "ExponentPushToken[\(BenchTokens.token(index).prefix(22))]" }

    package func run(mode: String) async throws {
        switch mode {
        case "expo": print(try await measure().json)
        case "expo-prepare": try writePrepared()
        default: throw BenchError("unknown Expo mode \(mode)")
        }
    }

    func makeProvider() throws -> ExpoProvider {
        let (host, port) = options.hostAndPort
        var trust: String?
        if let ca = options.ca { trust = try RouterBench.readFile(ca) }
        var configuration = ExpoConfiguration(
            endpoint: ExpoURL(host: host, port: port), additionalTrustRootsPEM: trust, caPath: options.ca,
            rateLimit: 0, maxConcurrentRequests: max(1, options.inFlight / 100), requestTimeout: .seconds(options.timeout))
        if !options.expoGzip { configuration.gzipThreshold = nil }
        let policy = DeliveryPolicy(retry: .default, maxInFlight: options.inFlight)
        return try ExpoProvider(name: "expo", configuration: configuration, policy: policy,
                                logger: RouterBench.quietLogger("norq.bench.expo"))
    }

    func recipients(_ range: Range<Int>) -> [Recipient] {
        range.map { Recipient(tokens: [PushToken(token: Self.token($0), platform: .android)]) }
    }

    func measure() async throws -> RunResult {
        let recorder = LatencyRecorder(capacity: options.count + options.warmup)
        let (router, data) = try RouterBench.makeRouter(options, provider: try makeProvider(),
                                                        metricsFactory: RouterLatencyMetrics(recorder: recorder))
        let counting = RouterBench(options: options)
        if options.warmup > 0 {
            let warm = await counting.count(try router.sendStreaming(template: options.template, data: data,
                                                                     to: recipients(0..<options.warmup)))
            guard warm["delivered"] == options.warmup else {
                await router.shutdown(gracePeriod: .seconds(1))
                throw BenchError("warm-up did not deliver everything: \(warm)")
            }
        }
        let all = recipients(0..<options.count)
        recorder.reset()
        let cpuStart = ProcessStats.cpuSeconds()
        let start = ContinuousClock.now
        let counts = await counting.count(try router.sendStreaming(template: options.template, data: data, to: all))
        let elapsed = start.duration(to: .now)
        let cpu = ProcessStats.cpuSeconds() - cpuStart
        await router.shutdown(gracePeriod: .seconds(5))
        var result = RunResult()
        result.add("client", options.expoGzip ? "norq-router-expo-gzip" : "norq-router-expo")
        if let label = options.label { result.add("label", label) }
        result.add("endpoint", options.endpoint)
        result.add("in_flight", options.inFlight)
        result.addDelivery(count: options.count, elapsed: elapsed, cpu: cpu, latencies: recorder.all, outcomes: counts)
        return result
    }

    /// The bodies of a 100-recipient request, uncompressed: body.json (100 messages), body-batched.json (as the provider
    /// joins them: one message, 100 tokens in `to`); headers.txt, path.txt.
    func writePrepared() throws {
        guard let directory = options.outDir else { throw BenchError("--mode expo-prepare needs --out DIR") }
        let provider = try makeProvider()
        let (router, data) = try RouterBench.makeRouter(options, provider: provider)
        let deliveries = try router.prepare(template: options.template, data: data, to: recipients(0..<100))
        let requests = deliveries.compactMap(\.request)
        guard requests.count == 100 else { throw BenchError("the router prepared \(requests.count) requests") }
        // The shape: 100 messages of one recipient each.
        var body: [UInt8] = [UInt8(ascii: "[")]
        for (index, request) in requests.enumerated() {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            let bytes = request.body
            body.append(contentsOf: bytes[1..<(bytes.count - 1)])
        }
        body.append(UInt8(ascii: "]"))
        // What the provider sends for them (uncompressed): one message whose `to` lists the 100 tokens.
        let batched = ExpoProvider.batchBody(requests)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Data(body).write(to: URL(fileURLWithPath: directory + "/body.json"))
        try Data(batched).write(to: URL(fileURLWithPath: directory + "/body-batched.json"))
        let headers = requests[0].headers.map { "\($0.name): \($0.value)\n" }.joined()
        try Data(headers.utf8).write(to: URL(fileURLWithPath: directory + "/headers.txt"))
        try Data((requests[0].path + "\n").utf8).write(to: URL(fileURLWithPath: directory + "/path.txt"))
        print("{\"body_bytes\":\(body.count),\"batched_body_bytes\":\(batched.count),\"recipients\":100}")
    }
}
