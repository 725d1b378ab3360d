import CoreMetrics
import Norq
import NorqCore
import Synchronization
import Testing

/// A recording swift-metrics factory: counters by label and dimensions.
final class RecordingMetrics: MetricsFactory, Sendable {
    final class CounterBox: CounterHandler, Sendable {
        let value = Mutex<Int64>(0)
        func increment(by amount: Int64) { value.withLock { $0 += amount } }
        func reset() { value.withLock { $0 = 0 } }
    }
    final class Noop: RecorderHandler, TimerHandler, MeterHandler, Sendable {
        func record(_ value: Int64) {}
        func record(_ value: Double) {}
        func recordNanoseconds(_ duration: Int64) {}
        func set(_ value: Int64) {}
        func set(_ value: Double) {}
        func increment(by: Double) {}
        func decrement(by: Double) {}
    }
    let counters = Mutex<[String: CounterBox]>([:])

    static func key(_ label: String, _ dimensions: [(String, String)]) -> String {
        label + dimensions.map { "|\($0.0)=\($0.1)" }.joined()
    }
    func value(_ label: String, _ dimensions: [(String, String)]) -> Int64 {
        counters.withLock { $0[Self.key(label, dimensions)] }?.value.withLock { $0 } ?? 0
    }
    var allKeys: [String] { counters.withLock { Array($0.keys) } }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        counters.withLock { counters in
            let key = Self.key(label, dimensions)
            if let existing = counters[key] { return existing }
            let made = CounterBox()
            counters[key] = made
            return made
        }
    }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler { Noop() }
    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler { Noop() }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { Noop() }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyMeter(_ handler: any MeterHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
}

@Suite("Metrics")
struct MetricsTests {
    @Test("counters for sent, delivered, rejected by bounded reason, retried and deduplicated; no tokens in labels")
    func counters() async throws {
        let metrics = RecordingMetrics()
        let apns = FakeProvider(name: "apns") { request, attempt throws(NorqError) in
            switch request.path {
            case "/push/bad-token-0001": return FakeProvider.fail(410, "Unregistered", .tokenInvalid)
            case "/push/odd-token-0002": return FakeProvider.fail(400, "SomethingNew", .permanent)
            case "/push/slow-token-0003" where attempt == 1: return FakeProvider.fail(503, "ServiceUnavailable", .retryable)
            default: return FakeProvider.ok()
            }
        }
        let r = try NotificationRouter(providers: [apns], metricsFactory: metrics, clock: SleepRecorder().clock)
        let tokens = [ios("bad-token-0001"), ios("odd-token-0002"), ios("slow-token-0003"), ios("good-token-0004")]
        let options = RouterSendOptions(idempotencyKey: "m")
        _ = try await r.send(content: PushContent(title: "t"), to: recipients(tokens), options: options)
        _ = try await r.send(content: PushContent(title: "t"), to: recipients([ios("good-token-0004")]), options: options)
        let provider = [("provider", "apns")]
        #expect(metrics.value("norq_sent_total", provider) == 5)
        #expect(metrics.value("norq_delivered_total", provider) == 2)
        #expect(metrics.value("norq_retried_total", provider) == 1)
        #expect(metrics.value("norq_deduplicated_total", provider) == 1)
        #expect(metrics.value("norq_rejected_total", provider + [("reason", "Unregistered")]) == 1)
        #expect(metrics.value("norq_rejected_total", provider + [("reason", "other")]) == 1)
        #expect(!metrics.allKeys.contains { $0.contains("token-000") || $0.contains("SomethingNew") })
    }
}

@Suite("Metrics reason labels come from the providers")
struct ProviderReasonLabelTests {
    @Test("a reason is a label when its provider knows it (each provider's own table), else other")
    func labelsFromProviders() async throws {
        let metrics = RecordingMetrics()
        let first = FakeProvider(name: "one", platforms: [.ios], knownReasons: ["UnrelatedKeyIdInToken"]) { _, _ throws(NorqError) in
            FakeProvider.fail(403, "UnrelatedKeyIdInToken", .credentials)
        }
        let second = FakeProvider(name: "two", platforms: [.android], knownReasons: ["UNREGISTERED"]) { request, _ throws(NorqError) in
            request.path.hasSuffix("a1") ? FakeProvider.fail(404, "UNREGISTERED", .tokenInvalid)
                : FakeProvider.fail(400, "NOT_IN_ANY_TABLE", .permanent)
        }
        let r = try NotificationRouter(providers: [first, second], metricsFactory: metrics, clock: SleepRecorder().clock)
        let tokens = [ios("i1"), PushToken(token: "a1", platform: .android), PushToken(token: "a2", platform: .android)]
        _ = try await r.send(content: PushContent(title: "t"), to: recipients(tokens))
        #expect(metrics.value("norq_rejected_total", [("provider", "one"), ("reason", "UnrelatedKeyIdInToken")]) == 1)
        #expect(metrics.value("norq_rejected_total", [("provider", "two"), ("reason", "UNREGISTERED")]) == 1)
        #expect(metrics.value("norq_rejected_total", [("provider", "two"), ("reason", "other")]) == 1)
    }
}
