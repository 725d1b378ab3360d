import Crypto
import Foundation
import Norq
import NorqAPNs
import NorqCore
import NorqTesting
import Synchronization
import Testing

/// NotificationRouter -> APNsProvider -> APNs emulator over TLS HTTP/2 on 127.0.0.1: routing, several
/// credentials, per-token environments, a faulty burst, graceful shutdown and invalid-token events.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct RouterEndToEndFaultTests {
    static let teamA = APNsCredentials(teamID: "TEAMAAAAAA", keyID: "KEYAAAAAAA")
    static let teamB = APNsCredentials(teamID: "TEAMBBBBBB", keyID: "KEYBBBBBBB")

    static func token(_ i: Int) -> String { hexToken(0xe2e0000 + i) }

    @Test("routing steps: token.provider, push.ios, push, the only provider, no route, unknown provider")
    func allRoutingSteps() async throws {
        let emulatorA = try await EmulatorFixtures.emulator([Self.teamA])
        let emulatorB = try await EmulatorFixtures.emulator([Self.teamB])
        let a = try EmulatorFixtures.provider("apns-a", Self.teamA, bundleID: "com.example.a", sandbox: emulatorA)
        let b = try EmulatorFixtures.provider("apns-b", Self.teamB, bundleID: "com.example.b", sandbox: emulatorB)
        let content = PushContent(title: "route", body: "me")

        // push.ios names b, push names a: the token's own provider wins, then push.ios.
        let byPlatform = try NotificationRouter(providers: [a, b], defaultProvider: "apns-a", byPlatform: [.ios: "apns-b"],
                                                clock: EmulatorFixtures.noWait)
        let report1 = try await byPlatform.send(content: content, to: recipients([
            ios(Self.token(1), provider: "apns-a"), ios(Self.token(2)), ios(Self.token(3), provider: "apns-c"),
        ]))
        #expect(report1.outcomes.map(\.provider) == ["apns-a", "apns-b", nil])
        #expect(report1.outcomes[0].result.kind == "delivered" && report1.outcomes[1].result.kind == "delivered")
        if case .rejected(let rejected) = report1.outcomes[2].result {
            #expect(rejected.code == .unknownProvider)
        } else {
            Issue.record("an unknown provider must be rejected, got \(report1.outcomes[2].result.kind)")
        }
        #expect(emulatorA.requests.map(\.deviceToken) == [Self.token(1)])
        #expect(emulatorB.requests.map(\.deviceToken) == [Self.token(2)])
        #expect(emulatorA.requests.first?.header("apns-topic") == "com.example.a")
        #expect(emulatorB.requests.first?.header("apns-topic") == "com.example.b")

        // Only push: it is the fallback.
        let byDefault = try NotificationRouter(providers: [a, b], defaultProvider: "apns-b", clock: EmulatorFixtures.noWait)
        let report2 = try await byDefault.send(content: content, to: recipients([ios(Self.token(4))]))
        #expect(report2.outcomes.map(\.provider) == ["apns-b"] && report2.allDelivered)
        #expect(emulatorB.requests.last?.deviceToken == Self.token(4))

        // No routing, two iOS providers: skipped with routing/no-provider, nothing sent.
        let ambiguous = try NotificationRouter(providers: [a, b], clock: EmulatorFixtures.noWait)
        let before = emulatorA.requests.count + emulatorB.requests.count
        let report3 = try await ambiguous.send(content: content, to: recipients([ios(Self.token(5))]))
        if case .skipped(let skipped) = report3.outcomes[0].result {
            #expect(skipped.code == .noProvider)
        } else {
            Issue.record("expected routing/no-provider, got \(report3.outcomes[0].result.kind)")
        }
        #expect(emulatorA.requests.count + emulatorB.requests.count == before)

        // No routing, one provider: it is chosen.
        let only = try NotificationRouter(providers: [a], clock: EmulatorFixtures.noWait)
        let report4 = try await only.send(content: content, to: recipients([ios(Self.token(6))]))
        #expect(report4.outcomes.map(\.provider) == ["apns-a"] && report4.allDelivered)
        #expect(emulatorA.requests.last?.deviceToken == Self.token(6))

        #expect((emulatorA.requests + emulatorB.requests).allSatisfy { $0.status == 200 })
        await only.shutdown(gracePeriod: .seconds(1))
        await b.shutdown()
        try? await emulatorA.shutdown()
        try? await emulatorB.shutdown()
    }

    @Test("two APNs instances with different teams and keys in one router, against one emulator")
    func twoCredentialsSideBySide() async throws {
        // One emulator that knows both keys (any team): each request must carry its own provider's JWT.
        let emulator = try await EmulatorFixtures.emulator([Self.teamA, Self.teamB])
        let a = try EmulatorFixtures.provider("app-a", Self.teamA, bundleID: "com.example.a", sandbox: emulator)
        let b = try EmulatorFixtures.provider("app-b", Self.teamB, bundleID: "com.example.b", sandbox: emulator)
        let router = try NotificationRouter(providers: [a, b], defaultProvider: "app-a", clock: EmulatorFixtures.noWait)
        var tokens: [PushToken] = []
        for i in 0..<20 { tokens.append(ios(Self.token(100 + i), provider: i.isMultiple(of: 2) ? "app-a" : "app-b")) }
        let report = try await router.send(content: PushContent(title: "two teams"), to: recipients(tokens))
        #expect(report.outcomes.count == 20 && report.allDelivered)
        let records = emulator.requests
        #expect(records.count == 20 && records.allSatisfy { $0.status == 200 })
        for record in records {
            let index = Int(record.deviceToken ?? "", radix: 16).map { $0 - 0xe2e0000 - 100 } ?? -1
            let expected = index.isMultiple(of: 2) ? Self.teamA : Self.teamB
            let identity = EmulatorFixtures.jwtIdentity(record.header("authorization"))
            #expect(identity?.kid == expected.keyID && identity?.iss == expected.teamID)
            #expect(record.header("apns-topic") == (index.isMultiple(of: 2) ? "com.example.a" : "com.example.b"))
        }
        // Separate credentials mean separate connections.
        #expect(Set(records.map(\.connectionID)).count == 2)
        await router.shutdown(gracePeriod: .seconds(1))
        try? await emulator.shutdown()

        // And an emulator that knows only team A's key refuses team B's JWT as a credentials problem.
        let onlyA = try await EmulatorFixtures.emulator([Self.teamA])
        let wrong = try EmulatorFixtures.provider("app-b", Self.teamB, sandbox: onlyA)
        let refused = try NotificationRouter(providers: [wrong], clock: EmulatorFixtures.noWait)
        let denied = try await refused.send(content: PushContent(title: "x"), to: recipients([ios(Self.token(1))]))
        if case .rejected(let rejected) = denied.outcomes[0].result {
            #expect(rejected.status == 403 && rejected.classification == .credentials)
            #expect(denied.outcomes[0].attempts == 1)
        } else {
            Issue.record("expected a 403 rejection, got \(denied.outcomes[0].result.kind)")
        }
        await refused.shutdown(gracePeriod: .seconds(1))
        try? await onlyA.shutdown()
    }

    @Test("per-token environment: sandbox and production tokens go to their endpoints, none to the default or the send option")
    func perTokenEnvironment() async throws {
        let sandbox = try await EmulatorFixtures.emulator([Self.teamA], name: "sandbox")
        let production = try await EmulatorFixtures.emulator([Self.teamA], name: "production")
        let prodDefault = try EmulatorFixtures.provider("prod", Self.teamA, sandbox: sandbox, production: production,
                                                        productionByDefault: true)
        let sandboxDefault = try EmulatorFixtures.provider("dev", Self.teamA, sandbox: sandbox, production: production,
                                                           productionByDefault: false)
        let router = try NotificationRouter(providers: [prodDefault, sandboxDefault], defaultProvider: "prod",
                                            clock: EmulatorFixtures.noWait)
        let tokens = [
            ios(Self.token(1), environment: .sandbox), ios(Self.token(2), environment: .production), ios(Self.token(3)),
            ios(Self.token(4), provider: "dev", environment: .sandbox),
            ios(Self.token(5), provider: "dev", environment: .production), ios(Self.token(6), provider: "dev"),
        ]
        let report = try await router.send(content: PushContent(title: "env"), to: recipients(tokens))
        #expect(report.outcomes.count == 6 && report.allDelivered)
        #expect(Set(sandbox.requests.compactMap(\.deviceToken)) == [Self.token(1), Self.token(4), Self.token(6)])
        #expect(Set(production.requests.compactMap(\.deviceToken)) == [Self.token(2), Self.token(3), Self.token(5)])

        // The send option overrides every token's environment.
        // The send option picks the environment of tokens that name none; a token's own environment still
        // wins (a token only works where it was issued).
        let overridden = try await router.send(content: PushContent(title: "env"),
                                               to: recipients([ios(Self.token(7)), ios(Self.token(8), environment: .production)]),
                                               options: RouterSendOptions(environment: .sandbox))
        #expect(overridden.allDelivered)
        #expect(sandbox.requests.last?.deviceToken == Self.token(7) && production.requests.last?.deviceToken == Self.token(8))
        await router.shutdown(gracePeriod: .seconds(1))
        try? await sandbox.shutdown()
        try? await production.shutdown()
    }

    /// One burst: its size, and the caller's idempotency key (none: the router's own key, no dedup reservation,
    /// and the outcome is emitted directly in the provider's completion).
    struct Burst: Sendable, CustomTestStringConvertible {
        var count: Int
        var key: String?
        var testDescription: String { "\(count) tokens, \(key == nil ? "no idempotency key" : "idempotency key")" }
    }

    static let bursts = [
        // NORQ_BURST_TOKENS sets another size for the keyed burst, for a quick local run.
        Burst(count: Int(ProcessInfo.processInfo.environment["NORQ_BURST_TOKENS"] ?? "") ?? 10_000, key: "burst-1"),
        Burst(count: 4_000, key: nil),
    ]

    @Test("a burst under 10% injected 503s and GOAWAYs: one outcome per token, none lost, none twice",
          .timeLimit(.minutes(3)), arguments: bursts)
    func burstUnderFaults(_ burst: Burst) async throws {
        // ~40 s of both cores in a debug build for 10,000 tokens.
        // Each connection sends GOAWAY after 30% of the burst's streams, with last-stream-id = that stream,
        // while ~1,000 streams are open: the hundreds above it must be retried elsewhere, those below answered.
        let count = burst.count
        let emulator = try await EmulatorFixtures.emulator(
            [Self.teamA], faults: .init(errorRate: 0.1, seed: 42, goAwayAfterStreams: max(count * 3 / 10, 750))) {
                $0.recordBodies = false
                // Every request is checked below: more than the default bound of 10,000 records.
                $0.recordLimit = count * 4
            }
        let provider = try EmulatorFixtures.provider(
            "apns", Self.teamA, sandbox: emulator,
            retry: RetryPolicy(retries: 8, backoff: .milliseconds(1), maxBackoff: .milliseconds(2))) {
                // With 1,000 in flight, a slow debug build on a loaded machine answers each request seconds
                // later. A request that hits the 10 s default timeout after APNs took it is sent again (at least
                // once: APNs has no request-id dedup), which this test would count as a duplicate; timeouts
                // have tests of their own, this one is about GOAWAY and 503s.
                $0.requestTimeout = .seconds(60)
            }
        let router = try NotificationRouter(providers: [provider], clock: EmulatorFixtures.noWait)
        let tokens = (0..<count).map { ios(Self.token($0)) }
        let report = try await router.send(content: PushContent(title: "burst"), to: recipients(tokens),
                                           options: RouterSendOptions(idempotencyKey: burst.key, deadline: .seconds(150)))

        // Exactly one outcome per token, in order, all delivered with their stable apns-id.
        #expect(report.outcomes.count == count)
        #expect(report.outcomes.map(\.token) == tokens.map(\.token))
        #expect(report.delivered == count)
        let retried = report.outcomes.filter { $0.attempts > 1 }.count
        #expect(retried > count / 20, "the 10% fault rate should force retries, saw \(retried)")

        // The emulator's view: one 200 per token, every attempt of a token carrying the same apns-id.
        var answers: [String: (ok: Int, ids: Set<String>, attempts: Int)] = [:]
        var unanswered = 0
        for record in emulator.requests {
            guard let token = record.deviceToken else { continue }
            var entry = answers[token] ?? (0, [], 0)
            if record.status == 200 { entry.ok += 1 }
            if record.status == 0 { unanswered += 1 }
            if let id = record.apnsID { entry.ids.insert(id) }
            entry.attempts += 1
            answers[token] = entry
        }
        #expect(answers.count == count)
        #expect(unanswered == 0)
        let notOnce = answers.filter { $0.value.ok != 1 }
        #expect(notOnce.isEmpty, "tokens not answered 200 exactly once: \(notOnce.count)")
        for token in notOnce.keys.sorted().prefix(3) {
            // What each side saw, for diagnosis: the emulator's attempts (connection, stream, status) and the outcome.
            let seen = emulator.requests.filter { $0.deviceToken == token }
                .map { "conn \($0.connectionID) stream \($0.streamID) status \($0.status)" }
            let outcome = report.outcomes.first { $0.token == token }
            Issue.record("token \(token.suffix(8)): emulator saw \(seen); outcome \(outcome.map { "\($0.result.kind) after \($0.attempts)" } ?? "none")")
        }
        let mixedIDs = answers.filter { $0.value.ids.count != 1 }
        #expect(mixedIDs.isEmpty, "tokens whose attempts carried different apns-ids: \(mixedIDs.count)")
        for outcome in report.outcomes.prefix(50) {
            let token = try #require(outcome.token)
            if let key = burst.key {
                #expect(answers[token]?.ids == [RequestID.make(idempotencyKey: key, token: token)])
            }
            #expect(outcome.deliveredMessageID.map { [$0] } == answers[token]?.ids)
            #expect(answers[token]?.attempts == outcome.attempts)
        }
        let faulted = emulator.requests.filter { $0.status == 503 }.count
        #expect(faulted > count / 20)
        #expect(emulator.connectionCount >= 4, "GOAWAYs should have forced new connections")
        await router.shutdown(gracePeriod: .seconds(1))
        try? await emulator.shutdown()
    }

    @Test("graceful shutdown: sends in flight complete, new sends fail with provider/shut-down")
    func gracefulShutdownWithRequestsInFlight() async throws {
        let emulator = try await EmulatorFixtures.emulator([Self.teamA])
        let provider = try EmulatorFixtures.provider("apns", Self.teamA, sandbox: emulator)
        let router = try NotificationRouter(providers: [provider], clock: EmulatorFixtures.noWait,
                                            shutdownGracePeriod: .seconds(10))
        // Warm the connection (token auth opens with one stream until the first 200).
        #expect(try await router.send(content: PushContent(title: "warm"), to: recipients([ios(Self.token(0))])).allDelivered)
        emulator.setFaults(.init(latency: .milliseconds(600)))

        // The send has begun (sendStreaming registers it before returning); its requests wait 600 ms.
        let tokens = (1...30).map { ios(Self.token($0)) }
        let stream = try router.sendStreaming(content: PushContent(title: "in flight"), to: recipients(tokens))
        let collected = Task {
            var outcomes: [PushOutcome] = []
            for await outcome in stream { outcomes.append(outcome) }
            return outcomes
        }
        try await Task.sleep(for: .milliseconds(150))
        let clock = ContinuousClock()
        let started = clock.now
        async let shutdown: Void = router.shutdown()
        while !router.isShuttingDown { await Task.yield() }

        // New sends are refused while the old one drains.
        do {
            _ = try await router.send(content: PushContent(title: "late"), to: recipients([ios(Self.token(99))]))
            Issue.record("a send after shutdown began must throw")
        } catch {
            #expect(error.code == .providerShutDown)
        }
        #expect(throws: NorqError.self) {
            _ = try router.sendStreaming(content: PushContent(title: "late"), to: recipients([ios(Self.token(98))]))
        }

        await shutdown
        let elapsed = started.duration(to: clock.now)
        let outcomes = await collected.value
        #expect(outcomes.count == 30)
        #expect(outcomes.allSatisfy { $0.result.kind == "delivered" }, "\(outcomes.map(\.result.kind))")
        #expect(elapsed < .seconds(5))
        let answered = emulator.requests.filter { $0.status == 200 }.compactMap(\.deviceToken)
        #expect(Set(answered) == Set([Self.token(0)] + tokens.map(\.token)))
        #expect(!answered.contains(Self.token(99)) && !answered.contains(Self.token(98)))

        // The provider itself is shut down too.
        do {
            let request = try provider.prepare(PushContent(title: "x"), for: ios(Self.token(97)), options: SendOptions())
            _ = try await provider.deliver(request, deadline: .now + .seconds(2))
            Issue.record("the provider must refuse requests after the router shut down")
        } catch {
            #expect(error.code == .providerShutDown)
        }
        try? await emulator.shutdown()
    }

    @Test("the invalid-token hook fires for Unregistered, ExpiredToken and BadDeviceToken only")
    func invalidTokenHookOnlyForThreeReasons() async throws {
        let unregistered = Self.token(1), expired = Self.token(2), bad = Self.token(3)
        let providerToken = Self.token(4), badTopic = Self.token(5), notForTopic = Self.token(6)
        let tooLarge = Self.token(7), limited = Self.token(8), fine = Self.token(9)
        let emulator = try await EmulatorFixtures.emulator([Self.teamA], faults: .init(
            unregisteredTokens: [unregistered: 1_700_000_000_456], badTokens: [bad],
            failFirstAttempts: [
                expired: [.init(status: 410, reason: "ExpiredToken")],
                providerToken: [.init(status: 403, reason: "InvalidProviderToken")],
                badTopic: [.init(status: 400, reason: "BadTopic")],
                notForTopic: [.init(status: 400, reason: "DeviceTokenNotForTopic")],
                tooLarge: [.init(status: 413, reason: "PayloadTooLarge")],
                limited: [.init(status: 429, reason: "TooManyRequests", retryAfterSeconds: 1)],
            ]))
        let provider = try EmulatorFixtures.provider("apns", Self.teamA, sandbox: emulator)
        let events = InvalidTokenTests.Events()
        let router = try NotificationRouter(providers: [provider], clock: EmulatorFixtures.noWait, onInvalidToken: { event in
            events.list.withLock { $0.append(event) }
        })
        let all = [unregistered, expired, bad, providerToken, badTopic, notForTopic, tooLarge, limited, fine]
        let report = try await router.send(content: PushContent(title: "x"), to: recipients(all.map { ios($0) }))
        #expect(report.outcomes.map(\.failureCode) == [
            "Unregistered", "ExpiredToken", "BadDeviceToken", "InvalidProviderToken", "BadTopic",
            "DeviceTokenNotForTopic", "PayloadTooLarge", nil, nil,
        ])
        #expect(report.outcomes[7].attempts == 2 && report.outcomes[7].result.kind == "delivered")
        // No retry for 400/403/410/413.
        #expect(report.outcomes.prefix(7).allSatisfy { $0.attempts == 1 })

        let byToken = Dictionary(events.all.map { ($0.token.token, $0) }, uniquingKeysWith: { first, _ in first })
        #expect(events.all.count == 3)
        #expect(Set(byToken.keys) == [unregistered, expired, bad])
        #expect(byToken[unregistered]?.reason == "Unregistered" && byToken[unregistered]?.invalidSince == 1_700_000_000_456)
        #expect(byToken[expired]?.reason == "ExpiredToken")
        #expect(byToken[bad]?.reason == "BadDeviceToken" && byToken[bad]?.hint != nil)
        #expect(events.all.allSatisfy { $0.provider == "apns" && $0.recipientID == "u1" })
        await router.shutdown(gracePeriod: .seconds(1))

        // The async stream saw the same three and finished at shutdown.
        var streamed: [String] = []
        for await event in router.invalidTokens { streamed.append(event.reason) }
        #expect(streamed.sorted() == ["BadDeviceToken", "ExpiredToken", "Unregistered"])
        try? await emulator.shutdown()
    }
}
