import Logging
import Norq
import NorqCore
import NorqTesting
import Synchronization
import Testing
@testable import NorqWebPush

/// The provider against the push-service emulator over real TLS HTTP/2 on 127.0.0.1: the emulator decrypts every
/// body with its own RFC 8291 code and verifies the VAPID token.
@Suite(.serialized, .timeLimit(.minutes(1))) struct WebPushEndToEndTests {
    static let keys = VAPIDKeyPair.generate()

    static func configuration(_ emulator: WebPushEmulator, allowPrivate: Bool = true) -> WebPushConfiguration {
        WebPushConfiguration(vapidKeys: keys, subject: "mailto:ops@example.com", allowPrivateEndpoints: allowPrivate,
                             additionalTrustRootsPEM: emulator.caCertificatePEM, caPath: "(emulator)",
                             requestTimeout: .seconds(5))
    }

    static func token(_ subscription: WebPushEmulator.Subscription) -> PushToken {
        PushToken(token: subscription.endpoint, platform: .web,
                  keys: WebPushKeys(p256dh: subscription.p256dh, auth: subscription.auth))
    }

    static func withEmulator(_ configuration: WebPushEmulator.Configuration = .init(),
                             _ body: (WebPushEmulator) async throws -> Void) async throws {
        let emulator = try WebPushEmulator(configuration: configuration)
        try await emulator.start()
        do {
            try await body(emulator)
        } catch {
            try? await emulator.shutdown()
            throw error
        }
        try await emulator.shutdown()
    }

    @Test func deliversAndTheEmulatorDecryptsEachBody() async throws {
        try await Self.withEmulator { emulator in
            let provider = try WebPushProvider(name: "webpush", configuration: Self.configuration(emulator))
            let subscriptions = (0..<20).map { _ in emulator.subscribe(applicationServerKey: Self.keys.publicKeyBase64URL) }
            var content = PushContent(title: "Order 42 shipped", body: "On its way", actionURL: "https://example.com/t/42")
            content.headers.collapseID = "order-42"
            content.headers.priority = 10
            content.data = ["orderId": "42"]
            let expected = String(decoding: WebPushPayload.encode(content), as: UTF8.self)
            let sent = content
            try await withThrowingTaskGroup(of: DeliveryResponse.self) { group in
                for subscription in subscriptions {
                    group.addTask {
                        let request = try provider.prepare(sent, for: Self.token(subscription), options: SendOptions())
                        return try await provider.deliver(request, deadline: .now + .seconds(10))
                    }
                }
                for try await response in group {
                    #expect(response.status == 201)
                    #expect(response.classification == .delivered)
                    #expect(response.messageID?.hasPrefix(emulator.origin + "/message/") == true)
                }
            }
            for subscription in subscriptions {
                let messages = emulator.messages(for: subscription.id)
                #expect(messages.count == 1)
                #expect(messages.first?.plaintextString == expected)
                #expect(messages.first?.topic == "order-42")
                #expect(messages.first?.urgency == "high")
                #expect(messages.first?.vapidAudience == emulator.origin)
                #expect(messages.first?.vapidSubject == "mailto:ops@example.com")
                #expect(messages.first?.httpVersion == "HTTP/2")
            }
            #expect(emulator.connectionCount == 1)  // HTTP/2: one connection multiplexes all 20
            await provider.shutdown()
        }
    }

    @Test func routerSendInvalidTokenEventsAndVAPIDMismatch() async throws {
        try await Self.withEmulator { emulator in
            let provider = try WebPushProvider(name: "webpush", configuration: Self.configuration(emulator))
            let events = Mutex<[InvalidTokenEvent]>([])
            let router = try NotificationRouter(providers: [provider], onInvalidToken: { event in
                events.withLock { $0.append(event) }
            })
            let good = emulator.subscribe()
            let gone = emulator.subscribe()
            emulator.unsubscribe(gone.id)
            let otherKey = emulator.subscribe(applicationServerKey: VAPIDKeyPair.generate().publicKeyBase64URL)
            var unknown = good
            unknown.id = "nope"
            unknown.endpoint = emulator.origin + "/push/nope"
            let report = try await router.send(
                content: PushContent(title: "Hello", body: "web"),
                to: [Recipient(tokens: [Self.token(good), Self.token(gone), Self.token(otherKey), Self.token(unknown)])])
            #expect(report.outcomes.count == 4)
            guard case .delivered? = report.outcomes.first(where: { $0.target == .token(Self.token(good)) })?.result else {
                Issue.record("good subscription not delivered: \(report.outcomes)")
                return
            }
            func rejected(_ s: WebPushEmulator.Subscription) -> PushOutcome.Rejected? {
                if case .rejected(let r)? = report.outcomes.first(where: { $0.target == .token(Self.token(s)) })?.result { return r }
                return nil
            }
            #expect(rejected(gone)?.status == 410)
            #expect(rejected(gone)?.classification == .tokenInvalid)
            #expect(rejected(unknown)?.status == 404)
            #expect(rejected(otherKey)?.status == 403)
            #expect(rejected(otherKey)?.classification == .credentials)
            #expect(rejected(otherKey)?.reason?.contains("applicationServerKey") == true)
            let reported = events.withLock { $0 }
            #expect(Set(reported.map(\.token.token)) == [gone.endpoint, unknown.endpoint])
            #expect(Set(reported.map(\.reason)) == ["Gone", "NotFound"])
            #expect(emulator.messages(for: good.id).first?.plaintextString == #"{"title":"Hello","body":"web"}"#)
            await router.shutdown()
            await provider.shutdown()
        }
    }

    @Test func faultsRetriedAndPermanent() async throws {
        try await Self.withEmulator { emulator in
            let provider = try WebPushProvider(name: "webpush", configuration: Self.configuration(emulator),
                                               policy: DeliveryPolicy(retry: RetryPolicy(retries: 3, backoff: .milliseconds(5))))
            let router = try NotificationRouter(providers: [provider])
            let retried = emulator.subscribe()
            let tooLarge = emulator.subscribe()
            emulator.setFaults(.init(failFirstAttempts: [
                retried.id: [.init(status: 429, retryAfterSeconds: 0), .init(status: 503)],
                tooLarge.id: [.init(status: 413, body: #"{"errno":104,"message":"Payload too large"}"#)],
            ]))
            let report = try await router.send(content: PushContent(title: "x"),
                                               to: [Recipient(tokens: [Self.token(retried), Self.token(tooLarge)])])
            #expect(report.outcomes.first { $0.target == .token(Self.token(retried)) }?.attempts == 3)
            #expect(report.delivered == 1)
            guard case .rejected(let r)? = report.outcomes.first(where: { $0.target == .token(Self.token(tooLarge)) })?.result else {
                Issue.record("413 not rejected")
                return
            }
            #expect(r.status == 413)
            #expect(r.classification == .permanent)
            #expect(r.reason == "Payload too large")
            await router.shutdown()
            await provider.shutdown()
        }
    }

    @Test func guardRefusesLoopbackBeforeConnecting() async throws {
        try await Self.withEmulator(.init(endpointHost: "localhost")) { emulator in
            // Default guard: `localhost` resolves to loopback, refused on the resolved address; no connection made.
            let provider = try WebPushProvider(name: "webpush", configuration: Self.configuration(emulator, allowPrivate: false))
            let subscription = emulator.subscribe()
            let request = try provider.prepare(PushContent(title: "x"), for: Self.token(subscription), options: SendOptions())
            do throws(NorqError) {
                _ = try await provider.deliver(request, deadline: .now + .seconds(5))
                Issue.record("delivered to loopback")
            } catch {
                #expect(error.code == .webPushEndpointNotAllowed)
                #expect(error.possiblyProcessed == false)
            }
            // An IP literal is refused at prepare.
            let literal = emulator.subscribe()
            let literalToken = PushToken(token: literal.endpoint.replacingOccurrences(of: "localhost", with: "127.0.0.1"),
                                         platform: .web, keys: WebPushKeys(p256dh: literal.p256dh, auth: literal.auth))
            #expect(throws: NorqError.self) { try provider.prepare(PushContent(title: "x"), for: literalToken, options: SendOptions()) }
            #expect(emulator.connectionCount == 0)
            #expect(emulator.messages.isEmpty)
            await provider.shutdown()
            // With allowPrivateEndpoints the same subscription is delivered.
            let open = try WebPushProvider(name: "webpush", configuration: Self.configuration(emulator))
            let delivered = try await open.deliver(
                try open.prepare(PushContent(title: "x"), for: Self.token(subscription), options: SendOptions()),
                deadline: .now + .seconds(5))
            #expect(delivered.status == 201)
            await open.shutdown()
        }
    }

    @Test func goAwayLosesNothing() async throws {
        try await Self.withEmulator(.init(faults: .init(goAwayAfterStreams: 10))) { emulator in
            let provider = try WebPushProvider(name: "webpush", configuration: Self.configuration(emulator),
                                               policy: DeliveryPolicy(retry: RetryPolicy(retries: 10, backoff: .milliseconds(5))))
            let router = try NotificationRouter(providers: [provider])
            let subscriptions = (0..<30).map { _ in emulator.subscribe() }
            let report = try await router.send(content: PushContent(title: "x"),
                                               to: [Recipient(tokens: subscriptions.map(Self.token))])
            #expect(report.outcomes.count == 30)
            #expect(report.delivered == 30, "\(report.outcomes.filter { $0.result.kind != "delivered" })")
            for subscription in subscriptions {
                #expect(emulator.messages(for: subscription.id).filter { $0.status == 201 }.count == 1)
            }
            #expect(emulator.connectionCount > 1)
            await router.shutdown()
            await provider.shutdown()
        }
    }

    /// A push service that speaks HTTP/1.1 only: the HTTP/2 attempt fails before reaching it and the provider
    /// falls back to HTTP/1.1 (then goes there directly).
    @Test func fallsBackToHTTP1ForAnHTTP1OnlyService() async throws {
        try await Self.withEmulator(.init(httpVersion: .http1)) { emulator in
            let provider = try WebPushProvider(name: "webpush", configuration: Self.configuration(emulator))
            for _ in 0..<3 {
                let subscription = emulator.subscribe()
                let response = try await provider.deliver(
                    try provider.prepare(PushContent(title: "h1"), for: Self.token(subscription), options: SendOptions()),
                    deadline: .now + .seconds(10))
                #expect(response.status == 201)
                #expect(emulator.messages(for: subscription.id).first?.plaintextString == #"{"title":"h1"}"#)
                #expect(emulator.messages(for: subscription.id).first?.httpVersion == "HTTP/1.1")
            }
            await provider.shutdown()
        }
    }
}
