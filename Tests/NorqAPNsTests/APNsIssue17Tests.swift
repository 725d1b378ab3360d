import Crypto
import Foundation
import NorqAPNs
import NorqCore
import NorqTesting
import Testing

/// Send options with a topic (`topic` is not an init parameter).
func topicOptions(_ topic: String) -> SendOptions {
    var options = SendOptions()
    options.topic = topic
    return options
}

/// Per-notification topics, the node-apn `aps` keys, inline CA and PKCS#12 options, provider error codes.
@Suite struct APNsTopicAndPayloadTests {
    @Test func topicPerNotificationKeepsThePushTypeSuffixRules() throws {
        let provider = try Fixtures.provider()
        var content = PushContent(title: "Hi")
        content.headers.topic = "com.example.other"
        let token = Fixtures.iosToken()
        #expect(try provider.prepare(content, for: token, options: SendOptions()).header("apns-topic") == "com.example.other")
        // The send's option wins over the template's.
        #expect(try provider.prepare(content, for: token, options: topicOptions("com.example.third"))
            .header("apns-topic") == "com.example.third")
        var voip = APNsNotification.voip(["callId": "1"]).content
        voip.headers.topic = "com.example.other"
        #expect(try provider.prepare(voip, for: token, options: SendOptions()).header("apns-topic") == "com.example.other.voip")
        voip.headers.topic = "com.example.other.voip"
        #expect(try provider.prepare(voip, for: token, options: SendOptions()).header("apns-topic") == "com.example.other.voip",
                "a topic that already carries the suffix is kept")
        var live = APNsNotification.liveActivity(event: "update", contentState: ["eta": 1]).content
        live.headers.topic = "com.example.other"
        #expect(try provider.prepare(live, for: token, options: SendOptions()).header("apns-topic")
            == "com.example.other.push-type.liveactivity")
        // No topic: the provider's bundle id, as before.
        #expect(try provider.prepare(PushContent(title: "x"), for: token, options: SendOptions()).header("apns-topic")
            == Fixtures.bundleID)
    }

    @Test(arguments: ["com.example.app.voip", "com.example/app", "", ".com.example", String(repeating: "a", count: 256)])
    func invalidTopics(_ topic: String) throws {
        let provider = try Fixtures.provider()
        do {
            _ = try provider.prepare(PushContent(title: "x"), for: Fixtures.iosToken(), options: topicOptions(topic))
            Issue.record("topic \(topic) must be refused")
        } catch {
            #expect(error.code == .apnsInvalidTopic)
        }
    }

    @Test func broadcastTopicIsThePlainBundleIDOfAnotherApp() throws {
        let provider = try Fixtures.provider()
        let content = APNsNotification.liveActivityUpdate(contentState: ["score": "1-0"]).content
        let channel = ChannelRecipient(channel: "dHN0LXNyY2gtY2hubA==")
        let request = try provider.prepare(content, forChannel: channel, options: topicOptions("com.example.tv"))
        #expect(request.path == "/4/broadcasts/apps/com.example.tv")
        #expect(request.header("apns-topic") == "com.example.tv")
        do {
            _ = try provider.prepare(content, forChannel: channel, options: topicOptions("com.example.tv.push-type.liveactivity"))
            Issue.record("a suffixed broadcast topic must be refused")
        } catch {
            #expect(error.code == .apnsInvalidTopic)
        }
    }

    @Test func nodeAPNKeysInAps() throws {
        var content = PushContent(title: "Sale", body: "Today")
        content.ios.actionLocKey = "VIEW"
        content.ios.action = "Open"
        content.ios.urlArgs = ["sale", "42"]
        let body = try APNsPayload.encode(content, pushType: .alert, sendTime: 0)
        #expect(String(decoding: body, as: UTF8.self)
                == #"{"aps":{"alert":{"title":"Sale","body":"Today","action-loc-key":"VIEW","action":"Open"},"url-args":["sale","42"]}}"#)
        var plain = PushContent()
        plain.ios.alertText = "Hello"
        plain.ios.sound = PushSound(name: "default")
        #expect(String(decoding: try APNsPayload.encode(plain, pushType: .alert, sendTime: 0), as: UTF8.self)
                == #"{"aps":{"alert":"Hello","sound":"default"}}"#)
        #expect(try APNsPushType.resolve(for: plain) == .alert)
        plain.body = "and a body"
        do {
            _ = try APNsPayload.encode(plain, pushType: .alert, sendTime: 0)
            Issue.record("a plain-string alert with a body must be refused")
        } catch {
            #expect(error.code == .apnsInvalidPayload)
        }
    }

    @Test func inlineCAAndPKCS12() throws {
        let withCA = try parse(["keyId": Fixtures.keyID, "teamId": Fixtures.teamID, "keyPath": Paths.demoKey,
                                "bundleId": "b", "caPem": fakeCertificate])
        #expect(withCA.additionalTrustRootsPEM == fakeCertificate)
        #expect(withCA.summary.contains { $0.key == "caPath" && $0.value == "caPem (inline)" })
        #expect(thrown(["keyId": Fixtures.keyID, "teamId": Fixtures.teamID, "keyPath": Paths.demoKey, "bundleId": "b",
                        "caPem": "not a pem"])?.code == .configInvalidCertificate)
        #expect(thrown(["keyId": Fixtures.keyID, "teamId": Fixtures.teamID, "keyPath": Paths.demoKey, "bundleId": "b",
                        "caPem": fakeCertificate, "caPath": "/x.pem"])?.code == .configConflictingKeys)

        let pfx = try parse(["bundleId": "b", "pfxBase64": "MIIB\nAAEC", "passphrase": "pw"])
        guard case .certificate(let credentials) = pfx.authentication, case .pkcs12(let bytes) = credentials.material else {
            Issue.record("expected inline PKCS#12 credentials")
            return
        }
        #expect(bytes == [0x30, 0x82, 0x01, 0x00, 0x01, 0x02])
        #expect(credentials.source == "pfxBase64 (inline)" && credentials.passphrase == "pw")
        #expect(!pfx.summary.contains { $0.value.contains("MIIB") }, "the inline PKCS#12 is never printed")
        let bad = thrown(["bundleId": "b", "pfxBase64": "%%%"])
        #expect(bad?.code == .configInvalidCertificate && bad?.location?.line == 3)
        #expect(thrown(["bundleId": "b", "pfxBase64": "MIIB", "pfxPath": "/x.p12"])?.code == .configConflictingKeys)
    }

    @Test func rejectedResponsesCarryTheProviderCode() throws {
        // The classification table gives the code; the router puts it on the rejected outcome.
        #expect(APNsResponseTable.code(status: 410, reason: "Unregistered")?.rawValue == "apns/unregistered")
        #expect(APNsResponseTable.code(status: 400, reason: "BadDeviceToken")?.rawValue == "apns/bad-device-token")
    }
}

/// Expiration, topic and the new options over the emulator (real TLS HTTP/2).
@Suite(.serialized, .timeLimit(.minutes(1))) struct APNsIssue17EndToEndTests {
    typealias E2E = APNsEndToEndTests

    @Test func expirationGoesOnTheWireAsWritten() async throws {
        let s = try await E2E.setup()
        var epoch = PushContent(title: "epoch")
        epoch.headers.expiration = .at(epochSeconds: 1_900_000_000)
        var relative = PushContent(title: "relative")
        relative.headers.expiration = .after(seconds: 3600)
        var once = PushContent(title: "once")
        once.headers.expiration = .immediately
        for content in [epoch, relative, once] {
            let request = try s.provider.prepare(content, for: Fixtures.iosToken(), options: SendOptions(sendTime: 1_800_000_000))
            let response = try await s.provider.deliver(request, deadline: .now + .seconds(5))
            #expect(response.status == 200, "\(content.title): \(response.reason ?? "")")
        }
        let sent = s.emulator.requests.map { $0.header("apns-expiration") }
        #expect(sent == ["1900000000", "1800003600", "0"])
        await E2E.close(s)
    }

    @Test func oneTokenKeyServesSeveralAppsOfTheTeam() async throws {
        let s = try await E2E.setup(configureEmulator: { $0.bundleIDs = [Fixtures.bundleID, "com.example.watch"] })
        var other = PushContent(title: "to the second app")
        other.headers.topic = "com.example.watch"
        #expect(try await E2E.send(s.provider, other).status == 200)
        let voip = try s.provider.prepare(APNsNotification.voip(["c": 1]).content, for: Fixtures.iosToken(),
                                          options: topicOptions("com.example.watch"))
        #expect(try await s.provider.deliver(voip, deadline: .now + .seconds(5)).status == 200)
        var stranger = PushContent(title: "not of this team")
        stranger.headers.topic = "com.example.unknown"
        let rejected = try await E2E.send(s.provider, stranger)
        #expect(rejected.status != 200)
        #expect(rejected.code?.area == "apns", "a rejection carries the provider's code: \(String(describing: rejected.code))")
        #expect(s.emulator.requests.map { $0.header("apns-topic") }
                == ["com.example.watch", "com.example.watch.voip", "com.example.unknown"])
        await E2E.close(s)
    }

    @Test func inlineCAPemReachesTheEmulator() async throws {
        let key = P256.Signing.PrivateKey()
        let clock = TestClock(1_800_000_000)
        let emulator = try await E2E.makeEmulator(key: key, clock: clock)
        let keyFile = try Paths.temporaryFile(key.pemRepresentation)
        defer { try? FileManager.default.removeItem(atPath: keyFile) }
        let configuration = try parse(["keyId": Fixtures.keyID, "teamId": Fixtures.teamID, "keyPath": keyFile,
                                       "bundleId": Fixtures.bundleID, "endpoint": "https://localhost:\(emulator.port)",
                                       "caPem": emulator.caCertificatePEM])
        let provider = try APNsProvider(name: "apns", configuration: configuration, clock: clock.apnsClock,
                                        tokenCache: APNsTokenCache())
        #expect(try await E2E.send(provider, PushContent(title: "trusted through caPem")).status == 200)
        await provider.shutdown()
        try? await emulator.shutdown()
    }

    @Test(.enabled(if: APNsConnectionLifecycleTests.openSSL() != nil, "needs the openssl command to build a PKCS#12 file"))
    func inlinePKCS12ReachesTheEmulator() async throws {
        let openssl = try #require(APNsConnectionLifecycleTests.openSSL())
        let clock = TestClock(1_800_000_000)
        let emulator = try await E2E.makeEmulator(key: P256.Signing.PrivateKey(), clock: clock) {
            $0.requireClientCertificate = true
        }
        let client = try emulator.makeClientCertificate(commonName: "Apple Push Services: com.example.app")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("norq-p12b64-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let certPath = directory.appendingPathComponent("cert.pem").path
        let keyPath = directory.appendingPathComponent("key.pem").path
        let p12Path = directory.appendingPathComponent("cert.p12").path
        try client.certificatePEM.write(toFile: certPath, atomically: true, encoding: .utf8)
        try client.privateKeyPEM.write(toFile: keyPath, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: openssl)
        process.arguments = ["pkcs12", "-export", "-in", certPath, "-inkey", keyPath, "-out", p12Path,
                             "-passout", "pass:s3cret", "-name", "norq-test"]
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "openssl pkcs12 -export failed")
        let base64 = try Data(contentsOf: URL(fileURLWithPath: p12Path)).base64EncodedString(options: .lineLength64Characters)
        let configuration = try parse(["bundleId": Fixtures.bundleID, "pfxBase64": base64, "passphrase": "s3cret",
                                       "endpoint": "https://localhost:\(emulator.port)", "caPem": emulator.caCertificatePEM])
        let provider = try APNsProvider(name: "apns-p12", configuration: configuration, clock: clock.apnsClock)
        #expect(try await E2E.send(provider, PushContent(title: "inline PKCS#12")).status == 200)
        #expect(emulator.requests.count == 1 && emulator.requests[0].header("authorization") == nil)
        await provider.shutdown()
        try? await emulator.shutdown()
    }
}
