import Dispatch
import Norq
import NorqCore
import Synchronization
import Testing

/// A provider with a callback transport: `startDelivery` answers synchronously on the calling thread, or later
/// from other threads in an order of its own (`.scattered`), through `answer(path, attempt)`.
final class CallbackProvider: PushProvider {
    /// `.held`: answers wait until `releaseHeld()`.
    enum Timing: Sendable { case inline, scattered, held }
    typealias Answer = @Sendable (String, Int) -> Result<DeliveryResponse, NorqError>

    let name = "apns"
    let platforms: Set<Platform> = [.ios]
    let policy: DeliveryPolicy
    let timing: Timing
    let answer: Answer
    private struct State {
        var started = 0
        var inFlight = 0
        var peakInFlight = 0
        var attempts: [String: Int] = [:]
        var prepared = 0
        var held: [@Sendable () -> Void] = []
    }
    private let state = Mutex(State())
    private let queues = (0..<4).map { DispatchQueue(label: "norq.test.provider.\($0)") }

    init(maxInFlight: Int, timing: Timing,
         answer: @escaping Answer = { _, _ in .success(DeliveryResponse(status: 200, classification: .delivered)) }) {
        self.policy = DeliveryPolicy(retry: RetryPolicy(retries: 2, backoff: .milliseconds(1), maxBackoff: .milliseconds(2)),
                                     maxInFlight: maxInFlight)
        self.timing = timing
        self.answer = answer
    }

    func prepare(_ content: PushContent, for token: PushToken, options: SendOptions) throws(NorqError) -> PreparedRequest {
        if content.title == "refused" { throw NorqError("apns/payload-too-large", "refused by prepare") }
        state.withLock { $0.prepared += 1 }
        return PreparedRequest(method: "POST", authority: "callback.invalid", path: "/3/device/\(token.token)",
                               headers: [], body: [], provider: name, target: .token(token), requestID: options.requestID)
    }

    func deliver(_ request: PreparedRequest, deadline: ContinuousClock.Instant) async throws(NorqError) -> DeliveryResponse {
        Issue.record("the router must deliver through startDelivery")
        throw NorqError(.transportFailed, "not used")
    }

    func startDelivery(_ request: PreparedRequest, deadline: ContinuousClock.Instant,
                       completion: @escaping @Sendable (Result<DeliveryResponse, NorqError>) -> Void) {
        let (attempt, started) = state.withLock { state in
            state.started += 1
            state.inFlight += 1
            state.peakInFlight = max(state.peakInFlight, state.inFlight)
            state.attempts[request.path, default: 0] += 1
            return (state.attempts[request.path] ?? 1, state.started)
        }
        let result = answer(request.path, attempt)
        let finish: @Sendable () -> Void = {
            self.state.withLock { $0.inFlight -= 1 }
            completion(result)
        }
        switch timing {
        case .inline: finish()
        case .scattered: queues[started % queues.count].async(execute: finish)
        case .held: state.withLock { $0.held.append(finish) }
        }
    }

    /// Answers every held request (`.held`).
    func releaseHeld() {
        let held = state.withLock { state in
            defer { state.held.removeAll() }
            return state.held
        }
        for finish in held { finish() }
    }

    /// Answers the oldest held request (`.held`); false when none is held.
    func releaseOne() -> Bool {
        guard let finish = state.withLock({ $0.held.isEmpty ? nil : $0.held.removeFirst() }) else { return false }
        finish()
        return true
    }

    var prepared: Int { state.withLock { $0.prepared } }

    var started: Int { state.withLock { $0.started } }
    var peakInFlight: Int { state.withLock { $0.peakInFlight } }
}

@Suite("DeliveryPump: callback delivery without a task per request")
struct DeliveryPumpTests {
    static func tokens(_ count: Int) -> [PushToken] { (0..<count).map { ios(hexToken($0)) } }

    /// One `send` of content titled `title` to `count` tokens through a router over `provider`.
    static func send(_ count: Int, through provider: CallbackProvider, title: String = "t") async throws -> SendReport {
        let router = try NotificationRouter(providers: [provider])
        return try await router.send(content: PushContent(title: title), to: recipients(tokens(count)))
    }

    @Test("answers given synchronously inside startDelivery: 100,000 tokens, one outcome each, in order, no recursion")
    func inlineAnswers() async throws {
        let provider = CallbackProvider(maxInFlight: 1_000, timing: .inline)
        let router = try NotificationRouter(providers: [provider])
        let tokens = Self.tokens(100_000)
        let report = try await router.send(content: PushContent(title: "t"), to: recipients(tokens))
        #expect(report.outcomes.count == 100_000)
        #expect(report.outcomes.map(\.target) == tokens.map { DeliveryTarget.token($0) })
        #expect(report.outcomes.allSatisfy { $0.result.kind == "delivered" })
        #expect(provider.started == 100_000)
    }

    @Test("every prepare failing (outcomes emitted inside the fill loop) ends without recursion")
    func everyPrepareFails() async throws {
        let provider = CallbackProvider(maxInFlight: 1_000, timing: .inline)
        let report = try await Self.send(20_000, through: provider, title: "refused")
        #expect(report.outcomes.count == 20_000)
        #expect(report.outcomes.allSatisfy { $0.result.kind == "failed" && $0.attempts == 0 })
        #expect(provider.started == 0)
    }

    @Test("answers from several threads in any order: the in-flight bound holds and each token has one outcome")
    func scatteredAnswers() async throws {
        let provider = CallbackProvider(maxInFlight: 64, timing: .scattered)
        let router = try NotificationRouter(providers: [provider])
        let tokens = Self.tokens(20_000)
        var seen: Set<DeliveryTarget> = []
        for await outcome in try router.sendStreaming(content: PushContent(title: "t"), to: recipients(tokens)) {
            #expect(seen.insert(outcome.target).inserted, "two outcomes for one token")
            #expect(outcome.result.kind == "delivered")
        }
        #expect(seen.count == 20_000)
        #expect(provider.peakInFlight <= 64)
        #expect(provider.started == 20_000)
    }

    @Test("a retryable answer given synchronously is retried after the backoff, with the same request")
    func inlineRetry() async throws {
        let provider = CallbackProvider(maxInFlight: 10, timing: .inline) { _, attempt in
            attempt == 1
                ? .success(DeliveryResponse(status: 503, reason: "ServiceUnavailable", classification: .retryable))
                : .success(DeliveryResponse(status: 200, classification: .delivered))
        }
        let report = try await Self.send(500, through: provider)
        #expect(report.outcomes.count == 500)
        #expect(report.outcomes.allSatisfy { $0.result.kind == "delivered" && $0.attempts == 2 })
        #expect(provider.started == 1_000)
    }

    @Test("no target is prepared beyond the in-flight bound, and a cancel ends the rest without sending them")
    func preparedWithinTheBoundAndCancellable() async throws {
        let provider = CallbackProvider(maxInFlight: 8, timing: .held)
        let router = try NotificationRouter(providers: [provider])
        let task = Task { try await router.send(content: PushContent(title: "t"), to: recipients(Self.tokens(10_000))) }
        // Nothing answers: 8 requests are prepared and sent, no more (the in-flight bound).
        for _ in 0..<500 where provider.started < 8 { try await Task.sleep(for: .milliseconds(2)) }
        try await Task.sleep(for: .milliseconds(50))
        #expect(provider.started == 8)
        #expect(provider.prepared == 8)
        task.cancel()
        provider.releaseHeld()
        let report = try await task.value
        #expect(report.outcomes.count == 10_000)
        #expect(report.delivered == 8)
        #expect(report.outcomes.filter { $0.result.kind == "failed" && $0.attempts == 0 }.count == 10_000 - 8)
        #expect(provider.started == 8, "a target was sent after the cancel")
    }

    @Test("a slot freed by an answer in the middle of a read is refilled at once, not when the read's batch ends")
    func slotRefilledInsideTheBatch() async throws {
        let provider = CallbackProvider(maxInFlight: 4, timing: .held)
        let router = try NotificationRouter(providers: [provider])
        let task = Task { try await router.send(content: PushContent(title: "t"), to: recipients(Self.tokens(10))) }
        for _ in 0..<500 where provider.started < 4 { try await Task.sleep(for: .milliseconds(2)) }
        #expect(provider.started == 4)
        // The answers of one read, as a transport completes them: inside one completion batch.
        var startedDuringTheBatch: [Int] = []
        CompletionBatch.run {
            for _ in 0..<2 {
                _ = provider.releaseOne()
                startedDuringTheBatch.append(provider.started)
            }
        }
        #expect(startedDuringTheBatch == [5, 6], "each freed slot starts the next target inside the batch")
        #expect(provider.peakInFlight <= 4)
        for _ in 0..<2_000 {
            while provider.releaseOne() {}
            if provider.started == 10, !provider.releaseOne() { break }
            try await Task.sleep(for: .milliseconds(1))
        }
        let report = try await task.value
        #expect(report.delivered == 10)
        #expect(provider.started == 10)
    }

    @Test("cancelling a send whose answers come from other threads gives the rest send-cancelled")
    func cancelWithScatteredAnswers() async throws {
        let provider = CallbackProvider(maxInFlight: 4, timing: .scattered)
        let router = try NotificationRouter(providers: [provider])
        let task = Task { try await router.send(content: PushContent(title: "t"), to: recipients(Self.tokens(200_000))) }
        try await Task.sleep(for: .milliseconds(50))
        task.cancel()
        let report = try await task.value
        #expect(report.outcomes.count == 200_000)
        let cancelled = report.outcomes.filter { $0.result.kind == "failed" }.count
        let delivered = report.outcomes.filter { $0.result.kind == "delivered" }.count
        #expect(cancelled > 0)
        #expect(cancelled + delivered == 200_000)
        #expect(provider.started == delivered)
    }
}
