import Foundation
import Norq
import NorqCore
import NorqFCM

/// The FCM benchmark's registration tokens: a benchmark token (`ab` + the index in hex, 64 characters) then
/// `:APA91b` and filler, 160 characters in all, about the length of a real FCM registration token.
package enum FCMBenchTokens {
    static let suffix = ":APA91b" + String(repeating: "x", count: 89)

    package static func token(_ index: Int) -> String { BenchTokens.token(index) + suffix }
}

/// `--mode fcm`: N notifications through `NotificationRouter` and `NorqFCM` to an FCM-shaped server (nghttpd
/// answering `POST /v1/projects/<id>/messages:send` from a docroot file, or the FCM emulator), with the OAuth
/// access token from `--token-endpoint` (the router signs one RS256 assertion and caches the token).
/// `--mode fcm-prepare` writes the exact request of the first token (its `authorization` header carries the
/// access token the provider fetched) for h2load and the firebase-admin peer.
package struct FCMBench {
    package let options: Options
    package init(options: Options) { self.options = options }

    package func run(mode: String) async throws {
        switch mode {
        case "fcm": print(try await measure().json)
        case "fcm-prepare": try await writePrepared()
        case "fcm-tokens":
            var out = ""
            out.reserveCapacity(options.count * 161)
            for index in 0..<options.count { out += FCMBenchTokens.token(index); out += "\n" }
            print(out, terminator: "")
        default: throw BenchError("unknown FCM mode \(mode)")
        }
    }

    var platform: Platform {
        switch options.fcmPlatform {
        case "ios": .ios
        case "web": .web
        default: .android
        }
    }

    func makeRouter(recorder: LatencyRecorder) throws -> (NotificationRouter, JSONValue) {
        let (host, port) = options.hostAndPort
        let endpoint = FCMURL(host: host, port: port)
        let tokenEndpointText = options.fcmTokenEndpoint ?? "https://\(endpoint.authority)/token"
        guard let tokenEndpoint = FCMURL.parse(tokenEndpointText, scheme: "https") else {
            throw BenchError("--token-endpoint \(tokenEndpointText) is not https://HOST:PORT/PATH")
        }
        let account = try FCMServiceAccount(json: try RouterBench.readFile(options.fcmServiceAccount))
        var trust: String?
        if let ca = options.ca { trust = try RouterBench.readFile(ca) }
        let configuration = FCMConfiguration(
            projectID: options.fcmProject, serviceAccount: account, serviceAccountSource: options.fcmServiceAccount,
            endpoint: endpoint, tokenEndpoint: tokenEndpoint, additionalTrustRootsPEM: trust, caPath: options.ca,
            connections: options.connections,
            maxConcurrentStreams: (options.inFlight + options.connections - 1) / options.connections,
            requestTimeout: .seconds(options.timeout))
        let policy = DeliveryPolicy(retry: .default, maxInFlight: options.inFlight)
        let fcm = try FCMProvider(name: "fcm", configuration: configuration, policy: policy,
                                  logger: RouterBench.quietLogger("norq.bench.fcm"))
        // Latencies from the router's own metric (see `RouterLatencyMetrics`), not a wrapper around the provider.
        return try RouterBench.makeRouter(options, provider: fcm, metricsFactory: RouterLatencyMetrics(recorder: recorder))
    }

    func recipients(_ range: Range<Int>) -> [Recipient] {
        let platform = platform
        return range.map { Recipient(tokens: [PushToken(token: FCMBenchTokens.token($0), platform: platform)]) }
    }

    func measure() async throws -> RunResult {
        let recorder = LatencyRecorder(capacity: options.count + options.warmup)
        let (router, data) = try makeRouter(recorder: recorder)
        let counting = RouterBench(options: options)
        // The warm-up also fetches the access token (one RS256 assertion), outside the measured send.
        let warmCount = max(1, min(options.warmup, options.count))
        let warm = await counting.count(try router.sendStreaming(template: options.template, data: data,
                                                                 to: recipients(0..<warmCount)))
        guard warm["delivered"] == warmCount else {
            await router.shutdown(gracePeriod: .seconds(1))
            throw BenchError("warm-up did not deliver everything: \(warm)")
        }
        let all = recipients(0..<options.count)
        recorder.reset()
        let rssBeforeSend = ProcessStats.currentRSSMegabytes()
        let cpuStart = ProcessStats.cpuSeconds()
        let start = ContinuousClock.now
        let counts = await counting.count(try router.sendStreaming(template: options.template, data: data, to: all))
        let elapsed = start.duration(to: .now)
        let cpu = ProcessStats.cpuSeconds() - cpuStart
        await router.shutdown(gracePeriod: .seconds(5))
        var result = RunResult()
        result.add("client", "norq-router-fcm")
        if let label = options.label { result.add("label", label) }
        result.add("endpoint", options.endpoint)
        result.add("connections", options.connections)
        result.add("in_flight", options.inFlight)
        result.addDelivery(count: options.count, elapsed: elapsed, cpu: cpu, latencies: recorder.all, outcomes: counts)
        result.add("rss_before_send_mb", rssBeforeSend, digits: 1)
        return result
    }

    /// Delivers one notification (so the provider holds an access token), then writes the exact request of
    /// the first token: body.json, headers.txt (`name: value` lines, the bearer token included), path.txt.
    func writePrepared() async throws {
        guard let directory = options.outDir else { throw BenchError("--mode fcm-prepare needs --out DIR") }
        let (router, data) = try makeRouter(recorder: LatencyRecorder(capacity: 1))
        let first = recipients(0..<1)
        let sent = await RouterBench(options: options).count(try router.sendStreaming(template: options.template,
                                                                                      data: data, to: first))
        guard sent["delivered"] == 1 else {
            await router.shutdown(gracePeriod: .seconds(1))
            throw BenchError("the first FCM send did not deliver: \(sent)")
        }
        let deliveries = try router.prepare(template: options.template, data: data, to: first)
        await router.shutdown(gracePeriod: .seconds(1))
        guard let request = deliveries.first?.request else {
            throw BenchError("the router prepared no request: \(String(describing: deliveries.first?.plan))")
        }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Data(request.body).write(to: URL(fileURLWithPath: directory + "/body.json"))
        let headers = request.headers.map { "\($0.name): \($0.value)\n" }.joined()
        try Data(headers.utf8).write(to: URL(fileURLWithPath: directory + "/headers.txt"))
        try Data((request.path + "\n").utf8).write(to: URL(fileURLWithPath: directory + "/path.txt"))
        print("{\"body_bytes\":\(request.body.count),\"headers\":\(request.headers.count)}")
    }
}
