import Crypto
import Logging
import NorqCore
import NorqHTTP2
import Synchronization
import Testing
@testable import NorqWebPush

/// Answers every request with a scripted status (unit tests of the provider around the wire; the network path is
/// tested against the push-service emulator).
final class ScriptedTransport: WebPushTransport {
    let sent = Mutex<[WebPushWireRequest]>([])
    let status: Int
    init(status: Int = 201) { self.status = status }
    func start(_ request: WebPushWireRequest, deadline: ContinuousClock.Instant,
               completion: @escaping @Sendable (Result<HTTP2Response, NorqError>) -> Void) {
        sent.withLock { $0.append(request) }
        completion(.success(HTTP2Response(status: status, headers: [("location", "https://x/m/1")])))
    }
    func shutdown() async {}
}

/// A subscription as a browser makes one: the user agent's key pair and auth secret.
struct TestSubscriber {
    let privateKey = P256.KeyAgreement.PrivateKey()
    let auth: [UInt8] = (0..<16).map { _ in UInt8.random(in: 0...255) }
    func token(_ endpoint: String) -> PushToken {
        PushToken(token: endpoint, platform: .web,
                  keys: WebPushKeys(p256dh: Base64URL.encode(Array(privateKey.publicKey.x963Representation)),
                                    auth: Base64URL.encode(auth)))
    }
}

@Suite struct WebPushPrepareTests {
    static let keys = VAPIDKeyPair.generate()
    static func provider(allowedHosts: [String]? = nil, now: Int64 = 1_700_000_000,
                         transport: ScriptedTransport = ScriptedTransport()) -> WebPushProvider {
        let configuration = WebPushConfiguration(vapidKeys: keys, subject: "mailto:ops@example.com", allowedHosts: allowedHosts)
        return WebPushProvider(name: "webpush", configuration: configuration, policy: DeliveryPolicy(),
                               logger: Logger(label: "test"), clock: WebPushClock { now }, transport: transport)
    }

    @Test func requestShape() throws {
        let subscriber = TestSubscriber()
        var content = PushContent(title: "Hi", body: "there")
        content.headers.collapseID = "order-1"
        content.headers.priority = 10
        content.headers.expiration = .after(seconds: 600)
        let request = try Self.provider().prepare(content, for: subscriber.token("https://push.example.net/push/abc?x=1"),
                                                  options: SendOptions())
        #expect(request.method == "POST")
        #expect(request.authority == "push.example.net")
        #expect(request.path == "/push/abc?x=1")
        #expect(request.header("ttl") == "600")
        #expect(request.header("urgency") == "high")
        #expect(request.header("topic") == "order-1")
        #expect(request.header("content-encoding") == "aes128gcm")
        let authorization = try #require(request.header("authorization"))
        #expect(authorization.hasPrefix("vapid t="))
        #expect(authorization.hasSuffix(", k=\(Self.keys.publicKeyBase64URL)"))
        let claims = authorization.dropFirst("vapid t=".count).split(separator: ",")[0].split(separator: ".")[1]
        #expect(String(decoding: Base64URL.decode(claims)!, as: UTF8.self)
            == #"{"aud":"https://push.example.net","exp":1700043200,"sub":"mailto:ops@example.com"}"#)
        #expect(request.displayHeaders.first { $0.name == "authorization" }?.value.contains("redacted") == true)
        #expect(request.body.count == 86 + #"{"title":"Hi","body":"there"}"#.utf8.count + 1 + 16)
    }

    /// The origin override (`norq send --emulator`): the request goes to the override with the subscription's path,
    /// the VAPID `aud` is the origin connected to, and the subscription itself is still checked by the guard (the
    /// destination is too, when sending: the CLI allows private endpoints for its emulator on 127.0.0.1).
    @Test func originOverrideMovesTheRequestNotTheSubscription() async throws {
        var configuration = WebPushConfiguration(vapidKeys: Self.keys, subject: "mailto:ops@example.com")
        configuration.originOverride = WebPushOriginOverride(host: "emulator.example.org", port: 4443)
        #expect(configuration.summary.contains { $0.key == "originOverride" && $0.value.hasPrefix("https://emulator.example.org:4443") })
        let transport = ScriptedTransport()
        let provider = WebPushProvider(name: "webpush", configuration: configuration, policy: DeliveryPolicy(),
                                       logger: Logger(label: "test"), clock: WebPushClock { 1_700_000_000 },
                                       transport: transport)
        let subscriber = TestSubscriber()
        let token = subscriber.token("https://fcm.googleapis.com/fcm/send/abc?x=1")
        let request = try provider.prepare(PushContent(title: "Hi"), for: token, options: SendOptions())
        #expect(request.authority == "emulator.example.org:4443")
        #expect(request.path == "/fcm/send/abc?x=1")
        #expect(request.target == .token(token), "the token is not rewritten")
        let claims = try #require(request.header("authorization")?.dropFirst("vapid t=".count).split(separator: ",")[0]
            .split(separator: ".")[1])
        #expect(String(decoding: Base64URL.decode(claims)!, as: UTF8.self).contains(#""aud":"https://emulator.example.org:4443""#))
        _ = try await provider.deliver(request, deadline: .now + .seconds(5))
        #expect(transport.sent.withLock { $0.map(\.endpoint.origin) } == ["https://emulator.example.org:4443"])
        // A subscription the guard refuses stays refused, wherever the override points.
        #expect(throws: NorqError.self) {
            try provider.prepare(PushContent(title: "Hi"), for: subscriber.token("https://10.0.0.7/push/x"), options: SendOptions())
        }
    }

    @Test func refusalsBeforeAnything() {
        let subscriber = TestSubscriber()
        let provider = Self.provider(allowedHosts: ["push.example.net"])
        func code(_ token: PushToken, _ content: PushContent = PushContent(title: "x")) -> NorqError.Code? {
            do {
                _ = try provider.prepare(content, for: token, options: SendOptions())
                return nil
            } catch { return error.code }
        }
        #expect(code(PushToken(token: "https://push.example.net/x", platform: .web)) == .missingVAPIDKeys)
        #expect(code(subscriber.token("http://push.example.net/x")) == .webPushInvalidEndpoint)
        #expect(code(subscriber.token("https://other.example.net/x")) == .webPushEndpointNotAllowed)
        let open = Self.provider()
        #expect((try? open.prepare(PushContent(title: "x"), for: subscriber.token("https://169.254.169.254/latest"),
                                   options: SendOptions())) == nil)
        var big = PushContent(title: "x")
        big.body = String(repeating: "a", count: 4000)
        #expect(code(subscriber.token("https://push.example.net/x"), big) == .webPushPayloadTooLarge)
        var expired = PushContent(title: "x")
        expired.headers.expiration = .after(seconds: -5)
        #expect(code(subscriber.token("https://push.example.net/x"), expired) == .webPushInvalidTTL)
        let badKeys = PushToken(token: "https://push.example.net/x", platform: .web,
                                keys: WebPushKeys(p256dh: "AAAA", auth: "BTBZMqHH6r4Tts7J_aSIgg"))
        #expect(code(badKeys) == .webPushInvalidP256DH)
    }

    @Test func answersMapped() async throws {
        let subscriber = TestSubscriber()
        for (status, expected) in [(201, ResponseClass.delivered), (410, .tokenInvalid), (404, .tokenInvalid),
                                   (413, .permanent), (403, .credentials), (429, .retryAfterDelay), (502, .retryable)] {
            let transport = ScriptedTransport(status: status)
            let provider = Self.provider(transport: transport)
            let request = try provider.prepare(PushContent(title: "x"), for: subscriber.token("https://push.example.net/x"),
                                               options: SendOptions())
            let response = try await provider.deliver(request, deadline: .now + .seconds(5))
            #expect(response.classification == expected)
            #expect(transport.sent.withLock { $0.count } == 1)
            if status == 201 { #expect(response.messageID == "https://x/m/1") }
        }
    }

    @Test func vapidRenewedOnDeliverWhenDue() async throws {
        let subscriber = TestSubscriber()
        let transport = ScriptedTransport()
        let now = Mutex<Int64>(1_700_000_000)
        let configuration = WebPushConfiguration(vapidKeys: Self.keys, subject: "mailto:ops@example.com")
        let provider = WebPushProvider(name: "webpush", configuration: configuration, policy: DeliveryPolicy(),
                                       logger: Logger(label: "test"), clock: WebPushClock { now.withLock { $0 } },
                                       transport: transport)
        let request = try provider.prepare(PushContent(title: "x"), for: subscriber.token("https://push.example.net/x"),
                                           options: SendOptions())
        now.withLock { $0 += 13 * 3600 }
        _ = try await provider.deliver(request, deadline: .now + .seconds(5))
        let sent = try #require(transport.sent.withLock { $0.first })
        let authorization = try #require(sent.headers.first { $0.name == "authorization" }?.value)
        #expect(authorization != request.header("authorization"))
    }
}

@Suite struct WebPushTokenJSONTests {
    /// `PushSubscription.toJSON()` names the URL `endpoint`; it is accepted as `token`.
    @Test func endpointIsASynonymOfToken() throws {
        let json = try JSONValue(parsing: #"{"platform": "web", "endpoint": "https://push.example.net/push/1", "keys": {"p256dh": "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", "auth": "BTBZMqHH6r4Tts7J_aSIgg"}}"#)
        let token = try PushToken(json: json)
        #expect(token.token == "https://push.example.net/push/1")
        #expect(token.keys?.auth == "BTBZMqHH6r4Tts7J_aSIgg")
        do {
            _ = try PushToken(json: try JSONValue(parsing: #"{"platform": "web", "endpoint": "https://push.example.net/push/1"}"#))
            Issue.record("accepted without keys")
        } catch {
            #expect(error.code == .missingVAPIDKeys)
        }
    }
}
