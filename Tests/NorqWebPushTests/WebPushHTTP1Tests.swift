import AsyncHTTPClient
import Logging
import NorqCore
import NorqTesting
import Testing
@testable import NorqWebPush

/// The HTTP/1.1 transport (AsyncHTTPClient with a pinned, guard-checked address) against the emulator's HTTP/1.1
/// mode over TLS on 127.0.0.1.
@Suite(.serialized, .timeLimit(.minutes(1))) struct WebPushHTTP1Tests {
    static let keys = VAPIDKeyPair.generate()

    static func provider(_ emulator: WebPushEmulator, allowPrivate: Bool = true) throws -> (WebPushProvider, WebPushHTTP1Transport) {
        let configuration = WebPushConfiguration(vapidKeys: keys, subject: "mailto:ops@example.com",
                                                 allowPrivateEndpoints: allowPrivate,
                                                 additionalTrustRootsPEM: emulator.caCertificatePEM, caPath: "(emulator)",
                                                 requestTimeout: .seconds(5))
        let guardValue = WebPushEndpointGuard(allowPrivateEndpoints: allowPrivate)
        let transport = try WebPushHTTP1Transport(configuration: configuration, endpointGuard: guardValue,
                                                  logger: Logger(label: "test"))
        let provider = WebPushProvider(name: "webpush", configuration: configuration, policy: DeliveryPolicy(),
                                       logger: Logger(label: "test"), clock: .system, transport: transport)
        return (provider, transport)
    }

    static func token(_ subscription: WebPushEmulator.Subscription) -> PushToken {
        PushToken(token: subscription.endpoint, platform: .web,
                  keys: WebPushKeys(p256dh: subscription.p256dh, auth: subscription.auth))
    }

    @Test func deliversOverHTTP1AndTheEmulatorDecrypts() async throws {
        let emulator = try WebPushEmulator(configuration: .init(endpointHost: "localhost", httpVersion: .http1))
        try await emulator.start()
        let (provider, _) = try Self.provider(emulator)
        let subscriptions = (0..<5).map { _ in emulator.subscribe(applicationServerKey: Self.keys.publicKeyBase64URL) }
        var content = PushContent(title: "Hello", body: "over HTTP/1.1")
        content.headers.collapseID = "a collapse id longer than thirty-two characters"
        for subscription in subscriptions {
            let request = try provider.prepare(content, for: Self.token(subscription), options: SendOptions())
            let response = try await provider.deliver(request, deadline: .now + .seconds(10))
            #expect(response.status == 201)
            #expect(response.classification == .delivered)
        }
        let gone = emulator.subscribe()
        emulator.unsubscribe(gone.id)
        let goneResponse = try await provider.deliver(
            try provider.prepare(content, for: Self.token(gone), options: SendOptions()), deadline: .now + .seconds(10))
        #expect(goneResponse.status == 410)
        #expect(goneResponse.classification == .tokenInvalid)
        for subscription in subscriptions {
            let message = emulator.messages(for: subscription.id).first
            #expect(message?.plaintextString == #"{"title":"Hello","body":"over HTTP/1.1"}"#)
            #expect(message?.httpVersion == "HTTP/1.1")
            #expect(message?.topic == WebPushHeaders.topic(collapseID: "a collapse id longer than thirty-two characters"))
            #expect(message?.vapidAudience == emulator.origin)
        }
        await provider.shutdown()
        try await emulator.shutdown()
    }

    /// `localhost` resolves to loopback: refused by the guard before any connection.
    @Test func guardRefusesAHostNameResolvingToLoopback() async throws {
        let emulator = try WebPushEmulator(configuration: .init(endpointHost: "localhost", httpVersion: .http1))
        try await emulator.start()
        let (provider, _) = try Self.provider(emulator, allowPrivate: false)
        let subscription = emulator.subscribe()
        let request = try provider.prepare(PushContent(title: "x"), for: Self.token(subscription), options: SendOptions())
        do {
            _ = try await provider.deliver(request, deadline: .now + .seconds(5))
            Issue.record("sent to loopback")
        } catch {
            #expect(error.code == .webPushEndpointNotAllowed)
            #expect(error.possiblyProcessed == false)
        }
        #expect(emulator.connectionCount == 0)
        await provider.shutdown()
        try await emulator.shutdown()
    }

    @Test func resolverAndFaults() async throws {
        #expect(WebPushResolver.resolveBlocking("localhost")?.allSatisfy { $0.classification == .loopback } == true)
        #expect(WebPushResolver.resolveBlocking("no-such-host.invalid") == nil)
        let emulator = try WebPushEmulator(configuration: .init(httpVersion: .http1))
        try await emulator.start()
        let (provider, _) = try Self.provider(emulator)
        let limited = emulator.subscribe()
        emulator.setFaults(.init(failFirstAttempts: [limited.id: [.init(status: 429, retryAfterSeconds: 3)]]))
        let request = try provider.prepare(PushContent(title: "x"), for: Self.token(limited), options: SendOptions())
        let first = try await provider.deliver(request, deadline: .now + .seconds(5))
        #expect(first.status == 429)
        #expect(first.retryAfter == .seconds(3))
        let second = try await provider.deliver(request, deadline: .now + .seconds(5))
        #expect(second.status == 201)
        await provider.shutdown()
        try await emulator.shutdown()
    }
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct WebPushHTTP1BoundsTests {
    /// At most `maxOrigins` live clients; a redirect is an answer, never followed.
    @Test func boundedOriginsAndNoRedirects() async throws {
        let emulators = try (0..<3).map { _ in try WebPushEmulator(configuration: .init(httpVersion: .http1)) }
        for emulator in emulators { try await emulator.start() }
        let keys = VAPIDKeyPair.generate()
        let configuration = WebPushConfiguration(
            vapidKeys: keys, subject: "mailto:ops@example.com", allowPrivateEndpoints: true,
            additionalTrustRootsPEM: emulators.map(\.caCertificatePEM).joined(separator: "\n"), maxOrigins: 2,
            requestTimeout: .seconds(5))
        let transport = try WebPushHTTP1Transport(configuration: configuration,
                                                  endpointGuard: WebPushEndpointGuard(allowPrivateEndpoints: true),
                                                  logger: Logger(label: "test"))
        let provider = WebPushProvider(name: "webpush", configuration: configuration, policy: DeliveryPolicy(),
                                       logger: Logger(label: "test"), clock: .system, transport: transport)
        for emulator in emulators {
            let subscription = emulator.subscribe()
            let token = PushToken(token: subscription.endpoint, platform: .web,
                                  keys: WebPushKeys(p256dh: subscription.p256dh, auth: subscription.auth))
            let response = try await provider.deliver(
                try provider.prepare(PushContent(title: "x"), for: token, options: SendOptions()), deadline: .now + .seconds(5))
            #expect(response.status == 201)
        }
        #expect(transport.clientCounts.live == 2)
        #expect(transport.clientCounts.retired == 1)
        let redirected = emulators[0].subscribe()
        emulators[0].setFaults(.init(failFirstAttempts: [redirected.id: [.init(status: 307)]]))
        let token = PushToken(token: redirected.endpoint, platform: .web,
                              keys: WebPushKeys(p256dh: redirected.p256dh, auth: redirected.auth))
        let response = try await provider.deliver(
            try provider.prepare(PushContent(title: "x"), for: token, options: SendOptions()), deadline: .now + .seconds(5))
        #expect(response.status == 307)
        #expect(response.classification == .permanent)
        #expect(emulators[0].messages(for: redirected.id).count == 1)
        await provider.shutdown()
        for emulator in emulators { try await emulator.shutdown() }
    }

    @Test func errorMappingKeepsWhetherItMayHaveBeenProcessed() {
        #expect(WebPushHTTP1Transport.norqError(HTTPClientError.connectTimeout, host: "h").possiblyProcessed == false)
        #expect(WebPushHTTP1Transport.norqError(HTTPClientError.deadlineExceeded, host: "h").possiblyProcessed == true)
        #expect(WebPushHTTP1Transport.norqError(HTTPClientError.deadlineExceeded, host: "h").code == .deadlineExceeded)
        #expect(WebPushHTTP1Transport.norqError(HTTPClientError.remoteConnectionClosed, host: "h").possiblyProcessed == true)
        #expect(WebPushHTTP1Transport.norqError(HTTPClientError.alreadyShutdown, host: "h").code == .providerShutDown)
    }
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct WebPushDropTests {
    /// A connection dropped under a written request: the attempt fails as possibly processed (never "unsent").
    @Test func droppedConnectionIsPossiblyProcessed() async throws {
        let emulator = try WebPushEmulator(configuration: .init(httpVersion: .http1,
                                                                faults: .init(dropConnectionAfterStreams: 1)))
        try await emulator.start()
        let (provider, _) = try WebPushHTTP1Tests.provider(emulator)
        let subscription = emulator.subscribe()
        let request = try provider.prepare(PushContent(title: "x"), for: WebPushHTTP1Tests.token(subscription),
                                           options: SendOptions())
        do throws(NorqError) {
            _ = try await provider.deliver(request, deadline: .now + .seconds(5))
            Issue.record("a dropped connection delivered")
        } catch {
            #expect(error.code == .transportFailed)
            #expect(error.possiblyProcessed)
        }
        #expect(emulator.messages(for: subscription.id).allSatisfy { $0.status != 201 })
        await provider.shutdown()
        try await emulator.shutdown()
    }
}
