import Foundation
import Crypto
import Norq
import NorqAPNs
import NorqCore
@testable import NorqFCM
import NorqTesting
import Synchronization
import Testing

/// The router with APNs and FCM side by side, over TLS against both emulators.
@Suite(.serialized) struct FCMRouterEndToEndTests {
    static let iosAPNsToken = String(repeating: "ab", count: 32)

    struct Setup {
        let apnsEmulator: APNsEmulator
        let fcm: FCMEmulatorFixture
        let apns: APNsProvider
        let fcmProvider: FCMProvider

        func router(clock: RouterClock = RouterClock(sleep: { _ in await Task.yield() }, random: { 0.5 }),
                    onInvalidToken: (@Sendable (InvalidTokenEvent) -> Void)? = nil) throws -> NotificationRouter {
            try NotificationRouter(providers: [apns, fcmProvider], byPlatform: [.ios: "apns", .android: "fcm"],
                                   clock: clock, onInvalidToken: onInvalidToken)
        }

        func shutdown() async throws {
            await apns.shutdown()
            await fcmProvider.shutdown()
            try await apnsEmulator.shutdown()
            try await fcm.emulator.shutdown()
        }
    }

    static func setup(fcmFaults: FCMEmulator.Faults = .init()) async throws -> Setup {
        let key = P256.Signing.PrivateKey()
        let apnsEmulator = try APNsEmulator(configuration: .init(
            teamID: "TEAM123ABC", keyID: "KEY1234567", signingPublicKeyPEM: key.publicKey.pemRepresentation))
        try await apnsEmulator.start()
        var apnsConfiguration = APNsConfiguration(
            authentication: .token(keyID: "KEY1234567", teamID: "TEAM123ABC", privateKeyPEM: key.pemRepresentation,
                                   keySource: "test"),
            bundleID: "com.example.app")
        apnsConfiguration.sandboxEndpoint = APNsEndpoint(host: "localhost", port: apnsEmulator.port)
        apnsConfiguration.additionalTrustRootsPEM = apnsEmulator.caCertificatePEM
        let apns = try APNsProvider(name: "apns", configuration: apnsConfiguration, tokenCache: APNsTokenCache())
        let fcm = try await FCMEmulatorFixture.start(faults: fcmFaults)
        return Setup(apnsEmulator: apnsEmulator, fcm: fcm, apns: apns, fcmProvider: try fcm.provider())
    }

    @Test func mixedSendDeliversEachTokenOnceWithTheRightPayload() async throws {
        let setup = try await Self.setup()
        let router = try setup.router()
        var content = PushContent(title: "Order shipped", body: "On its way", data: ["orderId": "A-1", "count": 2])
        content.ios.badge = 1
        content.android.channelID = "orders"
        let recipients = [Recipient(id: "u1", tokens: [
            PushToken(token: Self.iosAPNsToken, platform: .ios),
            PushToken(token: androidToken, platform: .android),
            PushToken(token: iosViaFCMToken, platform: .ios, provider: "fcm"),
        ])]
        let report = try await router.send(content: content, to: recipients)
        #expect(report.delivered == 3)
        #expect(report.outcomes.map(\.provider) == ["apns", "fcm", "fcm"])
        let apnsRequests = setup.apnsEmulator.requests
        #expect(apnsRequests.count == 1)
        let fcmSends = setup.fcm.emulator.deliveredMessages
        #expect(fcmSends.count == 2)
        let android = try #require(fcmSends.first { $0.target?.value == androidToken })
        #expect(android.blocks == ["android"])
        #expect(((android.message?["android"] as? [String: Any])?["notification"] as? [String: Any])?["channel_id"] as? String == "orders")
        #expect((android.message?["data"] as? [String: String]) == ["orderId": "A-1", "count": "2"])
        let iosViaFCM = try #require(fcmSends.first { $0.target?.value == iosViaFCMToken })
        #expect(iosViaFCM.blocks == ["apns"])
        // The apns payload FCM got is the payload APNs got, byte for byte once parsed.
        let apnsBody = try JSONValue(parsing: try #require(apnsRequests.first).body)
        let fcmBody = try JSONValue(parsing: iosViaFCM.body)
        #expect(fcmBody["message"]?["apns"]?["payload"] == apnsBody)
        if case .delivered(let delivered) = report.outcomes[1].result {
            #expect(delivered.messageID?.hasPrefix("projects/norq-demo/messages/") == true)
        } else {
            Issue.record("android outcome: \(report.outcomes[1].result)")
        }
        await router.shutdown()
        try await setup.shutdown()
    }

    @Test func perSendValidateOnlyReachesFCMOnlyAndDeliversNothing() async throws {
        let setup = try await Self.setup()
        let router = try setup.router()
        var options = RouterSendOptions()
        options.validateOnly = true
        let recipients = [Recipient(id: "u1", tokens: [
            PushToken(token: Self.iosAPNsToken, platform: .ios),
            PushToken(token: androidToken, platform: .android),
        ])]
        let report = try await router.send(content: PushContent(title: "Check me"), to: recipients, options: options)
        // APNs has no server-side dry run: its token fails before anything is sent.
        guard case .failed(let error) = report.outcomes[0].result else {
            Issue.record("apns outcome: \(report.outcomes[0].result)")
            return
        }
        #expect(error.code == .validateOnlyUnsupported)
        #expect(setup.apnsEmulator.requests.isEmpty)
        // FCM validated the message (validate_only) and answered FCM's dry-run name.
        guard case .delivered(let delivered) = report.outcomes[1].result else {
            Issue.record("fcm outcome: \(report.outcomes[1].result)")
            return
        }
        #expect(delivered.messageID == "projects/norq-demo/messages/fake_message_id")
        let sent = try #require(setup.fcm.emulator.deliveredMessages.first)
        #expect(try JSONValue(parsing: sent.body)["validate_only"] == true)
        // The next send without the option is a real one.
        let real = try await router.send(content: PushContent(title: "Real"), to: [Recipient(tokens: [
            PushToken(token: androidToken, platform: .android)])])
        #expect(real.delivered == 1)
        #expect(try JSONValue(parsing: try #require(setup.fcm.emulator.deliveredMessages.last).body)["validate_only"] == nil)
        await router.shutdown()
        try await setup.shutdown()
    }

    @Test func unregisteredTokenRaisesOneInvalidTokenEvent() async throws {
        let setup = try await Self.setup(fcmFaults: FCMEmulator.Faults(unregisteredTokens: [androidToken2]))
        let events = Mutex<[InvalidTokenEvent]>([])
        let router = try setup.router(onInvalidToken: { event in events.withLock { $0.append(event) } })
        let report = try await router.send(content: PushContent(title: "x"), to: [Recipient(tokens: [
            PushToken(token: androidToken2, platform: .android), PushToken(token: androidToken, platform: .android),
        ])], options: RouterSendOptions(idempotencyKey: "unregistered-send"))
        #expect(report.delivered == 1)
        #expect(report.rejected == 1)
        if case .rejected(let rejected) = report.outcomes[0].result {
            #expect(rejected.reason == "UNREGISTERED")
            #expect(rejected.classification == .tokenInvalid)
            // FCM answered no message name: the outcome's id is the request id, made by the router although FCM's
            // requests do not carry it (`readsRequestID` false).
            #expect(rejected.messageID == RequestID.make(idempotencyKey: "unregistered-send", token: androidToken2))
        } else {
            Issue.record("outcome: \(report.outcomes[0].result)")
        }
        let seen = events.withLock { $0 }
        #expect(seen.count == 1)
        #expect(seen.first?.token.token == androidToken2)
        #expect(seen.first?.provider == "fcm")
        #expect(seen.first?.reason == "UNREGISTERED")
        #expect(setup.fcm.emulator.requests.filter { $0.target?.value == androidToken2 }.count == 1)
        await router.shutdown()
        try await setup.shutdown()
    }

    @Test func senderIDMismatchIsQuarantinedNotDeleted() async throws {
        let setup = try await Self.setup(fcmFaults: FCMEmulator.Faults(senderIDMismatchTokens: [androidToken2]))
        let events = Mutex<Int>(0)
        let router = try setup.router(onInvalidToken: { _ in events.withLock { $0 += 1 } })
        let report = try await router.send(content: PushContent(title: "x"),
                                           to: [Recipient(tokens: [PushToken(token: androidToken2, platform: .android)])])
        guard case .rejected(let rejected) = report.outcomes[0].result else {
            Issue.record("expected a rejection")
            return
        }
        #expect(rejected.classification == .tokenQuarantined)
        #expect(report.outcomes[0].attempts == 1)
        #expect(events.withLock { $0 } == 0)
        await router.shutdown()
        try await setup.shutdown()
    }

    @Test func quotaExceededWaitsAtLeastAMinuteBeforeTheRetry() async throws {
        let faults = FCMEmulator.Faults(failFirstAttempts: [androidToken: [.code("QUOTA_EXCEEDED", retryAfterSeconds: 2)]])
        let setup = try await Self.setup(fcmFaults: faults)
        let sleeps = Mutex<[Duration]>([])
        // The router's clock records the delay and does not really sleep it.
        let clock = RouterClock(sleep: { delay in sleeps.withLock { $0.append(delay) }; await Task.yield() },
                                random: { 0.5 })
        let router = try setup.router(clock: clock)
        let report = try await router.send(content: PushContent(title: "x"),
                                           to: [Recipient(tokens: [PushToken(token: androidToken, platform: .android)])],
                                           options: RouterSendOptions(deadline: .seconds(120)))
        #expect(report.delivered == 1)
        #expect(report.outcomes[0].attempts == 2)
        #expect(sleeps.withLock { $0 } == [.seconds(60)])
        #expect(setup.fcm.emulator.requests.filter { $0.target?.value == androidToken }.map(\.status) == [429, 200])
        await router.shutdown()
        try await setup.shutdown()
    }

    @Test func unavailableIsRetriedAfterRetryAfter() async throws {
        let faults = FCMEmulator.Faults(failFirstAttempts: [androidToken: [.code("UNAVAILABLE", retryAfterSeconds: 3)]])
        let setup = try await Self.setup(fcmFaults: faults)
        let sleeps = Mutex<[Duration]>([])
        let clock = RouterClock(sleep: { delay in sleeps.withLock { $0.append(delay) }; await Task.yield() },
                                random: { 0.5 })
        let router = try setup.router(clock: clock)
        let report = try await router.send(content: PushContent(title: "x"),
                                           to: [Recipient(tokens: [PushToken(token: androidToken, platform: .android)])])
        #expect(report.delivered == 1)
        #expect(sleeps.withLock { $0 } == [.seconds(3)])
        await router.shutdown()
        try await setup.shutdown()
    }
}

/// Two FCM instances (two Firebase projects) in one router.
@Suite(.serialized) struct FCMSeveralProjectsTests {
    @Test func eachTokenGoesToItsOwnProject() async throws {
        var emulatorConfiguration = FCMEmulator.Configuration()  // any project id
        try emulatorConfiguration.trust(serviceAccountJSON: FCMPaths.demoAccountJSON)
        let emulator = try FCMEmulator(configuration: emulatorConfiguration)
        try await emulator.start()
        func provider(_ name: String, project: String) throws -> FCMProvider {
            var configuration = try demoConfiguration()
            configuration.projectID = project
            configuration.endpoint = FCMURL(host: "127.0.0.1", port: emulator.port)
            configuration.tokenEndpoint = FCMURL(host: "127.0.0.1", port: emulator.port, path: "/token")
            configuration.additionalTrustRootsPEM = emulator.caCertificatePEM
            return try FCMProvider(name: name, configuration: configuration)
        }
        let router = try NotificationRouter(providers: [try provider("fcm", project: "shop-us"),
                                                        try provider("fcm-eu", project: "shop-eu")],
                                            byPlatform: [.android: "fcm"])
        let report = try await router.send(content: PushContent(title: "x"), to: [Recipient(tokens: [
            PushToken(token: androidToken, platform: .android),
            PushToken(token: androidToken2, platform: .android, provider: "fcm-eu"),
        ])])
        #expect(report.delivered == 2)
        let paths = Dictionary(emulator.deliveredMessages.map { ($0.target?.value ?? "", $0.path) }, uniquingKeysWith: { a, _ in a })
        #expect(paths[androidToken] == "/v1/projects/shop-us/messages:send")
        #expect(paths[androidToken2] == "/v1/projects/shop-eu/messages:send")
        await router.shutdown()
        try await emulator.shutdown()
    }
}
