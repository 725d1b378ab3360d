import Crypto
import NorqAPNs
import NorqCore
import Testing

@Suite struct APNsPrepareTests {
    @Test func headersInFixedOrderWithRedactedJWT() throws {
        let provider = try Fixtures.provider()
        var content = PushContent(title: "Hi")
        content.headers.collapseID = "c1"
        content.headers.expiration = .after(seconds: 3600)
        let request = try provider.prepare(content, for: Fixtures.iosToken(),
                                           options: SendOptions(requestID: "0A0B0C0D-0000-4000-8000-000000000001", sendTime: 1000))
        #expect(request.method == "POST")
        #expect(request.url == "https://api.sandbox.push.apple.com/3/device/\(Fixtures.token)")
        #expect(request.headers.map(\.name) == ["apns-topic", "apns-push-type", "apns-priority", "apns-expiration",
                                                "apns-collapse-id", "apns-id", "authorization"])
        #expect(request.header("apns-topic") == "com.example.app")
        #expect(request.header("apns-priority") == "10")
        #expect(request.header("apns-expiration") == "4600")
        #expect(request.header("apns-id") == "0a0b0c0d-0000-4000-8000-000000000001")
        #expect(request.requestID == "0a0b0c0d-0000-4000-8000-000000000001")
        #expect(request.header("authorization")?.hasPrefix("bearer ey") == true)
        #expect(request.displayHeaders.last?.value == "bearer <redacted ES256 JWT kid=ABC123DEFG iss=TEAM123456>")
        #expect(request.body == Array(#"{"aps":{"alert":{"title":"Hi"}}}"#.utf8))
        #expect(provider.policy.idempotency.requestIDHeader == "apns-id")
    }

    @Test func generatedRequestIDsAreLowercaseV4UUIDs() throws {
        let provider = try Fixtures.provider()
        var seen = Set<String>()
        for _ in 0..<200 {
            let id = try #require(try provider.prepare(PushContent(title: "x"), for: Fixtures.iosToken(), options: SendOptions()).requestID)
            #expect(id.count == 36 && id == id.lowercased())
            let chars = Array(id)
            #expect(chars[8] == "-" && chars[13] == "-" && chars[14] == "4" && chars[18] == "-" && chars[23] == "-")
            #expect("89ab".contains(chars[19]))
            seen.insert(id)
        }
        #expect(seen.count == 200)
    }

    @Test func environmentPerToken() throws {
        let provider = try Fixtures.provider(Fixtures.tokenConfiguration(production: true))
        let content = PushContent(title: "x")
        #expect(try provider.prepare(content, for: Fixtures.iosToken(), options: SendOptions()).authority == "api.push.apple.com")
        let sandbox = try provider.prepare(content, for: Fixtures.iosToken(environment: .sandbox), options: SendOptions(environment: .production))
        #expect(sandbox.authority == "api.sandbox.push.apple.com" && sandbox.environment == .sandbox)
        let sandboxProvider = try Fixtures.provider()
        #expect(try sandboxProvider.prepare(content, for: Fixtures.iosToken(environment: .production), options: SendOptions()).environment == .production)
        #expect(try sandboxProvider.prepare(content, for: Fixtures.iosToken(), options: SendOptions(environment: .production)).environment == .production)
    }

    @Test func typeSpecificHeaders() throws {
        let provider = try Fixtures.provider()
        let background = try provider.prepare(APNsNotification.background().content, for: Fixtures.iosToken(), options: SendOptions())
        #expect(background.header("apns-priority") == "5" && background.header("apns-push-type") == "background")
        let ptt = try provider.prepare(APNsNotification.pushToTalk().content, for: Fixtures.iosToken(), options: SendOptions())
        #expect(ptt.header("apns-expiration") == "0" && ptt.header("apns-topic") == "com.example.app.voip-ptt")
        var immediate = PushContent(title: "x")
        immediate.headers.expiration = .immediately
        #expect(try provider.prepare(immediate, for: Fixtures.iosToken(), options: SendOptions()).header("apns-expiration") == "0")
        #expect(try provider.prepare(PushContent(title: "x"), for: Fixtures.iosToken(), options: SendOptions()).header("apns-expiration") == nil)
    }

    @Test func validationErrorsBeforeSending() throws {
        let provider = try Fixtures.provider()
        let token = Fixtures.iosToken()
        func code(_ content: PushContent, _ token: PushToken = Fixtures.iosToken(), _ options: SendOptions = SendOptions()) -> String? {
            errorCode { _ = try provider.prepare(content, for: token, options: options) }
        }
        #expect(code(PushContent(title: "x"), Fixtures.iosToken("not-hex!")) == "apns/invalid-token-format")
        #expect(code(PushContent(title: "x"), Fixtures.iosToken("abc")) == "apns/invalid-token-format")
        #expect(code(PushContent(title: String(repeating: "a", count: 4100))) == "apns/payload-too-large")
        var voip = APNsNotification.voip(["blob": .string(String(repeating: "a", count: 4500))]).content
        #expect(code(voip) == nil)
        voip = APNsNotification.voip(["blob": .string(String(repeating: "a", count: 5200))]).content
        #expect(code(voip) == "apns/payload-too-large")
        #expect(code(APNsNotification.background().priority(10).content) == "apns/bad-priority")
        #expect(code(APNsNotification.pushToTalk().priority(5).content) == "apns/bad-priority")
        #expect(code(APNsNotification.pushToTalk().expiration(.at(epochSeconds: 99)).content) == "apns/bad-expiration-date")
        #expect(code(PushContent(title: "x"), token, SendOptions(expiration: .at(epochSeconds: -5))) == "apns/bad-expiration-date")
        #expect(code(APNsNotification.mdm(pushMagic: "m").content) == "apns/push-type-requires-certificate")
        #expect(code(APNsNotification.alert(title: "x").collapseID(String(repeating: "é", count: 33)).content) == "apns/bad-collapse-id")
        #expect(code(APNsNotification.alert(title: "x").collapseID(String(repeating: "a", count: 64)).content) == nil)
        #expect(code(PushContent(title: "x"), token, SendOptions(requestID: "nope")) == "apns/bad-message-id")
        #expect(code(APNsNotification.liveActivity(event: "start", contentState: [:]).content) == "apns/invalid-live-activity")
    }

    @Test func tokenOnlyTypesWithCertificateAuth() throws {
        let configuration = APNsConfiguration(
            authentication: .certificate(APNsCertificateCredentials(
                material: .pem(certificateChainPEM: TestCertificates.certificatePEM, privateKeyPEM: TestCertificates.keyPEM),
                source: "test")),
            bundleID: "com.example.app")
        let provider = try APNsProvider(name: "apns-cert", configuration: configuration)
        for notification in [APNsNotification.location(), .widgets()] {
            #expect(errorCode { _ = try provider.prepare(notification.content, for: Fixtures.iosToken(), options: SendOptions()) } == "apns/push-type-requires-token")
        }
        let mdm = try provider.prepare(APNsNotification.mdm(pushMagic: "m").content, for: Fixtures.iosToken(), options: SendOptions())
        #expect(mdm.header("authorization") == nil && mdm.header("apns-topic") == "com.example.app")
    }

    @Test func badCredentialsAreTyped() {
        let broken = APNsConfiguration(
            authentication: .certificate(APNsCertificateCredentials(
                material: .pem(certificateChainPEM: "junk", privateKeyPEM: "junk"), source: "cert.pem")),
            bundleID: "com.example.app")
        #expect(errorCode { _ = try APNsProvider(name: "x", configuration: broken) } == "apns/invalid-certificate")
        var roots = Fixtures.tokenConfiguration()
        roots.additionalTrustRootsPEM = "junk"
        #expect(errorCode { _ = try APNsProvider(name: "x", configuration: roots) } == "apns/invalid-trust-roots")
        #expect(errorCode { _ = try APNsProviderType().makeProvider(name: "x", configuration: NotAPNs(), policy: DeliveryPolicy(), context: ProviderContext()) } == "apns/wrong-configuration")
    }

    struct NotAPNs: ProviderConfiguration { var summary: [(key: String, value: String)] { [] } }
}

@Suite("APNs payload reuse across the requests of one send")
struct APNsPayloadReuseTests {
    @Test("the same contentID reuses the encoding; another contentID or changed content without one re-encodes")
    func contentIDReuse() throws {
        let provider = try Fixtures.provider()
        let first = PushContent(title: "first")
        let second = PushContent(title: "second")
        func body(_ content: PushContent, contentID: UInt64?) throws -> String {
            let request = try provider.prepare(content, for: Fixtures.iosToken(),
                                               options: SendOptions(sendTime: 1_800_000_000, contentID: contentID))
            return String(decoding: request.body, as: UTF8.self)
        }
        #expect(try body(first, contentID: 7).contains("first"))
        #expect(try body(first, contentID: 7).contains("first"))
        // A new send (new contentID) with new content is encoded afresh.
        #expect(try body(second, contentID: 8).contains("second"))
        // Without a contentID the content itself is compared.
        #expect(try body(first, contentID: nil).contains("first"))
        #expect(try body(second, contentID: nil).contains("second"))
    }
}
