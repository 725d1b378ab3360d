import Norq
import NorqCore
import Synchronization
import Testing

/// The router's per-batch path (`SharedContentBatchProvider`), with a provider that knows nothing of Expo: the
/// content prepared once per platform, first attempts grouped without a request per target (no `prepare` call),
/// the batch bound and the batch key kept, one outcome per target, and only the failed targets of a batch prepared
/// alone and sent again.
@Suite("Router per-batch path")
struct RouterSharedBatchingTests {
    /// Groups by the token's first letter; a token in `failOnce` gets a 503 the first time; `prepare` and
    /// `prepareShared` are counted; tokens starting with `x` are not accepted on the per-batch path, and `prepare`
    /// refuses them.
    final class SharedProvider: SharedContentBatchProvider {
        let name = "shared"
        let platforms: Set<Platform> = [.ios, .android]
        let policy = DeliveryPolicy(retry: RetryPolicy(retries: 2, backoff: .milliseconds(1)), maxInFlight: 1000)
        let maxBatchSize: Int
        let failOnce: Set<String>
        /// No per-token request id in the request (else the router keeps the per-token path).
        var readsRequestID: Bool { false }
        /// Each request: its tokens, and whether it came through the per-batch path.
        let requests = Mutex<[(tokens: [String], shared: Bool)]>([])
        let prepared = Mutex<[String]>([])
        let sharedPrepared = Mutex<[Platform]>([])
        private let failed = Mutex<Set<String>>([])

        init(maxBatchSize: Int = 100, failOnce: Set<String> = []) {
            self.maxBatchSize = maxBatchSize
            self.failOnce = failOnce
        }

        func prepare(_ content: PushContent, for token: PushToken, options: SendOptions) throws(NorqError) -> PreparedRequest {
            guard !token.token.hasPrefix("x") else { throw NorqError(.invalidRecipient, "not this provider's token") }
            prepared.withLock { $0.append(token.token) }
            return PreparedRequest(method: "POST", authority: "batch.invalid", path: "/", headers: [],
                                   body: Array("\(token.platform):\(content.title)".utf8), provider: name,
                                   target: .token(token))
        }

        func prepareShared(_ content: PushContent, platform: Platform,
                           options: SendOptions) throws(NorqError) -> SharedBatchContent? {
            sharedPrepared.withLock { $0.append(platform) }
            return SharedBatchContent(platform: platform, bytes: Array("\(platform):\(content.title)".utf8))
        }

        func accepts(_ token: PushToken, for content: SharedBatchContent) -> Bool {
            token.platform == content.platform && !token.token.hasPrefix("x")
        }

        func batchKey(for request: PreparedRequest) -> String? {
            guard case .token(let token) = request.target else { return nil }
            return batchKey(forToken: token)
        }

        func batchKey(forToken token: PushToken) -> String? { String(token.token.prefix(1)) }

        func answer(_ token: String) -> Result<DeliveryResponse, NorqError> {
            let fail = failOnce.contains(token) && failed.withLock { $0.insert(token).inserted }
            return .success(fail ? DeliveryResponse(status: 503, reason: "Unavailable", classification: .retryable)
                                 : DeliveryResponse(status: 200, messageID: "id-\(token)", classification: .accepted))
        }

        func deliver(_ request: PreparedRequest, deadline: ContinuousClock.Instant) async throws(NorqError) -> DeliveryResponse {
            guard case .token(let token) = request.target else { throw NorqError(.transportFailed, "no token") }
            requests.withLock { $0.append(([token.token], false)) }
            return try answer(token.token).get()
        }

        func startBatchDelivery(_ requests: [PreparedRequest], deadline: ContinuousClock.Instant,
                                completion: @escaping @Sendable ([Result<DeliveryResponse, NorqError>]) -> Void) {
            let tokens = requests.map { request -> String in
                guard case .token(let token) = request.target else { return "" }
                return token.token
            }
            self.requests.withLock { $0.append((tokens, false)) }
            completion(tokens.map(answer))
        }

        func startSharedBatchDelivery(_ targets: [SharedBatchTarget], deadline: ContinuousClock.Instant,
                                      completion: @escaping @Sendable ([Result<DeliveryResponse, NorqError>]) -> Void) {
            // The content each target carries is its platform's.
            let tokens = targets.map { target in
                target.content.platform == target.token.platform ? target.token.token : "wrong-content"
            }
            requests.withLock { $0.append((tokens, true)) }
            completion(tokens.map(answer))
        }
    }

    static func recipients(_ tokens: [String], platform: Platform = .ios) -> [Recipient] {
        tokens.map { Recipient(tokens: [PushToken(token: $0, platform: platform)]) }
    }

    static func router(_ provider: SharedProvider) throws -> NotificationRouter {
        try NotificationRouter(providers: [provider], byPlatform: [.ios: "shared", .android: "shared"],
                               clock: RouterClock(sleep: { _ in await Task.yield() }, random: { 0.5 }))
    }

    @Test("250 targets: requests of at most 100, no request prepared per target, one outcome each with its own id")
    func boundAndOneOutcomeEach() async throws {
        let provider = SharedProvider()
        let router = try Self.router(provider)
        let tokens = (0..<250).map { "a\($0)" }
        let report = try await router.send(content: PushContent(title: "Hi"), to: Self.recipients(tokens))
        #expect(report.outcomes.count == 250)
        #expect(report.accepted == 250)
        for (index, outcome) in report.outcomes.enumerated() {
            guard case .delivered(let delivered) = outcome.result else { Issue.record("\(outcome.result)"); continue }
            #expect(delivered.messageID == "id-\(tokens[index])")
            #expect(delivered.accepted)
            #expect(outcome.attempts == 1)
        }
        let requests = provider.requests.withLock { $0 }
        #expect(requests.allSatisfy { $0.shared && $0.tokens.count <= 100 })
        #expect(requests.flatMap(\.tokens).sorted() == tokens.sorted())
        #expect(requests.count >= 3 && requests.count < 250)
        #expect(provider.prepared.withLock { $0 }.isEmpty, "no per-target prepare on the first attempt")
        #expect(provider.sharedPrepared.withLock { $0 }.sorted { $0.rawValue < $1.rawValue } == [.android, .ios])
        await router.shutdown()
    }

    @Test("targets of different batch keys and platforms never share a request; each carries its platform's content")
    func keysAndPlatforms() async throws {
        let provider = SharedProvider()
        let router = try Self.router(provider)
        let ios = (0..<30).map { "a\($0)" } + (0..<30).map { "b\($0)" }
        let android = (0..<20).map { "a-android-\($0)" }
        let report = try await router.send(content: PushContent(title: "Hi"),
                                           to: Self.recipients(ios) + Self.recipients(android, platform: .android))
        #expect(report.accepted == 80)
        let requests = provider.requests.withLock { $0 }
        #expect(requests.allSatisfy { $0.shared })
        #expect(!requests.flatMap(\.tokens).contains("wrong-content"))
        #expect(requests.allSatisfy { Set($0.tokens.map { $0.prefix(1) }).count == 1 }, "\(requests.map(\.tokens))")
        #expect(requests.flatMap(\.tokens).sorted() == (ios + android).sorted())
        await router.shutdown()
    }

    @Test("only the failed targets of a batch are prepared alone and sent again; one outcome each")
    func partialBatchRetry() async throws {
        let provider = SharedProvider(failOnce: ["a2", "a4"])
        let router = try Self.router(provider)
        let tokens = (0..<5).map { "a\($0)" }
        let report = try await router.send(content: PushContent(title: "Hi"), to: Self.recipients(tokens))
        #expect(report.outcomes.count == 5)
        #expect(report.accepted == 5)
        #expect(report.outcomes.map(\.attempts) == [1, 1, 2, 1, 2])
        let requests = provider.requests.withLock { $0 }
        for (token, attempts) in zip(tokens, report.outcomes.map(\.attempts)) {
            #expect(requests.flatMap(\.tokens).count { $0 == token } == attempts, "\(token)")
        }
        // The retries went as prepared requests (the per-token path), the first attempts as one shared batch.
        #expect(requests.filter(\.shared).flatMap(\.tokens).sorted() == tokens)
        #expect(requests.filter { !$0.shared }.flatMap(\.tokens).sorted() == ["a2", "a4"])
        #expect(provider.prepared.withLock { $0 }.sorted() == ["a2", "a4"])
        await router.shutdown()
    }

    @Test("a target the provider does not accept takes the per-token path and fails alone with prepare's error")
    func notAcceptedTarget() async throws {
        let provider = SharedProvider()
        let router = try Self.router(provider)
        let tokens = ["a1", "x-native", "a2"]
        let report = try await router.send(content: PushContent(title: "Hi"), to: Self.recipients(tokens))
        #expect(report.outcomes.count == 3)
        #expect(report.accepted == 2)
        guard case .failed(let error) = report.outcomes[1].result else {
            Issue.record("\(report.outcomes[1].result)")
            return
        }
        #expect(error.code == .invalidRecipient)
        #expect(provider.requests.withLock { $0 }.flatMap(\.tokens).sorted() == ["a1", "a2"])
        await router.shutdown()
    }

    @Test("with an idempotency key each target's outcome is recorded, and a repeat of the send is a duplicate")
    func idempotencyKey() async throws {
        let provider = SharedProvider()
        let router = try Self.router(provider)
        let tokens = (0..<10).map { "a\($0)" }
        var options = RouterSendOptions()
        options.idempotencyKey = "shared-batch-key"
        let first = try await router.send(content: PushContent(title: "Hi"), to: Self.recipients(tokens), options: options)
        #expect(first.accepted == 10)
        let again = try await router.send(content: PushContent(title: "Hi"), to: Self.recipients(tokens), options: options)
        #expect(again.outcomes.count == 10)
        #expect(again.outcomes.allSatisfy { if case .duplicate = $0.result { true } else { false } })
        #expect(provider.requests.withLock { $0 }.flatMap(\.tokens).count == 10)
        await router.shutdown()
    }
}
