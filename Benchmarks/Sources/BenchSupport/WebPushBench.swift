import Crypto
import Foundation
import Logging
import Norq
import NorqCore
import NorqTemplates
import NorqWebPush

/// The Web Push modes (issue 16):
///
/// - `webpush`: N notifications through `NotificationRouter` + `WebPushProvider` in one bulk send: the template is
///   rendered once, and every subscription gets its own RFC 8291 encryption (fresh ephemeral key, ECDH, HKDF,
///   AES-128-GCM) and the per-origin VAPID token, over TLS HTTP/2 to `--endpoint` (nghttpd in webpush.sh).
///   Subscriptions are `<endpoint><--webpush-path><token>`, all with the demo subscription's keys.
/// - `webpush-encrypt`: CPU per message of the encryption (one thread), of one ES256 VAPID signature, and of the
///   provider's whole `prepare` (keys decoded, encryption, headers, the cached VAPID token), one JSON line.
/// - `webpush-prepare`: writes the plaintext payload, one encrypted body and its headers to `--out` (for h2load
///   and pywebpush).
package struct WebPushBench {
    package let options: Options
    package init(options: Options) { self.options = options }

    /// The demo subscription of examples/quickstart (its keys are published in examples/keys/README.md).
    package static let demoP256DH = "BKCjp1WSg7IDKe3dkSVMishklWs4459OXVoS2crjl1jqju8PbORmCsqtxo2LmsRbX2fMOyuft4jx5Ueznj5Tp_Q"
    package static let demoAuth = "SCcgLAlycoK6hUuYKyV4MQ"

    var origin: String {
        var text = options.endpoint
        while text.hasSuffix("/") { text.removeLast() }
        return text
    }

    package func endpoint(_ index: Int) -> String { origin + options.webPushPath + BenchTokens.token(index) }

    package func recipients(_ range: Range<Int>) -> [Recipient] {
        let keys = WebPushKeys(p256dh: Self.demoP256DH, auth: Self.demoAuth)
        return range.map { Recipient(tokens: [PushToken(token: endpoint($0), platform: .web, keys: keys)]) }
    }

    package func configuration() throws -> WebPushConfiguration {
        let key = try P256.Signing.PrivateKey(pemRepresentation: try RouterBench.readFile(options.vapidKey))
        // The sink is 127.0.0.1: private endpoints allowed (the SSRF guard would refuse it), the bench CA trusted.
        return WebPushConfiguration(
            vapidKeys: try VAPIDKeyPair(privateKey: key), keySource: options.vapidKey, subject: "mailto:bench@example.com",
            allowPrivateEndpoints: true, additionalTrustRootsPEM: try options.ca.map(RouterBench.readFile), caPath: options.ca,
            connectionsPerOrigin: options.connections, requestTimeout: .seconds(options.timeout))
    }

    package func makeProvider() throws -> WebPushProvider {
        try WebPushProvider(name: "webpush", configuration: configuration(),
                            policy: DeliveryPolicy(retry: .default, maxInFlight: options.inFlight),
                            logger: RouterBench.quietLogger("norq.bench.webpush"))
    }

    package func makeRouter(recorder: LatencyRecorder) throws -> (NotificationRouter, JSONValue) {
        let provider = TimedProvider(inner: try makeProvider(), recorder: recorder)
        let library = try TemplateLibrary(directory: options.templates)
        let data = try library.template(named: options.template).defaultSample
        let router = try NotificationRouter(providers: [provider], defaultProvider: "webpush", templates: library,
                                            logger: RouterBench.quietLogger("norq.bench.router"))
        return (router, data)
    }

    // MARK: --mode webpush

    package func run() async throws -> RunResult {
        let recorder = LatencyRecorder(capacity: options.count + options.warmup)
        let (router, data) = try makeRouter(recorder: recorder)
        let routerBench = RouterBench(options: options)
        if options.warmup > 0 {
            let warmCount = min(options.warmup, options.count)
            let warm = try await routerBench.count(router.sendStreaming(template: options.template, data: data,
                                                                        to: recipients(0..<warmCount)))
            guard warm["delivered"] == warmCount else {
                await router.shutdown(gracePeriod: .seconds(1))
                throw BenchError("warm-up did not deliver everything: \(warm)")
            }
        }
        let all = recipients(0..<options.count)
        recorder.reset()
        let rssBeforeSend = ProcessStats.currentRSSMegabytes()
        let cpuStart = ProcessStats.cpuSeconds()
        let start = ContinuousClock.now
        let counts = await routerBench.count(try router.sendStreaming(template: options.template, data: data, to: all))
        let elapsed = start.duration(to: .now)
        let cpu = ProcessStats.cpuSeconds() - cpuStart
        await router.shutdown(gracePeriod: .seconds(5))
        var result = RunResult()
        result.add("client", "norq-webpush")
        if let label = options.label { result.add("label", label) }
        result.add("endpoint", options.endpoint)
        result.add("connections", options.connections)
        result.add("in_flight", options.inFlight)
        result.addDelivery(count: options.count, elapsed: elapsed, cpu: cpu, latencies: recorder.all, outcomes: counts)
        result.add("rss_before_send_mb", rssBeforeSend, digits: 1)
        result.add("cpu_us_per_message", cpu / Double(options.count) * 1e6, digits: 1)
        return result
    }

    // MARK: --mode webpush-prepare

    /// The rendered content of the benchmark template, as the router hands it to the provider.
    func content() throws -> (PushContent, PreparedRequest) {
        let (router, data) = try makeRouter(recorder: LatencyRecorder(capacity: 0))
        let deliveries = try router.prepare(template: options.template, data: data, to: recipients(0..<1))
        guard let request = deliveries.first?.request else {
            throw BenchError("the router prepared no request: \(String(describing: deliveries.first?.plan))")
        }
        let library = try TemplateLibrary(directory: options.templates)
        guard let content = try library.content(template: options.template, data: data, strict: true) else {
            throw BenchError("template \(options.template) is disabled")
        }
        return (content, request)
    }

    /// Writes `plaintext.json` (what the service worker receives), `body.bin` (one encrypted body), `headers.txt`
    /// (`name: value` lines, the VAPID token included) and `subscription.json` (endpoint of token 0 and the keys).
    package func writePrepared() throws {
        guard let directory = options.outDir else { throw BenchError("--mode webpush-prepare needs --out DIR") }
        let (content, request) = try content()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let plaintext = WebPushPayload.encode(content)
        try Data(plaintext).write(to: URL(fileURLWithPath: directory + "/plaintext.json"))
        try Data(request.body).write(to: URL(fileURLWithPath: directory + "/body.bin"))
        let headers = request.headers.map { "\($0.name): \($0.value)\n" }.joined()
        try Data(headers.utf8).write(to: URL(fileURLWithPath: directory + "/headers.txt"))
        let subscription = #"{"endpoint":"\#(endpoint(0))","keys":{"p256dh":"\#(Self.demoP256DH)","auth":"\#(Self.demoAuth)"}}"#
        try Data(subscription.utf8).write(to: URL(fileURLWithPath: directory + "/subscription.json"))
        print("{\"plaintext_bytes\":\(plaintext.count),\"body_bytes\":\(request.body.count),\"headers\":\(request.headers.count)}")
    }

    // MARK: --mode webpush-encrypt

    /// One thread, `--count` messages per measurement (after `--warmup`): thread CPU per encryption, per ES256
    /// VAPID signature (what a sender that does not cache the token pays per message) and per provider `prepare`.
    package func encryptionRun() throws -> RunResult {
        let (content, _) = try content()
        let plaintext = WebPushPayload.encode(content)
        let keys = try WebPushSubscriptionKeys(WebPushKeys(p256dh: Self.demoP256DH, auth: Self.demoAuth))
        let configuration = try configuration()
        let signer = VAPIDSigner(keys: configuration.vapidKeys, subject: configuration.subject)
        let provider = try makeProvider()
        let token = PushToken(token: endpoint(0), platform: .web, keys: WebPushKeys(p256dh: Self.demoP256DH, auth: Self.demoAuth))
        let audience = origin
        var sink = 0

        func measure(_ body: () throws -> Int) rethrows -> Double {
            for _ in 0..<min(options.warmup, 1_000) { sink &+= try body() }
            let start = ThreadCPU.seconds()
            for _ in 0..<options.count { sink &+= try body() }
            return (ThreadCPU.seconds() - start) / Double(options.count) * 1e6
        }
        let encrypt = try measure { try WebPushEncryption.encrypt(plaintext, keys: keys).count }
        let webKeys = WebPushKeys(p256dh: Self.demoP256DH, auth: Self.demoAuth)
        let decode = try measure { try WebPushSubscriptionKeys(webKeys).authSecret.count }
        let sign = measure { signer.sign(audience: audience, expiresAt: 2_000_000_000).utf8.count }
        let prepare = try measure {
            try provider.prepare(content, for: token, options: SendOptions()).body.count
        }
        var result = RunResult()
        result.add("client", "norq-webpush-encrypt")
        if let label = options.label { result.add("label", label) }
        result.add("count", options.count)
        result.add("plaintext_bytes", plaintext.count)
        result.add("encrypt_us", encrypt, digits: 2)
        result.add("vapid_sign_us", sign, digits: 2)
        result.add("encrypt_plus_sign_us", encrypt + sign, digits: 2)
        result.add("prepare_us", prepare, digits: 2)
        result.add("decode_keys_us", decode, digits: 2)
        result.add("checksum", sink & 0xff)
        return result
    }
}

/// CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`).
enum ThreadCPU {
    static func seconds() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }
}

extension WebPushBench {
    /// Runs `--mode webpush`, `webpush-encrypt` or `webpush-prepare` and prints its JSON line.
    package func runMode() async throws {
        switch options.mode {
        case "webpush": print(try await run().json)
        case "webpush-encrypt": print(try encryptionRun().json)
        default: try writePrepared()
        }
    }
}
