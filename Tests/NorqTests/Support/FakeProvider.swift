import Norq
import NorqCore
import Synchronization

/// A scripted provider: `deliver` answers what the script says for (request, attempt number of that
/// token) and records every request.
final class FakeProvider: PushProvider {
    typealias Script = @Sendable (PreparedRequest, Int) async throws(NorqError) -> DeliveryResponse

    struct State {
        var requests: [PreparedRequest] = []
        var attemptsByToken: [String: Int] = [:]
        var inFlight = 0
        var maxInFlight = 0
        var shutdownCalls = 0
        var channelPrepares = 0
    }

    let name: String
    let typeName: String
    let platforms: Set<Platform>
    let policy: DeliveryPolicy
    let supportsChannels: Bool
    let script: Script
    let state = Mutex(State())

    init(name: String, platforms: Set<Platform> = [.ios], retry: RetryPolicy = FakeProvider.fastRetry,
         maxInFlight: Int = 1000, supportsChannels: Bool = false,
         script: @escaping Script = { _, _ throws(NorqError) in FakeProvider.ok() }) {
        self.name = name
        self.typeName = "fake"
        self.platforms = platforms
        self.policy = DeliveryPolicy(retry: retry, idempotency: IdempotencyPolicy(requestIDHeader: "x-request-id"),
                                     maxInFlight: maxInFlight)
        self.supportsChannels = supportsChannels
        self.script = script
    }

    static let fastRetry = RetryPolicy(retries: 2, backoff: .milliseconds(1), maxBackoff: .milliseconds(4))

    static func ok(_ id: String? = nil) -> DeliveryResponse {
        DeliveryResponse(status: 200, messageID: id, classification: .delivered)
    }

    static func fail(_ status: Int, _ reason: String, _ classification: ResponseClass,
                     retryAfter: Duration? = nil, invalidSince: Int64? = nil) -> DeliveryResponse {
        DeliveryResponse(status: status, reason: reason, invalidSince: invalidSince, retryAfter: retryAfter,
                         classification: classification)
    }

    func prepare(_ content: PushContent, for token: PushToken, options: SendOptions) throws(NorqError) -> PreparedRequest {
        if content.title == "too-large" { throw NorqError("apns/payload-too-large", "payload too large") }
        var headers = [HTTPHeader("x-request-id", options.requestID ?? "")]
        if let collapse = options.collapseID ?? content.headers.collapseID { headers.append(HTTPHeader("x-collapse", collapse)) }
        return PreparedRequest(method: "POST", authority: "fake.invalid", path: "/push/\(token.token)", headers: headers,
                               body: Array((content.title + "|" + content.body).utf8), provider: name,
                               target: .token(token), environment: options.environment ?? token.environment ?? .sandbox,
                               requestID: options.requestID)
    }

    func prepare(_ content: PushContent, forChannel channel: ChannelRecipient,
                 options: SendOptions) throws(NorqError) -> PreparedRequest {
        guard supportsChannels else {
            throw NorqError(.broadcastUnsupported, "provider \(name) does not support broadcast channels")
        }
        state.withLock { $0.channelPrepares += 1 }
        return PreparedRequest(method: "POST", authority: "fake.invalid", path: "/channel/\(channel.channel)",
                               headers: [HTTPHeader("x-request-id", options.requestID ?? "")], body: [],
                               provider: name, target: .channel(channel), requestID: options.requestID)
    }

    func deliver(_ request: PreparedRequest, deadline: ContinuousClock.Instant) async throws(NorqError) -> DeliveryResponse {
        let attempt = state.withLock { state in
            state.requests.append(request)
            state.inFlight += 1
            state.maxInFlight = max(state.maxInFlight, state.inFlight)
            let key = request.path
            state.attemptsByToken[key, default: 0] += 1
            return state.attemptsByToken[key] ?? 1
        }
        defer { state.withLock { $0.inFlight -= 1 } }
        return try await script(request, attempt)
    }

    func shutdown() async {
        state.withLock { $0.shutdownCalls += 1 }
    }

    func collapseID(of request: PreparedRequest) -> String? { request.header("x-collapse") }

    var requests: [PreparedRequest] { state.withLock { $0.requests } }
    var requestCount: Int { state.withLock { $0.requests.count } }
    var peakInFlight: Int { state.withLock { $0.maxInFlight } }
    var shutdownCalls: Int { state.withLock { $0.shutdownCalls } }
}

/// A one-shot gate: `wait()` suspends until `open()`.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// A counter readable from tests.
final class CallCounter: Sendable {
    private let value = Mutex(0)
    func increment() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
}

/// A template source that renders `title` from data and counts renders.
final class FakeTemplates: TemplateSource {
    let renders = CallCounter()
    func content(template: String, data: JSONValue, strict: Bool) throws(NorqError) -> PushContent? {
        renders.increment()
        switch template {
        case "disabled": return nil
        case "hello":
            guard let name = data["name"]?.stringValue else {
                if strict { throw NorqError("template/missing-variable", "name is missing") }
                return PushContent(title: "Hello there", body: "b")
            }
            return PushContent(title: "Hello \(name)", body: "b")
        default:
            throw NorqError("template/not-found", "no template \(template)")
        }
    }
}

/// Sleeps recorded, never really slept (beyond a yield).
final class SleepRecorder: Sendable {
    private let sleeps = Mutex<[Duration]>([])
    var recorded: [Duration] { sleeps.withLock { $0 } }
    var clock: RouterClock {
        RouterClock(sleep: { duration in
            self.sleeps.withLock { $0.append(duration) }
            await Task.yield()
        }, random: { 0.5 })
    }
}

func ios(_ token: String, provider: String? = nil, environment: PushEnvironment? = nil) -> PushToken {
    PushToken(token: token, platform: .ios, provider: provider, environment: environment)
}

func recipients(_ tokens: [PushToken]) -> [Recipient] { [Recipient(id: "u1", tokens: tokens)] }

func hexToken(_ index: Int) -> String {
    let digits = String(index, radix: 16)
    return String(repeating: "0", count: max(0, 64 - digits.count)) + digits
}

/// A settable instant for injected clocks.
final class ManualNow: Sendable {
    private let value = Mutex(ContinuousClock.now)
    var instant: ContinuousClock.Instant { value.withLock { $0 } }
    func advance(by duration: Duration) { value.withLock { $0 = $0.advanced(by: duration) } }
}
