import Foundation
import Norq
import NorqCore
@testable import NorqExpo
import NorqTesting
import Synchronization
import Testing

/// The Expo provider and the router against the Expo emulator, over TLS HTTP/2 on 127.0.0.1.
@Suite("Expo end to end", .serialized)
struct ExpoEndToEndTests {
    static func token(_ index: Int) -> String { "ExponentPushToken[e2e-\(index)]" }

    struct Setup {
        let emulator: ExpoEmulator
        let provider: ExpoProvider

        func router(onInvalidToken: (@Sendable (InvalidTokenEvent) -> Void)? = nil) throws -> NotificationRouter {
            try NotificationRouter(providers: [provider], byPlatform: [.ios: "expo", .android: "expo"],
                                   clock: RouterClock(sleep: { _ in await Task.yield() }, random: { 0.5 }),
                                   onInvalidToken: onInvalidToken)
        }

        func shutdown() async throws {
            await provider.shutdown()
            try await emulator.shutdown()
        }
    }

    static func setup(emulator configuration: ExpoEmulator.Configuration = .init(), accessToken: String? = nil,
                      rateLimit: Int = 600, gzip: Bool = true) async throws -> Setup {
        let emulator = try ExpoEmulator(configuration: configuration)
        try await emulator.start()
        var expo = ExpoConfiguration(accessToken: accessToken, endpoint: try #require(ExpoURL.parse(emulator.endpoint)),
                                     additionalTrustRootsPEM: emulator.caCertificatePEM, rateLimit: rateLimit,
                                     requestTimeout: .seconds(10))
        if !gzip { expo.gzipThreshold = nil }
        var policy = DeliveryPolicy()
        policy.retry.backoff = .milliseconds(1)
        return Setup(emulator: emulator, provider: try ExpoProvider(name: "expo", configuration: expo, policy: policy))
    }

    static func recipients(_ count: Int, platform: Platform = .ios) -> [Recipient] {
        (0..<count).map { Recipient(id: "u\($0)", tokens: [PushToken(token: token($0), platform: platform)]) }
    }

    @Test("250 tokens: requests of at most 100 recipients, one accepted outcome per token with its ticket id, gzip over 1 KiB")
    func batchesOfAHundred() async throws {
        let setup = try await Self.setup()
        let router = try setup.router()
        let report = try await router.send(content: PushContent(title: "Hello", body: "World"), to: Self.recipients(250))
        #expect(report.outcomes.count == 250)
        #expect(report.accepted == 250)
        let ids = Set(report.outcomes.compactMap { outcome -> String? in
            if case .delivered(let delivered) = outcome.result, delivered.accepted { return delivered.messageID }
            return nil
        })
        #expect(ids.count == 250)
        let sends = setup.emulator.sendRequests
        #expect(sends.allSatisfy { $0.detail.recipients.count <= 100 })
        #expect(sends.reduce(0) { $0 + $1.detail.recipients.count } == 250)
        #expect(sends.count >= 3)
        #expect(sends.count < 250)  // batched, not one request per token
        // Every recipient exactly once, and each request's body over 1 KiB went gzipped.
        #expect(Set(sends.flatMap(\.detail.recipients)) == Set((0..<250).map(Self.token)))
        for send in sends where send.detail.inflatedBody.count > 1024 {
            #expect(send.detail.gzipped)
            #expect(send.header("content-encoding") == "gzip")
        }
        #expect(sends.allSatisfy { $0.header("accept") == "application/json" && $0.header("authorization") == nil })
        try await setup.shutdown()
    }

    @Test("provider batch of 100 in one request; more than 100 is split; small bodies stay plain")
    func providerBatchBound() async throws {
        let setup = try await Self.setup()
        let content = PushContent(title: "Hi")
        let requests = try (0..<130).map {
            try setup.provider.prepare(content, for: PushToken(token: Self.token($0), platform: .android), options: SendOptions())
        }
        let results = await setup.provider.deliverBatch(requests, deadline: .now + .seconds(10))
        #expect(results.count == 130)
        #expect(results.allSatisfy { (try? $0.get().classification) == .accepted })
        #expect(setup.emulator.sendRequests.map(\.detail.recipients.count).sorted() == [30, 100])
        _ = await setup.provider.deliverBatch([requests[0]], deadline: .now + .seconds(10))
        let single = try #require(setup.emulator.sendRequests.last)
        #expect(!single.detail.gzipped)
        #expect(single.body.first == UInt8(ascii: "["))  // always an array
        try await setup.shutdown()
    }

    @Test("per-batch path: 130 shared targets go as requests of 100 and 30, one message each, every token accepted")
    func sharedBatchBound() async throws {
        let setup = try await Self.setup()
        let content = try #require(try setup.provider.prepareShared(PushContent(title: "Hi"), platform: .android,
                                                                     options: SendOptions()))
        let targets = (0..<130).map {
            SharedBatchTarget(token: PushToken(token: Self.token($0), platform: .android), content: content)
        }
        let results = await withCheckedContinuation { continuation in
            setup.provider.startSharedBatchDelivery(targets, deadline: .now + .seconds(10)) { continuation.resume(returning: $0) }
        }
        #expect(results.count == 130)
        #expect(results.allSatisfy { (try? $0.get().classification) == .accepted })
        let sends = setup.emulator.sendRequests
        #expect(sends.map(\.detail.recipients.count).sorted() == [30, 100])
        #expect(sends.flatMap(\.detail.recipients).sorted() == (0..<130).map(Self.token).sorted())
        // One message per request: its `to` lists the request's tokens.
        for send in sends {
            guard case .array(let messages) = try JSONValue(parsing: send.detail.inflatedBody) else {
                Issue.record("not an array")
                continue
            }
            #expect(messages.count == 1)
        }
        try await setup.shutdown()
    }

    @Test("per-batch path through the router: iOS and Android tokens of one send, a native token failing alone")
    func sharedBatchPlatforms() async throws {
        let setup = try await Self.setup()
        let router = try setup.router()
        var recipients = Self.recipients(60, platform: .ios) + (60..<120).map {
            Recipient(id: "u\($0)", tokens: [PushToken(token: Self.token($0), platform: .android)])
        }
        recipients.insert(Recipient(id: "native", tokens: [PushToken(token: String(repeating: "ab", count: 32), platform: .ios)]),
                          at: 10)
        var content = PushContent(title: "Hi")
        content.ios.badge = 3
        let report = try await router.send(content: content, to: recipients)
        #expect(report.outcomes.count == 121)
        #expect(report.accepted == 120)
        guard case .failed(let error) = report.outcomes[10].result else { Issue.record("\(report.outcomes[10].result)"); return }
        #expect(error.code == .expoInvalidToken)
        let sends = setup.emulator.sendRequests
        #expect(sends.allSatisfy { $0.detail.recipients.count <= 100 })
        #expect(sends.flatMap(\.detail.recipients).sorted() == (0..<120).map(Self.token).sorted())
        // iOS tokens got the badge, Android tokens did not.
        for send in sends {
            guard case .array(let messages) = try JSONValue(parsing: send.detail.inflatedBody) else { continue }
            for message in messages {
                guard case .array(let to)? = message["to"] else { Issue.record("`to` is not an array"); continue }
                let indexes = to.compactMap { $0.stringValue }.compactMap { token in (0..<120).first { Self.token($0) == token } }
                let badge = message["badge"]
                #expect(indexes.allSatisfy { $0 < 60 } == (badge != nil), "\(indexes)")
            }
        }
        try await setup.shutdown()
    }

    @Test("mixed projects: the refused request is split by project, every token accepted, and the projects remembered")
    func mixedProjects() async throws {
        var configuration = ExpoEmulator.Configuration()
        for index in 0..<10 where index % 2 == 1 { configuration.projects[Self.token(index)] = "@other/app" }
        let setup = try await Self.setup(emulator: configuration)
        let router = try setup.router()
        let report = try await router.send(content: PushContent(title: "Hi"), to: Self.recipients(10))
        #expect(report.accepted == 10)
        let refused = setup.emulator.requests.filter { $0.errorCode == "PUSH_TOO_MANY_EXPERIENCE_IDS" }
        #expect(refused.count >= 1)  // one per initial batch that mixed the projects (one, unless the send was split)
        // Every token of a refused request has its project remembered.
        for token in refused.flatMap(\.detail.recipients) {
            #expect(setup.provider.project(of: token) == configuration.projects[token] ?? "@norq/emulator", "\(token)")
        }
        #expect(refused.flatMap(\.detail.recipients).contains(Self.token(1)) || refused.isEmpty)
        // A second send groups by the remembered projects: no refusal this time.
        setup.emulator.resetRecords()
        let again = try await router.send(content: PushContent(title: "Again"), to: Self.recipients(10))
        #expect(again.accepted == 10)
        #expect(setup.emulator.requests.allSatisfy { $0.errorCode == nil })
        for send in setup.emulator.sendRequests {
            let projects = Set(send.detail.recipients.map { configuration.projects[$0] ?? "@norq/emulator" })
            #expect(projects.count == 1)
        }
        try await setup.shutdown()
    }

    @Test("a partial batch failure re-sends only the failed tokens")
    func partialRetry() async throws {
        var configuration = ExpoEmulator.Configuration()
        configuration.faults.failTokenTickets = [Self.token(3): ["MessageRateExceeded"], Self.token(7): ["ExpoError"]]
        let setup = try await Self.setup(emulator: configuration)
        let router = try setup.router()
        let report = try await router.send(content: PushContent(title: "Hi"), to: Self.recipients(20))
        #expect(report.accepted == 20)
        for (index, outcome) in report.outcomes.enumerated() {
            #expect(outcome.attempts == (index == 3 || index == 7 ? 2 : 1), "token \(index)")
        }
        // Each token was in as many requests as it has attempts: 3 and 7 twice, every other once.
        let sent = setup.emulator.sendRequests.flatMap(\.detail.recipients)
        #expect(sent.count == 22)
        for index in 0..<20 {
            #expect(sent.count { $0 == Self.token(index) } == (index == 3 || index == 7 ? 2 : 1), "token \(index)")
        }
        try await setup.shutdown()
    }

    @Test("DeviceNotRegistered ticket: rejected token-invalid, and the router's invalid-token event")
    func deviceNotRegistered() async throws {
        var configuration = ExpoEmulator.Configuration()
        configuration.faults.unregisteredTokens = [Self.token(1)]
        let setup = try await Self.setup(emulator: configuration)
        let events = Mutex<[InvalidTokenEvent]>([])
        let router = try setup.router(onInvalidToken: { event in events.withLock { $0.append(event) } })
        let report = try await router.send(content: PushContent(title: "Hi"), to: Self.recipients(3))
        #expect(report.accepted == 2)
        guard case .rejected(let rejected) = report.outcomes[1].result else {
            Issue.record("\(report.outcomes[1].result)"); return
        }
        #expect(rejected.code == .expoDeviceNotRegistered)
        #expect(rejected.classification == .tokenInvalid)
        #expect(rejected.reason == "DeviceNotRegistered")
        #expect(report.outcomes[1].attempts == 1)
        #expect(events.withLock { $0.map(\.token.token) } == [Self.token(1)])
        try await setup.shutdown()
    }

    @Test("every ticket error code reaches the outcome with its code", arguments: [
        ("MessageTooBig", NorqError.Code.expoMessageTooBig), ("InvalidCredentials", .expoInvalidCredentials),
        ("MismatchSenderId", .expoMismatchSenderID), ("DeveloperError", .expoDeveloperError), ("Strange", .expoUnknownError),
    ])
    func ticketErrorCodes(reason: String, code: NorqError.Code) async throws {
        var configuration = ExpoEmulator.Configuration()
        configuration.faults.ticketErrors = [Self.token(0): reason]
        let setup = try await Self.setup(emulator: configuration)
        let report = try await setup.router().send(content: PushContent(title: "Hi"), to: Self.recipients(1))
        guard case .rejected(let rejected) = report.outcomes[0].result else { Issue.record("\(report.outcomes[0].result)"); return }
        #expect(rejected.code == code)
        #expect(report.outcomes[0].attempts == 1)
        try await setup.shutdown()
    }

    @Test("auth: with enhanced security a missing token is expo/unauthorized; the right one is sent as a bearer token")
    func auth() async throws {
        let configuration = ExpoEmulator.Configuration(accessToken: "secret-access-token")
        let anonymous = try await Self.setup(emulator: configuration)
        let refused = try await anonymous.router().send(content: PushContent(title: "Hi"), to: Self.recipients(2))
        for outcome in refused.outcomes {
            guard case .rejected(let rejected) = outcome.result else { Issue.record("\(outcome.result)"); continue }
            #expect(rejected.code == .expoUnauthorized)
            #expect(rejected.classification == .credentials)
        }
        try await anonymous.shutdown()

        let authenticated = try await Self.setup(emulator: configuration, accessToken: "secret-access-token")
        let report = try await authenticated.router().send(content: PushContent(title: "Hi"), to: Self.recipients(2))
        #expect(report.accepted == 2)
        #expect(authenticated.emulator.sendRequests.first?.header("authorization") == "Bearer secret-access-token")
        // The dry-run form of the request never shows the token.
        let prepared = try authenticated.provider.prepare(PushContent(title: "Hi"), for: PushToken(token: Self.token(0), platform: .ios),
                                                          options: SendOptions())
        #expect(!prepared.redactions.values.joined().contains("secret-access-token"))
        try await authenticated.shutdown()
    }

    @Test("429 TOO_MANY_REQUESTS and a 504 gateway page are retried; the send ends accepted")
    func rateLimitedAndGateway() async throws {
        var configuration = ExpoEmulator.Configuration()
        configuration.faults.failNextRequests = [.tooManyRequests, .gatewayTimeout]
        let setup = try await Self.setup(emulator: configuration)
        let report = try await setup.router().send(content: PushContent(title: "Hi"), to: Self.recipients(5))
        #expect(report.accepted == 5)
        let requests = setup.emulator.requests
        #expect(requests.map(\.status).prefix(2) == [429, 504])
        // Every token was sent once per attempt, and only the tokens of the refused requests were sent again.
        for (index, outcome) in report.outcomes.enumerated() {
            let inRequests = requests.filter { $0.detail.recipients.contains(Self.token(index)) }
            #expect(outcome.attempts == inRequests.count, "token \(index)")
            #expect(inRequests.last?.status == 200)
        }
        #expect(report.outcomes.reduce(0) { $0 + $1.attempts } == requests.reduce(0) { $0 + $1.detail.recipients.count })
        #expect(report.outcomes.contains { $0.attempts >= 2 })
        try await setup.shutdown()
    }

    @Test("the provider's rate limit holds a project to its rate (requests spread over time)")
    func providerRateLimit() async throws {
        let setup = try await Self.setup(rateLimit: 100)
        let content = PushContent(title: "Hi")
        let requests = try (0..<150).map {
            try setup.provider.prepare(content, for: PushToken(token: Self.token($0), platform: .ios), options: SendOptions())
        }
        let started = ContinuousClock.now
        let results = await setup.provider.deliverBatch(requests, deadline: .now + .seconds(10))
        let elapsed = started.duration(to: .now)
        #expect(results.allSatisfy { (try? $0.get().classification) == .accepted })
        // 150 at 100/s with a one-second burst: the second request waits about half a second.
        #expect(elapsed >= .milliseconds(400))
        // A wait past the deadline is not sent at all.
        let late = await setup.provider.deliverBatch(Array(requests.prefix(100)), deadline: .now + .milliseconds(50))
        #expect(late.allSatisfy { if case .failure(let error) = $0 { error.code == .deadlineExceeded && error.notProcessed } else { false } })
        try await setup.shutdown()
    }

    @Test("receipts: pending until ready, then ok or DeviceNotRegistered; more than 1,000 ids are chunked")
    func receipts() async throws {
        var configuration = ExpoEmulator.Configuration()
        configuration.faults.receiptErrors = [Self.token(1): "DeviceNotRegistered"]
        configuration.faults.receiptLatency = .milliseconds(300)
        let setup = try await Self.setup(emulator: configuration)
        let report = try await setup.router().send(content: PushContent(title: "Hi"), to: Self.recipients(3))
        let ids = report.outcomes.compactMap { outcome -> String? in
            if case .delivered(let delivered) = outcome.result { return delivered.messageID }
            return nil
        }
        #expect(ids.count == 3)
        let early = try await setup.provider.fetchReceipts(ids, deadline: .now + .seconds(5))
        #expect(early.values.allSatisfy { $0 == .pending })
        try await Task.sleep(for: .milliseconds(400))
        let states = try await setup.provider.fetchReceipts(ids + (0..<1200).map { "unknown-\($0)" }, deadline: .now + .seconds(5))
        guard case .final(let ok)? = states[ids[0]], case .final(let gone)? = states[ids[1]] else {
            Issue.record("\(String(describing: states[ids[0]]))"); return
        }
        #expect(ok.classification == .delivered)
        #expect(gone.classification == .tokenInvalid)
        #expect(gone.code == .expoDeviceNotRegistered)
        #expect(ExpoResponseTable.receiptToken(gone) == Self.token(1))
        #expect(states["unknown-5"] == .pending)
        let receiptRequests = setup.emulator.requests.filter { $0.path.hasSuffix("getReceipts") }
        #expect(receiptRequests.count == 3)  // one early, then 1,203 ids in two requests
        #expect(receiptRequests.allSatisfy { $0.status == 200 })
        try await setup.shutdown()
    }

    @Test("waitForReceipts (norq send --wait-receipts): accepted outcomes become delivered or rejected by their receipts, DeviceNotRegistered raises the invalid-token event")
    func waitForReceipts() async throws {
        var configuration = ExpoEmulator.Configuration()
        configuration.faults.receiptErrors = [Self.token(2): "DeviceNotRegistered", Self.token(3): "MessageRateExceeded"]
        configuration.faults.receiptLatency = .milliseconds(150)
        let setup = try await Self.setup(emulator: configuration)
        let events = Mutex<[String]>([])
        let router = try NotificationRouter(providers: [setup.provider], byPlatform: [.ios: "expo"],
                                            onInvalidToken: { event in events.withLock { $0.append(event.token.token) } })
        let report = try await router.send(content: PushContent(title: "Hi"), to: Self.recipients(4))
        #expect(report.accepted == 4)
        let final = await router.waitForReceipts(report, timeout: .seconds(10), firstPoll: .milliseconds(50))
        #expect(final.accepted == 0)
        #expect(final.delivered == 2)
        guard case .rejected(let gone) = final.outcomes[2].result, case .rejected(let rate) = final.outcomes[3].result else {
            Issue.record("\(final.outcomes.map(\.result.kind))"); return
        }
        #expect(gone.code == .expoDeviceNotRegistered)
        #expect(gone.classification == .tokenInvalid)
        #expect(rate.code == .expoMessageRateExceeded)
        #expect(events.withLock { $0 } == [Self.token(2)])
        // A timeout shorter than the first poll leaves them accepted, without a request.
        setup.emulator.resetRecords()
        let unchanged = await router.waitForReceipts(report, timeout: .milliseconds(10), firstPoll: .milliseconds(50))
        #expect(unchanged.accepted == 4)
        #expect(setup.emulator.requests.isEmpty)
        try await setup.shutdown()
    }

    @Test("the emulator refuses more than 100 recipients (PUSH_TOO_MANY_NOTIFICATIONS): expo/too-many-notifications")
    func tooManyNotifications() async throws {
        let setup = try await Self.setup(gzip: false)
        let tokens = (0..<101).map { "\"\(Self.token($0))\"" }.joined(separator: ",")
        let request = PreparedRequest(method: "POST", authority: "expo", path: ExpoConfiguration.sendPath, headers: [],
                                      body: Array("[{\"to\":[\(tokens)],\"title\":\"Hi\"}]".utf8), provider: "expo",
                                      target: .token(PushToken(token: Self.token(0), platform: .ios)))
        let results = await setup.provider.deliverBatch([request], deadline: .now + .seconds(10))
        let response = try #require(try? results.first?.get())
        #expect(response.status == 400)
        #expect(response.code == .expoTooManyNotifications)
        #expect(response.classification == .permanent)
        try await setup.shutdown()
    }

    @Test("prepare refuses a message over 4,096 bytes (expo/payload-too-large) and a push.json that is not an object")
    func prepareRefusals() async throws {
        let setup = try await Self.setup()
        let token = PushToken(token: Self.token(0), platform: .android)
        do {
            _ = try setup.provider.prepare(PushContent(title: "Hi", data: ["blob": .string(String(repeating: "x", count: 5000))]),
                                           for: token, options: SendOptions())
            Issue.record("a 5 KB message was prepared")
        } catch {
            #expect(error.code == .expoPayloadTooLarge)
        }
        do {
            _ = try setup.provider.prepare(PushContent(nativePayload: [1, 2]), for: token, options: SendOptions())
            Issue.record("an array push.json was prepared")
        } catch {
            #expect(error.code == .expoInvalidMessage)
        }
        #expect(throws: NorqError.self) {
            try ExpoProviderType().makeProvider(name: "expo", configuration: WrongConfiguration(), policy: DeliveryPolicy(),
                                                context: ProviderContext())
        }
        do {
            _ = try ExpoProviderType().makeProvider(name: "expo", configuration: WrongConfiguration(), policy: DeliveryPolicy(),
                                                    context: ProviderContext())
        } catch {
            #expect(error.code == .expoWrongConfiguration)
        }
        try await setup.shutdown()
    }

    struct WrongConfiguration: ProviderConfiguration {
        var summary: [(key: String, value: String)] { [] }
    }

    @Test("a native token is refused before sending with expo/invalid-token")
    func invalidToken() async throws {
        let setup = try await Self.setup()
        let report = try await setup.router().send(
            content: PushContent(title: "Hi"),
            to: [Recipient(id: "u", tokens: [PushToken(token: String(repeating: "ab", count: 32), platform: .ios)])])
        guard case .failed(let error) = report.outcomes[0].result else { Issue.record("\(report.outcomes[0].result)"); return }
        #expect(error.code == .expoInvalidToken)
        #expect(setup.emulator.requests.isEmpty)
        try await setup.shutdown()
    }
}
