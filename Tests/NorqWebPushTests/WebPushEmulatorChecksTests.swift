import Crypto
import Foundation
import Logging
import NorqCore
import NorqHTTP2
import NorqTesting
import Synchronization
import Testing
@testable import NorqWebPush

/// The emulator enforces RFC 8030 / 8292 like a push service: requests built by the provider and then broken one
/// field at a time are refused with the status a push service gives.
@Suite(.serialized, .timeLimit(.minutes(1))) struct WebPushEmulatorChecksTests {
    static let keys = VAPIDKeyPair.generate()

    static func send(_ request: WebPushWireRequest, via transport: WebPushHTTP1Transport) async -> Result<HTTP2Response, NorqError> {
        await withCheckedContinuation { continuation in
            transport.start(request, deadline: .now + .seconds(5)) { continuation.resume(returning: $0) }
        }
    }

    @Test func refusesWhatAPushServiceRefuses() async throws {
        let now = Mutex<Int64>(1_700_000_000)
        let emulator = try WebPushEmulator(configuration: .init(httpVersion: .http1, now: { now.withLock { $0 } }))
        try await emulator.start()
        let configuration = WebPushConfiguration(vapidKeys: Self.keys, subject: "mailto:ops@example.com",
                                                 allowPrivateEndpoints: true,
                                                 additionalTrustRootsPEM: emulator.caCertificatePEM)
        let transport = try WebPushHTTP1Transport(configuration: configuration,
                                                  endpointGuard: WebPushEndpointGuard(allowPrivateEndpoints: true),
                                                  logger: Logger(label: "test"))
        let provider = WebPushProvider(name: "webpush", configuration: configuration, policy: DeliveryPolicy(),
                                       logger: Logger(label: "test"), clock: WebPushClock { now.withLock { $0 } },
                                       transport: transport)
        let subscription = emulator.subscribe(applicationServerKey: Self.keys.publicKeyBase64URL)
        let token = PushToken(token: subscription.endpoint, platform: .web,
                              keys: WebPushKeys(p256dh: subscription.p256dh, auth: subscription.auth))
        let prepared = try provider.prepare(PushContent(title: "x"), for: token, options: SendOptions())
        let base = WebPushWireRequest(endpoint: try WebPushEndpoint(parsing: subscription.endpoint), method: "POST",
                                      headers: prepared.headers, body: prepared.body)
        func variant(_ change: (inout WebPushWireRequest) -> Void) -> WebPushWireRequest {
            var copy = base
            change(&copy)
            return copy
        }
        func setting(_ name: String, _ value: String?) -> WebPushWireRequest {
            variant { request in
                request.headers.removeAll { $0.name == name }
                if let value { request.headers.append(HTTPHeader(name, value)) }
            }
        }
        let cases: [(String, WebPushWireRequest, Int)] = [
            ("valid", base, 201),
            ("no TTL", setting("ttl", nil), 400),
            ("negative TTL", setting("ttl", "-1"), 400),
            ("bad urgency", setting("urgency", "urgent"), 400),
            ("long topic", setting("topic", String(repeating: "a", count: 33)), 400),
            ("topic outside the alphabet", setting("topic", "a.b"), 400),
            ("other content coding", setting("content-encoding", "aesgcm"), 400),
            ("no VAPID", setting("authorization", nil), 401),
            ("VAPID with a wrong signature", setting("authorization", prepared.header("authorization")!.replacingOccurrences(of: "t=ey", with: "t=ez")), 403),
            ("corrupted body", variant { $0.body[$0.body.count - 1] ^= 1 }, 400),
            ("body over 4096 bytes", variant { $0.body += [UInt8](repeating: 0, count: 4097 - $0.body.count) }, 413),
        ]
        for (name, request, status) in cases {
            let result = await Self.send(request, via: transport)
            #expect((try? result.get())?.status == status, "\(name): \(result)")
        }
        // A VAPID token for another origin, or expired by the emulator's clock, is refused.
        let otherAudience = VAPIDSigner(keys: Self.keys, subject: "mailto:ops@example.com")
        let foreign = otherAudience.authorization(jwt: otherAudience.sign(audience: "https://push.example.net", expiresAt: 1_700_003_600))
        #expect((try? (await Self.send(setting("authorization", foreign), via: transport)).get())?.status == 403)
        now.withLock { $0 += 13 * 3600 }  // the prepared token (12 h) has expired
        #expect((try? (await Self.send(base, via: transport)).get())?.status == 403)
        #expect(emulator.messages.filter { $0.status == 201 }.count == 1)
        #expect(emulator.messages.first?.plaintextString == #"{"title":"x"}"#)
        await provider.shutdown()
        try await emulator.shutdown()
    }

    /// `norq serve --emulator` learns web subscriptions only as sends name them: with `acceptUnknownSubscriptions`
    /// a message to a path the emulator never saw is checked (VAPID included) and accepted, not decrypted; without
    /// it the same message gets 404. Either way the records stay within `recordLimit`.
    @Test func unknownSubscriptionsAreAcceptedOnlyWhenAskedAndRecordsStayBounded() async throws {
        func run(accept: Bool) async throws -> WebPushEmulator {
            var settings = WebPushEmulator.Configuration(httpVersion: .http1)
            settings.acceptUnknownSubscriptions = accept
            settings.recordLimit = 20
            let emulator = try WebPushEmulator(configuration: settings)
            try await emulator.start()
            let configuration = WebPushConfiguration(vapidKeys: Self.keys, subject: "mailto:ops@example.com",
                                                     allowPrivateEndpoints: true,
                                                     additionalTrustRootsPEM: emulator.caCertificatePEM)
            let transport = try WebPushHTTP1Transport(configuration: configuration,
                                                      endpointGuard: WebPushEndpointGuard(allowPrivateEndpoints: true),
                                                      logger: Logger(label: "test"))
            let provider = WebPushProvider(name: "webpush", configuration: configuration, policy: DeliveryPolicy(),
                                           logger: Logger(label: "test"), clock: .system, transport: transport)
            // A browser's subscription the emulator never issued nor adopted.
            let browser = P256.KeyAgreement.PrivateKey()
            let p256dh = Data(browser.publicKey.x963Representation).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            let token = PushToken(token: emulator.origin + "/fcm/send/never-seen", platform: .web,
                                  keys: WebPushKeys(p256dh: p256dh, auth: "SCcgLAlycoK6hUuYKyV4MQ"))
            let prepared = try provider.prepare(PushContent(title: "x"), for: token, options: SendOptions())
            let request = WebPushWireRequest(endpoint: try WebPushEndpoint(parsing: token.token), method: "POST",
                                             headers: prepared.headers, body: prepared.body)
            let first = await Self.send(request, via: transport)
            #expect((try? first.get())?.status == (accept ? 201 : 404), "\(first)")
            var unsigned = request
            unsigned.headers.removeAll { $0.name == "authorization" }
            let refused = await Self.send(unsigned, via: transport)
            #expect((try? refused.get())?.status == (accept ? 401 : 404), "VAPID is still checked: \(refused)")
            for _ in 0..<48 { _ = await Self.send(request, via: transport) }
            #expect(emulator.messages.count <= 20, "\(emulator.messages.count) records kept")
            #expect(emulator.messages.count + emulator.droppedMessageCount == 50)
            await provider.shutdown()
            try await emulator.shutdown()
            return emulator
        }
        let accepting = try await run(accept: true)
        #expect(accepting.messages.last?.subscriptionID == "/fcm/send/never-seen")
        #expect(accepting.messages.last?.plaintext == nil)
        let refusing = try await run(accept: false)
        #expect(refusing.messages.allSatisfy { $0.status == 404 })
    }
}
