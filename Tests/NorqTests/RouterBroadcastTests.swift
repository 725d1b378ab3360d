import Crypto
import Foundation
import Norq
import NorqAPNs
import NorqCore
import NorqTemplates
import NorqTesting
import Testing

/// Broadcast channels through the router: routed and reported like tokens, with the same retry and idempotency.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct RouterBroadcastTests {
    static func liveActivityTemplates() throws -> TemplateLibrary {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("norq-broadcast-templates-\(UInt64.random(in: 0...UInt64.max))").path
        try FileManager.default.createDirectory(atPath: directory + "/score", withIntermediateDirectories: true)
        let template = """
            ---
            title: "{{home}} {{homeScore}} - {{awayScore}} {{away}}"
            headers:
              apns-push-type: liveactivity
              apns-priority: 5
            ios:
              event: update
              content-state:
                home: "{{homeScore}}"
                away: "{{awayScore}}"
              stale-date: 1800003600
            ---
            Minute {{minute}}
            """
        try template.write(toFile: directory + "/score/push.md", atomically: true, encoding: .utf8)
        return try TemplateLibrary(directory: directory)
    }

    @Test("a channel recipient is rendered, routed, retried with one apns-request-id, reported and deduplicated")
    func broadcastThroughRouter() async throws {
        let key = P256.Signing.PrivateKey()
        let emulator = try APNsEmulator(configuration: APNsEmulator.Configuration(
            environmentName: "production", teamID: "TEAM123456", keyID: "ABC123DEFG",
            signingPublicKeyPEM: key.publicKey.pemRepresentation))
        try await emulator.start()
        var configuration = APNsConfiguration(
            authentication: .token(keyID: "ABC123DEFG", teamID: "TEAM123456", privateKeyPEM: key.pemRepresentation,
                                   keySource: "test"),
            bundleID: "com.example.app", production: true)
        let endpoint = APNsEndpoint(host: "localhost", port: emulator.port)
        configuration.productionEndpoint = endpoint
        configuration.managementProductionEndpoint = endpoint
        configuration.additionalTrustRootsPEM = emulator.caCertificatePEM
        let provider = try APNsProvider(name: "apns", configuration: configuration,
                                        policy: DeliveryPolicy(retry: RetryPolicy(retries: 2, backoff: .milliseconds(1),
                                                                                  maxBackoff: .milliseconds(2))),
                                        tokenCache: APNsTokenCache())
        let stored = try await provider.createChannel(storagePolicy: .mostRecentMessageStored)
        let noStorage = try await provider.createChannel(storagePolicy: .noMessageStored)
        emulator.setFaults(.init(failFirstAttempts: [stored.id: [.serviceUnavailable]]))

        let router = try NotificationRouter(providers: [provider], templates: try Self.liveActivityTemplates(),
                                            clock: SleepRecorder().clock)
        let to = try Recipient.list(from: try JSONValue(parsing: """
            {"recipients": [
              {"id": "fans", "push": {"channels": [
                {"channel": "\(stored.id)", "provider": "apns", "environment": "production"},
                {"channel": "\(noStorage.id)"},
                {"channel": "AAAAAAAAAAAAAAAAAAAAAA=="}
              ]}}
            ]}
            """))
        let data: JSONValue = ["home": "Lyon", "away": "Nantes", "homeScore": 2, "awayScore": 1, "minute": 77]
        let options = RouterSendOptions(idempotencyKey: "match-77")

        // The dry run shows the exact broadcast request.
        let plans = try router.prepare(template: "score", data: data, to: to, options: options)
        let first = try #require(plans.first?.request)
        #expect(first.path == "/4/broadcasts/apps/com.example.app")
        #expect(first.header("apns-channel-id") == stored.id)
        #expect(first.header("apns-priority") == "5")
        #expect(first.header("apns-request-id") == RequestID.make(idempotencyKey: "match-77", token: "channel:" + stored.id))
        #expect(plans[1].request?.header("apns-expiration") == "0")
        let payload = String(decoding: first.body, as: UTF8.self)
        #expect(payload.contains(#""event":"update""#) && payload.contains(#""content-state":{"home":2,"away":1}"#))
        #expect(payload.contains(#""alert":{"title":"Lyon 2 - 1 Nantes","body":"Minute 77"}"#))

        let report = try await router.send(template: "score", data: data, to: to, options: options)
        #expect(report.outcomes.count == 3)
        #expect(report.outcomes[0].result.kind == "delivered")
        #expect(report.outcomes[0].attempts == 2)
        #expect(report.outcomes[0].target == .channel(ChannelRecipient(channel: stored.id, provider: "apns", environment: .production)))
        #expect(report.outcomes[0].recipientID == "fans")
        #expect(report.outcomes[1].result.kind == "delivered")
        guard case .rejected(let rejected) = report.outcomes[2].result else {
            Issue.record("expected a rejection, got \(report.outcomes[2].result)")
            return
        }
        #expect(rejected.reason == "ChannelNotRegistered" && rejected.status == 400)
        #expect(report.outcomes[2].attempts == 1)
        let ids = emulator.requests.filter { $0.isBroadcast && $0.channelID == stored.id }.map(\.apnsID)
        #expect(ids.count == 2)
        #expect(Set(ids) == [first.header("apns-request-id")])

        let before = emulator.requests.count
        let repeated = try await router.send(template: "score", data: data, to: to, options: options)
        #expect(repeated.duplicates == 3)
        #expect(emulator.requests.count == before)

        await router.shutdown(gracePeriod: .seconds(1))
        try? await emulator.shutdown()
    }
}

/// The example Live Activity templates under `templates/` render to valid Live Activity requests.
@Suite struct LiveActivityTemplateTests {
    static let templates = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("templates").path

    @Test func pushToStartWithChannel() async throws {
        let library = try TemplateLibrary(directory: Self.templates)
        let data: JSONValue = ["channel": "dHN0LXNyY2gtY2hubA==", "match": ["id": "L1-77", "home": "Lyon", "away": "Nantes"],
                               "score": ["home": 0, "away": 0, "minute": 0]]
        let content = try #require(try library.content(template: "live-activity-start", data: data, strict: true))
        let provider = try APNsProvider(name: "apns", configuration: APNsConfiguration(
            authentication: .token(keyID: "ABC123DEFG", teamID: "TEAM123456",
                                   privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation, keySource: "test"),
            bundleID: "com.example.app"), tokenCache: APNsTokenCache())
        let request = try provider.prepare(content, for: ios(hexToken(7)), options: SendOptions(sendTime: 1_800_000_000))
        #expect(request.header("apns-topic") == "com.example.app.push-type.liveactivity")
        let payload = String(decoding: request.body, as: UTF8.self)
        #expect(payload.hasPrefix(#"{"aps":{"timestamp":1800000000,"event":"start","content-state":{"home":0,"away":0,"minute":0},"attributes-type":"MatchAttributes","attributes":{"matchId":"L1-77","home":"Lyon","away":"Nantes"},"input-push-channel":"dHN0LXNyY2gtY2hubA==""#))
        // The update template goes to the channel with the plain bundle id as topic.
        let update = try #require(try library.content(template: "live-activity-update", data: [
            "updated_at": 1_800_000_000, "stale_at": 1_800_000_900, "delivery": ["status": "on_the_way", "eta_minutes": 9],
        ], strict: true))
        let broadcast = try provider.prepare(update, forChannel: ChannelRecipient(channel: "dHN0LXNyY2gtY2hubA=="),
                                             options: SendOptions())
        #expect(broadcast.header("apns-topic") == "com.example.app")
        #expect(String(decoding: broadcast.body, as: UTF8.self).contains(#""event":"update""#))
        await provider.shutdown()
    }
}
