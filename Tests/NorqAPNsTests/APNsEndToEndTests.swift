import Crypto
import NorqAPNs
import NorqCore
import NorqTesting
import Synchronization
import Testing

/// Provider -> emulator over real TLS HTTP/2 on 127.0.0.1.
@Suite(.serialized, .timeLimit(.minutes(1))) struct APNsEndToEndTests {
    struct Setup {
        let key: P256.Signing.PrivateKey
        let emulator: APNsEmulator
        let provider: APNsProvider
        let clock: TestClock
    }

    static func makeEmulator(key: P256.Signing.PrivateKey, clock: TestClock, name: String = "sandbox",
                             configure: (inout APNsEmulator.Configuration) -> Void = { _ in }) async throws -> APNsEmulator {
        var configuration = APNsEmulator.Configuration(
            environmentName: name, teamID: Fixtures.teamID, keyID: Fixtures.keyID,
            signingPublicKeyPEM: key.publicKey.pemRepresentation, now: { clock.now })
        configure(&configuration)
        let emulator = try APNsEmulator(configuration: configuration)
        try await emulator.start()
        return emulator
    }

    static func setup(configureEmulator: (inout APNsEmulator.Configuration) -> Void = { _ in },
                      configureProvider: (inout APNsConfiguration) -> Void = { _ in }) async throws -> Setup {
        let key = P256.Signing.PrivateKey()
        let clock = TestClock(1_800_000_000)
        let emulator = try await makeEmulator(key: key, clock: clock, configure: configureEmulator)
        var configuration = Fixtures.tokenConfiguration(key: key)
        configuration.sandboxEndpoint = APNsEndpoint(host: "localhost", port: emulator.port)
        configuration.additionalTrustRootsPEM = emulator.caCertificatePEM
        configureProvider(&configuration)
        let provider = try APNsProvider(name: "apns", configuration: configuration, clock: clock.apnsClock,
                                        tokenCache: APNsTokenCache())
        return Setup(key: key, emulator: emulator, provider: provider, clock: clock)
    }

    static func send(_ provider: APNsProvider, _ content: PushContent, token: PushToken = Fixtures.iosToken(),
                     timeout: Duration = .seconds(5)) async throws -> DeliveryResponse {
        let request = try provider.prepare(content, for: token, options: SendOptions())
        return try await provider.deliver(request, deadline: .now + timeout)
    }

    static func token(_ i: Int) -> String {
        let hex = Array("0123456789abcdef")
        return String((0..<62).map { hex[($0 * 7 + i * 13) % 16] }) + String([hex[(i >> 4) & 15], hex[i & 15]])
    }

    /// "200"-style status, or the error code.
    static func outcome(_ provider: APNsProvider, _ content: PushContent, token: PushToken,
                        timeout: Duration = .seconds(5)) async -> String {
        do {
            return String(try await send(provider, content, token: token, timeout: timeout).status)
        } catch {
            return (error as? NorqError)?.code.rawValue ?? "\(error)"
        }
    }

    static func close(_ setup: Setup) async {
        await setup.provider.shutdown()
        try? await setup.emulator.shutdown()
    }

    @Test func everyTokenAuthPushTypeHeadersAndPayload() async throws {
        let s = try await Self.setup()
        let notifications: [APNsNotification] = [
            .alert(title: "Hello", body: "World", sound: PushSound(name: "default"), badge: 2),
            .background(data: ["sync": true]), .voip(["callId": "7"]), .complication(data: ["c": 1]),
            .fileProvider(data: ["f": 1]), .location(data: ["l": 1]),
            .liveActivity(event: "update", contentState: ["eta": 3]), .pushToTalk(["ptt": 1]), .widgets(), .controls(),
        ]
        for notification in notifications {
            let response = try await Self.send(s.provider, notification.content)
            let type = try APNsPushType.resolve(for: notification.content)
            #expect(response.status == 200, "\(type): \(response.reason ?? "")")
            #expect(response.classification == .delivered)
            let recorded = try #require(s.emulator.requests.last)
            #expect(recorded.header("apns-push-type") == type.rawValue)
            #expect(recorded.header("apns-topic") == Fixtures.bundleID + type.topicSuffix)
            #expect(recorded.header("apns-priority") == String(type.defaultPriority))
            let expectedBody = try APNsPayload.encode(notification.content, pushType: type, sendTime: s.clock.now)
            #expect(recorded.body == expectedBody)
            #expect(recorded.header("authorization")?.hasPrefix("bearer ") == true)
            #expect(response.messageID == recorded.apnsID)
        }
        #expect(s.emulator.connectionCount == 1)
        await Self.close(s)
    }

    @Test func bothEnvironmentsPerToken() async throws {
        let key = P256.Signing.PrivateKey()
        let clock = TestClock()
        let sandbox = try await Self.makeEmulator(key: key, clock: clock, name: "sandbox")
        let production = try await Self.makeEmulator(key: key, clock: clock, name: "production")
        var configuration = Fixtures.tokenConfiguration(key: key)
        configuration.sandboxEndpoint = APNsEndpoint(host: "localhost", port: sandbox.port)
        configuration.productionEndpoint = APNsEndpoint(host: "localhost", port: production.port)
        configuration.additionalTrustRootsPEM = sandbox.caCertificatePEM + production.caCertificatePEM
        let provider = try APNsProvider(name: "apns", configuration: configuration, clock: clock.apnsClock, tokenCache: APNsTokenCache())
        let content = PushContent(title: "x")
        #expect(try await Self.send(provider, content, token: Fixtures.iosToken(environment: .production)).status == 200)
        #expect(try await Self.send(provider, content, token: Fixtures.iosToken(environment: .sandbox)).status == 200)
        #expect(try await Self.send(provider, content).status == 200)
        #expect(production.requests.count == 1 && sandbox.requests.count == 2)
        await provider.shutdown()
        try? await sandbox.shutdown()
        try? await production.shutdown()
    }

    @Test func certificateAuth() async throws {
        let clock = TestClock()
        let emulator = try await Self.makeEmulator(key: P256.Signing.PrivateKey(), clock: clock) {
            $0.requireClientCertificate = true
        }
        let client = try emulator.makeClientCertificate(commonName: "Apple Push Services: com.example.app")
        var configuration = APNsConfiguration(
            authentication: .certificate(APNsCertificateCredentials(
                material: .pem(certificateChainPEM: client.certificatePEM, privateKeyPEM: client.privateKeyPEM), source: "test")),
            bundleID: Fixtures.bundleID)
        configuration.sandboxEndpoint = APNsEndpoint(host: "localhost", port: emulator.port)
        configuration.additionalTrustRootsPEM = emulator.caCertificatePEM
        let provider = try APNsProvider(name: "apns-cert", configuration: configuration, clock: clock.apnsClock)
        #expect(try await Self.send(provider, APNsNotification.mdm(pushMagic: "magic").content).status == 200)
        #expect(try await Self.send(provider, PushContent(title: "x")).status == 200)
        #expect(emulator.requests.allSatisfy { $0.header("authorization") == nil })
        #expect(emulator.requests.first?.header("apns-push-type") == "mdm")
        await provider.shutdown()
        try? await emulator.shutdown()
    }

    @Test func everyResponseClass() async throws {
        let gone = Self.token(1), bad = Self.token(2)
        let s = try await Self.setup { $0.faults = .init(unregisteredTokens: [gone: 1_700_000_000_123], badTokens: [bad]) }
        let content = PushContent(title: "x")
        let delivered = try await Self.send(s.provider, content)
        #expect(delivered.classification == .delivered && delivered.messageID != nil)
        let unregistered = try await Self.send(s.provider, content, token: Fixtures.iosToken(gone))
        #expect(unregistered.status == 410 && unregistered.classification == .tokenInvalid)
        #expect(unregistered.invalidSince == 1_700_000_000_123 && unregistered.reason == "Unregistered")
        let badToken = try await Self.send(s.provider, content, token: Fixtures.iosToken(bad))
        #expect(badToken.reason == "BadDeviceToken" && badToken.classification == .tokenInvalid)
        s.emulator.setFaults(.init(failNextRequests: [
            .init(status: 429, reason: "TooManyRequests", retryAfterSeconds: 3), .internalServerError,
            .init(status: 400, reason: "BadTopic"), .init(status: 400, reason: "BrandNewReason"),
        ]))
        let limited = try await Self.send(s.provider, content)
        #expect(limited.classification == .retryAfterDelay && limited.retryAfter == .seconds(3))
        #expect(try await Self.send(s.provider, content).classification == .retryable)
        #expect(try await Self.send(s.provider, content).classification == .permanent)
        let unknown = try await Self.send(s.provider, content)
        #expect(unknown.reason == "BrandNewReason" && unknown.classification == .permanent)
        await Self.close(s)

        // Credentials: a key the emulator does not know.
        let wrong = try await Self.setup(configureProvider: {
            $0.authentication = .token(keyID: Fixtures.keyID, teamID: Fixtures.teamID,
                                       privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation, keySource: "other")
        })
        let denied = try await Self.send(wrong.provider, content)
        #expect(denied.status == 403 && denied.classification == .credentials)
        await Self.close(wrong)
    }

    @Test func expiredProviderTokenIsRenewedForTheRetry() async throws {
        let s = try await Self.setup {
            $0.jwtMaxAge = .seconds(10 * 60)
            $0.tokenUpdateMinInterval = .zero
        }
        let content = PushContent(title: "x")
        #expect(try await Self.send(s.provider, content).status == 200)
        s.clock.advance(15 * 60)
        let request = try s.provider.prepare(content, for: Fixtures.iosToken(), options: SendOptions())
        let expired = try await s.provider.deliver(request, deadline: .now + .seconds(5))
        #expect(expired.reason == "ExpiredProviderToken" && expired.classification.isRetryable)
        let retried = try await s.provider.deliver(request, deadline: .now + .seconds(5))
        #expect(retried.status == 200)
        let tokens = s.emulator.requests.compactMap { $0.header("authorization") }
        #expect(Set(tokens).count == 2 && tokens[1] == tokens[0] && tokens[2] != tokens[1])
        await Self.close(s)
    }

    @Test func jwtSharedAcrossConnectionsAndRenewedOverTwoHours() async throws {
        let s = try await Self.setup(configureProvider: { $0.connectionsPerEndpoint = 3 })
        try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<60 { group.addTask { try await Self.send(s.provider, PushContent(title: "\(i)")).status } }
            for try await status in group { #expect(status == 200) }
        }
        // The third connection may finish opening after the first two have answered everything.
        #expect(await APNsConnectionLifecycleTests.eventually { s.emulator.connectionCount == 3 })
        #expect(Set(s.emulator.requests.compactMap { $0.header("authorization") }).count == 1)
        // Two simulated hours, a push every 5 minutes on every connection.
        for _ in 0..<24 {
            s.clock.advance(5 * 60)
            try await withThrowingTaskGroup(of: DeliveryResponse.self) { group in
                for _ in 0..<6 { group.addTask { try await Self.send(s.provider, PushContent(title: "t")) } }
                for try await response in group {
                    #expect(response.status == 200, "\(response.reason ?? "")")
                }
            }
        }
        #expect(!s.emulator.requests.contains { $0.reason == "TooManyProviderTokenUpdates" })
        #expect(Set(s.emulator.requests.compactMap { $0.header("authorization") }).count == 3)
        await Self.close(s)
    }

    @Test func goAwayMidBurstResendsWithoutLoss() async throws {
        let s = try await Self.setup { $0.faults = .init(goAwayAfterStreams: 10) }
        #expect(try await Self.send(s.provider, PushContent(title: "warm")).status == 200)
        // A stream above a GOAWAY's last id is re-sent once inside the transport; a second time it fails as not
        // processed (the router retries it with backoff): never delivered twice.
        let statuses = try await withThrowingTaskGroup(of: (String, Int).self) { group in
            for i in 0..<40 {
                group.addTask {
                    do {
                        let r = try await Self.send(s.provider, PushContent(title: "\(i)"), token: Fixtures.iosToken(Self.token(i)))
                        return (r.messageID ?? "", r.status)
                    } catch let error as NorqError where error.code == .transportFailed && !error.possiblyProcessed {
                        return ("", -1)
                    }
                }
            }
            var all: [(String, Int)] = []
            for try await item in group { all.append(item) }
            return all
        }
        let delivered = statuses.filter { $0.1 == 200 }.count
        #expect(statuses.count == 40 && statuses.allSatisfy { $0.1 == 200 || $0.1 == -1 })
        #expect(delivered >= 19)  // 9 on the first connection, 10 on the second; the rest refused twice
        let answered = s.emulator.requests.filter { $0.status == 200 }.compactMap(\.apnsID)
        #expect(answered.count == delivered + 1 && Set(answered).count == delivered + 1)
        #expect(s.emulator.connectionCount >= 2)
        await Self.close(s)
    }

    @Test func droppedConnectionGivesEachRequestExactlyOneOutcome() async throws {
        let s = try await Self.setup { $0.faults = .init(dropConnectionAfterStreams: 10) }
        #expect(try await Self.send(s.provider, PushContent(title: "warm")).status == 200)
        let outcomes = await withTaskGroup(of: String.self) { group in
            for i in 0..<30 {
                group.addTask {
                    do {
                        let r = try await Self.send(s.provider, PushContent(title: "\(i)"), token: Fixtures.iosToken(Self.token(i)))
                        return "\(r.status)"
                    } catch {
                        return (error as? NorqError)?.code.rawValue ?? "\(error)"
                    }
                }
            }
            var all: [String] = []
            for await outcome in group { all.append(outcome) }
            return all
        }
        #expect(outcomes.count == 30)
        #expect(outcomes.allSatisfy { $0 == "200" || $0 == "provider/transport-failed" })
        #expect(outcomes.contains("provider/transport-failed"))
        // Delivered ones were answered once each.
        let answered = s.emulator.requests.filter { $0.status == 200 }.compactMap(\.apnsID)
        #expect(Set(answered).count == answered.count)
        #expect(outcomes.filter { $0 == "200" }.count == answered.count - 1)
        await Self.close(s)
    }

    @Test func silentStreamHitsDeadlineWhileOthersSucceed() async throws {
        let silent = Self.token(99)
        let s = try await Self.setup { $0.faults = .init(silentTokens: [silent]) }
        #expect(try await Self.send(s.provider, PushContent(title: "warm")).status == 200)
        async let stuck = Self.outcome(s.provider, PushContent(title: "s"), token: Fixtures.iosToken(silent),
                                       timeout: .milliseconds(400))
        var statuses: [Int] = []
        for i in 0..<10 {
            statuses.append(try await Self.send(s.provider, PushContent(title: "\(i)"), token: Fixtures.iosToken(Self.token(i))).status)
        }
        let stuckOutcome = await stuck
        #expect(stuckOutcome == "provider/deadline-exceeded")
        #expect(statuses.allSatisfy { $0 == 200 })
        #expect(try await Self.send(s.provider, PushContent(title: "after")).status == 200)
        #expect(s.emulator.connectionCount == 1)
        await Self.close(s)
    }

    @Test func configuredRequestTimeoutBoundsEachRequestInsideALongerCallerDeadline() async throws {
        let silent = Self.token(98)
        let s = try await Self.setup(configureEmulator: { $0.faults = .init(silentTokens: [silent]) },
                                     configureProvider: { $0.requestTimeout = .milliseconds(300) })
        #expect(try await Self.send(s.provider, PushContent(title: "warm")).status == 200)
        let started = ContinuousClock.now
        // The caller allows 30 s; the provider's own per-request timeout (300 ms) ends the silent stream.
        let outcome = await Self.outcome(s.provider, PushContent(title: "s"), token: Fixtures.iosToken(silent),
                                         timeout: .seconds(30))
        #expect(outcome == "provider/deadline-exceeded")
        #expect(ContinuousClock.now - started < .seconds(10))
        #expect(try await Self.send(s.provider, PushContent(title: "after")).status == 200)
        await Self.close(s)
    }

    @Test func loweredStreamLimit() async throws {
        let s = try await Self.setup { $0.maxConcurrentStreams = 50 }
        #expect(try await Self.send(s.provider, PushContent(title: "warm")).status == 200)
        await s.emulator.lowerMaxConcurrentStreams(to: 2)
        try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<30 { group.addTask { try await Self.send(s.provider, PushContent(title: "\(i)")).status } }
            for try await status in group { #expect(status == 200) }
        }
        #expect(s.emulator.requests.filter { $0.status == 200 }.count == 31)
        await Self.close(s)
    }

    @Test func throughHTTPConnectProxy() async throws {
        let proxy = ConnectProxy()
        try await proxy.start()
        let s = try await Self.setup(configureProvider: { $0.proxy = APNsEndpoint(host: "127.0.0.1", port: proxy.port) })
        #expect(try await Self.send(s.provider, PushContent(title: "via proxy")).status == 200)
        #expect(proxy.connectCount == 1)
        #expect(proxy.connectTargets.first == "localhost:\(s.emulator.port)")
        await Self.close(s)
        try? await proxy.shutdown()
    }

    @Test func shutdownRefusesNewRequests() async throws {
        let s = try await Self.setup()
        #expect(try await Self.send(s.provider, PushContent(title: "x")).status == 200)
        await s.provider.shutdown()
        await #expect(throws: NorqError.self) { _ = try await Self.send(s.provider, PushContent(title: "late")) }
        do {
            _ = try await Self.send(s.provider, PushContent(title: "late"))
        } catch {
            #expect((error as? NorqError)?.code == .providerShutDown)
        }
        try? await s.emulator.shutdown()
    }
}
