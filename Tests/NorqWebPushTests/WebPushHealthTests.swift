import NorqCore
import NorqTesting
import Testing
@testable import NorqWebPush

/// Readiness of the Web Push provider: not ready only when every push-service origin tried lately could not be
/// reached (this process looks cut off), ready as soon as any origin answers.
@Suite struct WebPushOriginHealthTests {
    @Test func notReadyOnlyWhenEveryRememberedOriginIsUnreachable() {
        var health = WebPushOriginHealth(capacity: 3)
        #expect(health.allUnreachable == nil, "nothing tried yet: ready")
        health.unreachable("https://a.example", reason: "connection refused")
        #expect(health.allUnreachable == nil, "one subscriber's origin says nothing about this instance")
        health.unreachable("https://z.example", reason: "connection refused")
        #expect(health.allUnreachable == .init(origins: 2, lastOrigin: "https://z.example", reason: "connection refused"))
        health.answered("https://b.example")
        #expect(health.allUnreachable == nil, "one origin answers: ready")
        health.unreachable("https://b.example", reason: "timed out")
        #expect(health.allUnreachable == .init(origins: 3, lastOrigin: "https://b.example", reason: "timed out"))
        health.answered("https://a.example")
        #expect(health.allUnreachable == nil, "an origin that answers again")
        #expect(health.isReachable("https://a.example") && !health.isReachable("https://b.example"))
    }

    @Test func rememberedOriginsAreBounded() {
        var health = WebPushOriginHealth(capacity: 2)
        health.answered("https://a.example")
        health.unreachable("https://b.example", reason: "refused")
        // A third origin replaces the least recently seen (a): only unreachable ones are left.
        health.unreachable("https://c.example", reason: "refused")
        #expect(!health.isReachable("https://a.example"))
        #expect(health.allUnreachable == .init(origins: 2, lastOrigin: "https://c.example", reason: "refused"))
        health.answered("https://d.example")  // replaces b
        #expect(health.allUnreachable == nil)
        health.unreachable("https://d.example", reason: "refused")
        #expect(health.allUnreachable?.origins == 2)
    }
}

/// The provider against the push-service emulator over real TLS: push services that are gone make it not ready
/// while they are all it tried (two or more; one alone is a subscriber's problem), a live one makes it ready, and a dead origin among live ones does not count.
@Suite(.serialized, .timeLimit(.minutes(1))) struct WebPushHealthTests {
    @Test func readinessFollowsWhetherAnyPushServiceCanBeReached() async throws {
        // A push service that has gone away: its subscriptions point at a port nothing listens on.
        let gone = try WebPushEmulator(configuration: .init())
        try await gone.start()
        let goneSubscription = gone.subscribe()
        let goneOrigin = gone.origin
        try await gone.shutdown()

        try await WebPushEndToEndTests.withEmulator { emulator in
            var configuration = WebPushEndToEndTests.configuration(emulator)
            configuration.requestTimeout = .seconds(3)  // bounds the wait for a connection to the dead origin
            let provider = try WebPushProvider(name: "webpush", configuration: configuration)
            #expect(provider.health().isReady, "nothing sent yet")

            func send(_ subscription: WebPushEmulator.Subscription) async -> Result<DeliveryResponse, NorqError> {
                do throws(NorqError) {
                    let request = try provider.prepare(PushContent(title: "x"), for: WebPushEndToEndTests.token(subscription),
                                                       options: SendOptions())
                    return .success(try await provider.deliver(request, deadline: .now + .seconds(10)))
                } catch {
                    return .failure(error)
                }
            }

            let failed = await send(goneSubscription)
            guard case .failure(let error) = failed else {
                Issue.record("delivered to a push service that is gone")
                return
            }
            #expect(error.code == .transportFailed && !error.possiblyProcessed, "\(error)")
            #expect(provider.health().isReady, "one subscriber's dead push service does not make it unready")
            // A second push service that is gone too: every origin tried is unreachable.
            let gone2 = try WebPushEmulator(configuration: .init())
            try await gone2.start()
            let goneSubscription2 = gone2.subscribe()
            try await gone2.shutdown()
            _ = await send(goneSubscription2)
            _ = await send(goneSubscription)
            let down = provider.health()
            #expect(!down.isReady)
            #expect(down.detail?.contains("cannot connect to all 2 push services tried") == true, "\(down.detail ?? "")")
            #expect(down.detail?.contains(goneOrigin) == true, "names the origin: \(down.detail ?? "")")
            #expect(down.detail?.contains(goneSubscription.endpoint) == false, "never the subscription's endpoint")

            // A live push service answers: ready.
            let live = await send(emulator.subscribe())
            #expect((try? live.get())?.status == 201)
            #expect(provider.health().isReady)

            // The dead origin again: one dead origin among working ones is not a reason to be unready.
            _ = await send(goneSubscription)
            #expect(provider.health().isReady)
            await provider.shutdown()
        }
    }
}
