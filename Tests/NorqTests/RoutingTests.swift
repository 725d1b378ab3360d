import Norq
import NorqCore
import Testing

@Suite("Routing")
struct RoutingTests {
    func router(_ providers: [FakeProvider], defaultProvider: String? = nil,
                byPlatform: [Platform: String] = [:]) throws -> NotificationRouter {
        try NotificationRouter(providers: providers, defaultProvider: defaultProvider, byPlatform: byPlatform,
                               clock: SleepRecorder().clock)
    }

    @Test("first match wins: token.provider, push.<platform>, push, the only provider")
    func routingSteps() throws {
        let a = FakeProvider(name: "apns-a", platforms: [.ios])
        let b = FakeProvider(name: "apns-b", platforms: [.ios])
        let fcm = FakeProvider(name: "fcm", platforms: [.android])
        let content = PushContent(title: "t")

        let byPlatform = try router([a, b, fcm], defaultProvider: "apns-a", byPlatform: [.ios: "apns-b"])
        let plans = byPlatform.prepare(content: content, to: recipients([
            ios("t1", provider: "apns-a"), ios("t2"), PushToken(token: "f1", platform: .android),
        ]))
        #expect(plans.map(\.provider) == ["apns-a", "apns-b", "fcm"])
        #expect(plans.map(\.routing) == ["token.provider", "routing push.ios", "the only android provider"])

        let byDefault = try router([a, b, fcm], defaultProvider: "apns-a")
        let second = byDefault.prepare(content: content, to: recipients([ios("t2")]))
        #expect(second.map(\.provider) == ["apns-a"])
        #expect(second.map(\.routing) == ["routing push"])
    }

    @Test("no provider: the token is skipped with routing/no-provider")
    func noProvider() async throws {
        let a = FakeProvider(name: "apns-a")
        let b = FakeProvider(name: "apns-b")
        let r = try router([a, b])
        let report = try await r.send(content: PushContent(title: "t"), to: recipients([
            ios("t1"), PushToken(token: "w1", platform: .web, keys: WebPushKeys(p256dh: "p", auth: "a")),
        ]))
        #expect(report.skipped == 2)
        for outcome in report.outcomes {
            guard case .skipped(let skipped) = outcome.result else { Issue.record("not skipped"); continue }
            #expect(skipped.code == .noProvider)
        }
        #expect(a.requestCount == 0 && b.requestCount == 0)
    }

    @Test("a token naming an unknown provider is rejected with routing/unknown-provider")
    func unknownProvider() async throws {
        let r = try router([FakeProvider(name: "apns")])
        let report = try await r.send(content: PushContent(title: "t"), to: recipients([ios("t1", provider: "nope")]))
        guard case .rejected(let rejected) = report.outcomes.first?.result else {
            Issue.record("expected a rejection")
            return
        }
        #expect(rejected.code == .unknownProvider)
    }

    @Test("a token naming a provider that does not serve its platform is rejected")
    func platformNotSupported() async throws {
        let r = try router([FakeProvider(name: "apns"), FakeProvider(name: "fcm", platforms: [.android])])
        let report = try await r.send(content: PushContent(title: "t"), to: recipients([ios("t1", provider: "fcm")]))
        guard case .rejected(let rejected) = report.outcomes.first?.result else {
            Issue.record("expected a rejection")
            return
        }
        #expect(rejected.code == .platformNotSupported)
        #expect(report.outcomes.first?.provider == "fcm")
    }

    @Test("the routing table is validated at construction")
    func tableValidation() {
        let apns = FakeProvider(name: "apns")
        #expect(throws: NorqError.self) { try router([apns], defaultProvider: "missing") }
        do {
            _ = try router([apns], byPlatform: [.ios: "missing"])
            Issue.record("expected an error")
        } catch let error as NorqError {
            #expect(error.code == .unknownProvider)
        } catch { Issue.record("\(error)") }
        do {
            _ = try router([apns], byPlatform: [.android: "apns"])
            Issue.record("expected an error")
        } catch let error as NorqError {
            #expect(error.code == .platformNotSupported)
        } catch { Issue.record("\(error)") }
        do {
            _ = try router([apns, FakeProvider(name: "apns")])
            Issue.record("expected an error")
        } catch let error as NorqError {
            #expect(error.code == .duplicateProvider)
        } catch { Issue.record("\(error)") }
    }

    @Test("channels route like tokens and use prepare(forChannel:)")
    func channels() async throws {
        let broadcast = FakeProvider(name: "apns-live", supportsChannels: true)
        let plain = FakeProvider(name: "apns")
        let r = try router([plain, broadcast], defaultProvider: "apns")
        let to = [Recipient(id: "c", tokens: [], channels: [
            ChannelRecipient(channel: "Y2hhbm5lbA==", provider: "apns-live"),
            ChannelRecipient(channel: "b3RoZXI="),
        ])]
        let report = try await r.send(content: PushContent(title: "t"), to: to)
        #expect(report.outcomes.count == 2)
        #expect(report.outcomes[0].result.kind == "delivered")
        #expect(broadcast.requests.first?.path == "/channel/Y2hhbm5lbA==")
        guard case .failed(let error) = report.outcomes[1].result else {
            Issue.record("expected failure")
            return
        }
        #expect(error.code == .broadcastUnsupported)
        #expect(plain.requestCount == 0)
    }

    @Test("a channel routes by its own platform, else its provider, routing push or the only provider")
    func channelPlatforms() async throws {
        let apns = FakeProvider(name: "apns", platforms: [.ios], supportsChannels: true)
        let fcm = FakeProvider(name: "fcm", platforms: [.ios, .android, .web], supportsChannels: true)
        let r = try router([apns, fcm], defaultProvider: "apns", byPlatform: [.android: "fcm"])
        let to = [Recipient(id: "c", tokens: [], channels: [
            ChannelRecipient(channel: "news", platform: .android),
            ChannelRecipient(channel: "Y2hhbm5lbA=="),
            ChannelRecipient(channel: "sports", provider: "fcm"),
            ChannelRecipient(channel: "weather", provider: "apns", platform: .android),
        ])]
        let plans = r.prepare(content: PushContent(title: "t"), to: to)
        #expect(plans.map(\.provider) == ["fcm", "apns", "fcm", "apns"])
        #expect(plans.map(\.routing) == ["routing push.android", "routing push", "channel.provider",
                                         "token.provider apns (does not serve android)"])
        let report = try await r.send(content: PushContent(title: "t"), to: to)
        #expect(report.outcomes.map(\.result.kind) == ["delivered", "delivered", "delivered", "rejected"])
        // Sorted: the fake provider delivers each request in a task of its own, so they arrive in any order.
        #expect(fcm.requests.map(\.path).sorted() == ["/channel/news", "/channel/sports"])
        // Two providers, no routing push and no platform: nothing to choose by.
        let ambiguous = try router([apns, fcm])
        let skipped = ambiguous.prepare(content: PushContent(title: "t"), to: [Recipient(tokens: [], channels: [
            ChannelRecipient(channel: "Y2hhbm5lbA=="),
        ])])
        guard case .noRequest(.skipped(let skip)) = skipped.first?.plan else {
            Issue.record("expected a skip: \(String(describing: skipped.first?.plan))")
            return
        }
        #expect(skip.code == .noProvider)
    }

    @Test("a recipient's channel may name its platform in JSON")
    func channelPlatformJSON() throws {
        let json = try JSONValue(parsing: #"{"push": {"channels": [{"channel": "news", "platform": "android"}]}}"#)
        #expect(try Recipient(json: json).channels.first?.platform == .android)
        let bad = try JSONValue(parsing: #"{"push": {"channels": [{"channel": "news", "platform": "tv"}]}}"#)
        do {
            _ = try Recipient(json: bad)
            Issue.record("a channel platform tv was accepted")
        } catch {
            #expect(error.code == .invalidRecipient)
        }
    }
}

@Suite("Routing once per target")
struct RoutingOnceTests {
    @Test("targets naming their provider, going by platform, or naming an unknown one each reach one provider (or their routing outcome) once, in position order")
    func mixedTargetsAcrossProviders() async throws {
        let a = FakeProvider(name: "apns-a", platforms: [.ios])
        let b = FakeProvider(name: "apns-b", platforms: [.ios])
        let fcm = FakeProvider(name: "fcm", platforms: [.android])
        let router = try NotificationRouter(providers: [a, b, fcm], byPlatform: [.ios: "apns-a"],
                                            clock: SleepRecorder().clock)
        let tokens = [
            ios("t0", provider: "apns-b"), ios("t1"), PushToken(token: "f2", platform: .android),
            ios("t3", provider: "nope"), ios("t4", provider: "fcm"), ios("t5", provider: "apns-a"), ios("t6"),
        ]
        let report = try await router.send(content: PushContent(title: "t"), to: [
            Recipient(id: "u1", tokens: Array(tokens[0..<4])), Recipient(id: "u2", tokens: Array(tokens[4...])),
        ])
        #expect(report.outcomes.map(\.target) == tokens.map(DeliveryTarget.token))
        #expect(report.outcomes.map(\.provider) == ["apns-b", "apns-a", "fcm", nil, "fcm", "apns-a", "apns-a"])
        #expect(report.outcomes.map(\.recipientID) == ["u1", "u1", "u1", "u1", "u2", "u2", "u2"])
        guard case .rejected(let unknown) = report.outcomes[3].result,
              case .rejected(let notServed) = report.outcomes[4].result else {
            Issue.record("t3 and t4 were not rejected by routing: \(report.outcomes)")
            return
        }
        #expect(unknown.code == .unknownProvider && notServed.code == .platformNotSupported)
        #expect([0, 1, 2, 5, 6].allSatisfy { report.outcomes[$0].result.kind == "delivered" })
        func sent(_ provider: FakeProvider) -> [String] {
            provider.requests.compactMap { if case .token(let token) = $0.target { token.token } else { nil } }
        }
        #expect(sent(a).sorted() == ["t1", "t5", "t6"])
        #expect(sent(b) == ["t0"])
        #expect(sent(fcm) == ["f2"])
    }
}
