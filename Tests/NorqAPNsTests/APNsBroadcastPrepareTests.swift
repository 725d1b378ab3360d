import Foundation
import NorqAPNs
import NorqCore
import Testing

/// Broadcast send and channel-management requests, built without I/O.
@Suite struct APNsBroadcastPrepareTests {
    static let channel = "dHN0LXNyY2gtY2hubA=="
    static let requestID = "0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d"

    static func update(_ state: JSONValue = ["score": "2-1"]) -> PushContent {
        APNsNotification.liveActivityUpdate(contentState: state).content
    }

    @Test func broadcastRequestShape() throws {
        let provider = try Fixtures.provider()
        let request = try provider.prepare(Self.update(), forChannel: ChannelRecipient(channel: Self.channel),
                                           options: SendOptions(requestID: Self.requestID.uppercased(), sendTime: 1_800_000_000))
        #expect(request.method == "POST")
        #expect(request.path == "/4/broadcasts/apps/com.example.app")
        #expect(request.authority == "api.sandbox.push.apple.com")
        #expect(request.environment == .sandbox)
        #expect(request.header("apns-channel-id") == Self.channel)
        #expect(request.header("apns-push-type") == "liveactivity")
        #expect(request.header("apns-topic") == "com.example.app")
        #expect(request.header("apns-priority") == "10")
        #expect(request.header("apns-request-id") == Self.requestID)
        #expect(request.header("apns-id") == nil)
        #expect(request.header("apns-expiration") == nil)
        #expect(request.header("authorization")?.hasPrefix("bearer ") == true)
        #expect(request.displayHeaders.first { $0.name == "authorization" }?.value.contains("redacted") == true)
        #expect(request.requestID == Self.requestID)
        #expect(request.payloadLimit == 5120)
        let body = String(decoding: request.body, as: UTF8.self)
        #expect(body == #"{"aps":{"timestamp":1800000000,"event":"update","content-state":{"score":"2-1"}}}"#)
        guard case .channel(let target) = request.target else {
            Issue.record("target is not a channel")
            return
        }
        #expect(target.channel == Self.channel && target.environment == .sandbox)
    }

    @Test func environmentAndBroadcastEndpoint() throws {
        var configuration = Fixtures.tokenConfiguration()
        let production = try Fixtures.provider(configuration).prepare(
            Self.update(), forChannel: ChannelRecipient(channel: Self.channel, environment: .production), options: SendOptions())
        #expect(production.authority == "api.push.apple.com")
        #expect(production.environment == .production)
        configuration.broadcastProductionEndpoint = APNsEndpoint(host: "api-broadcast.push.apple.com")
        configuration.broadcastSandboxEndpoint = APNsEndpoint(host: "127.0.0.1", port: 8443)
        let provider = try Fixtures.provider(configuration)
        #expect(try provider.prepare(Self.update(), forChannel: ChannelRecipient(channel: Self.channel, environment: .production),
                                     options: SendOptions()).authority == "api-broadcast.push.apple.com")
        #expect(try provider.prepare(Self.update(), forChannel: ChannelRecipient(channel: Self.channel),
                                     options: SendOptions(environment: .sandbox)).authority == "127.0.0.1:8443")
    }

    @Test func broadcastValidation() throws {
        let provider = try Fixtures.provider()
        let channel = ChannelRecipient(channel: Self.channel)
        #expect(errorCode { _ = try provider.prepare(PushContent(title: "Hi"), forChannel: channel, options: SendOptions()) }
                == "apns/broadcast-requires-live-activity")
        for bad in ["", "not a channel!", String(repeating: "A", count: 300), "ab=c"] {
            #expect(errorCode { _ = try provider.prepare(Self.update(), forChannel: ChannelRecipient(channel: bad),
                                                         options: SendOptions()) } == "apns/invalid-channel-id", "\(bad)")
        }
        #expect(errorCode { _ = try provider.prepare(Self.update(), forChannel: channel, options: SendOptions(priority: 7)) }
                == "apns/bad-priority")
        #expect(errorCode { _ = try provider.prepare(Self.update(), forChannel: channel, options: SendOptions(requestID: "nope")) }
                == "apns/bad-message-id")
        #expect(errorCode { _ = try provider.prepare(Self.update(), forChannel: channel,
                                                     options: SendOptions(expiration: .at(epochSeconds: -5))) } == "apns/bad-expiration-date")
        // Between the 4096-byte device limit and the 5120-byte broadcast limit: accepted.
        let medium = Self.update(["blob": .string(String(repeating: "x", count: 4500))])
        let request = try provider.prepare(medium, forChannel: channel, options: SendOptions())
        #expect(request.body.count > 4096 && request.body.count <= 5120)
        let large = Self.update(["blob": .string(String(repeating: "x", count: 5200))])
        #expect(errorCode { _ = try provider.prepare(large, forChannel: channel, options: SendOptions()) } == "apns/payload-too-large")
    }

    @Test func noStorageChannelsNeedZeroExpiration() throws {
        let provider = try Fixtures.provider()
        let channel = ChannelRecipient(channel: Self.channel, environment: .production)
        let stored = try provider.prepare(Self.update(), forChannel: channel, options: SendOptions(expiration: .at(epochSeconds: 1_900_000_000)))
        #expect(stored.header("apns-expiration") == "1900000000")
        provider.channelPolicies.remember(Self.channel, environment: .production, policy: .noMessageStored)
        #expect(try provider.prepare(Self.update(), forChannel: channel, options: SendOptions()).header("apns-expiration") == "0")
        #expect(errorCode { _ = try provider.prepare(Self.update(), forChannel: channel,
                                                     options: SendOptions(expiration: .at(epochSeconds: 1_900_000_000))) } == "apns/bad-expiration-date")
        // The same id in the other environment is another channel.
        #expect(try provider.prepare(Self.update(), forChannel: ChannelRecipient(channel: Self.channel, environment: .sandbox),
                                     options: SendOptions()).header("apns-expiration") == nil)
        provider.channelPolicies.remember(Self.channel, environment: .production, policy: nil)
        #expect(try provider.prepare(Self.update(), forChannel: channel, options: SendOptions()).header("apns-expiration") == nil)
    }

    @Test func managementRequests() throws {
        let provider = try Fixtures.provider()
        let create = try provider.prepareChannelRequest(.create(.noMessageStored), requestID: Self.requestID)
        #expect(create.method == "POST")
        #expect(create.url == "https://api-manage-broadcast.sandbox.push.apple.com:2195/1/apps/com.example.app/channels")
        #expect(String(decoding: create.body, as: UTF8.self) == #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#)
        #expect(create.header("apns-request-id") == Self.requestID)
        #expect(create.header("authorization")?.hasPrefix("bearer ") == true)
        let read = try provider.prepareChannelRequest(.read(channelID: Self.channel), environment: .production)
        #expect(read.method == "GET")
        #expect(read.url == "https://api-manage-broadcast.push.apple.com:2196/1/apps/com.example.app/channels")
        #expect(read.header("apns-channel-id") == Self.channel)
        #expect(read.body.isEmpty)
        #expect(read.header("apns-request-id").map { $0.count == 36 && $0 == $0.lowercased() } == true)
        let delete = try provider.prepareChannelRequest(.delete(channelID: Self.channel))
        #expect(delete.method == "DELETE" && delete.path == "/1/apps/com.example.app/channels")
        let list = try provider.prepareChannelRequest(.list, environment: .production)
        #expect(list.method == "GET" && list.path == "/1/apps/com.example.app/all-channels")
        #expect(list.header("apns-channel-id") == nil)
        #expect(errorCode { _ = try provider.prepareChannelRequest(.create(APNsChannelStoragePolicy(rawValue: 2))) }
                == "apns/invalid-storage-policy")
        #expect(errorCode { _ = try provider.prepareChannelRequest(.read(channelID: "")) } == "apns/invalid-channel-id")
        #expect(errorCode { _ = try provider.prepareChannelRequest(.list, requestID: "1234") } == "apns/bad-message-id")
    }

    @Test func storagePolicyParsing() throws {
        #expect(try APNsChannelStoragePolicy.parse("0") == .noMessageStored)
        #expect(try APNsChannelStoragePolicy.parse("most-recent") == .mostRecentMessageStored)
        #expect(try APNsChannelStoragePolicy.parse("NONE") == .noMessageStored)
        #expect(errorCode { _ = try APNsChannelStoragePolicy.parse("forever") } == "apns/invalid-storage-policy")
    }

    @Test func channelPolicyCacheIsBounded() {
        let cache = APNsChannelPolicyCache(capacity: 10)
        for i in 0..<25 { cache.remember("c\(i)", environment: .sandbox, policy: .noMessageStored) }
        let known = (0..<25).filter { cache.policy(of: "c\($0)", environment: .sandbox) != nil }.count
        #expect(known <= 10 && known >= 1)
        #expect(cache.policy(of: "c24", environment: .sandbox) == .noMessageStored)
        #expect(cache.policy(of: "c24", environment: .production) == nil)
    }

    @Test func broadcastEndpointConfigKeys() throws {
        let key = Fixtures.tokenConfiguration()
        guard case .token(_, _, let pem, _) = key.authentication else { return }
        func parse(_ extra: [(String, String)]) throws -> APNsConfiguration {
            var pairs: [(key: ConfigNode, value: ConfigNode)] = [
                (ConfigNode(.scalar("keyId", quoted: false)), ConfigNode(.scalar(Fixtures.keyID, quoted: false))),
                (ConfigNode(.scalar("teamId", quoted: false)), ConfigNode(.scalar(Fixtures.teamID, quoted: false))),
                (ConfigNode(.scalar("keyPem", quoted: false)), ConfigNode(.scalar(pem, quoted: true))),
                (ConfigNode(.scalar("bundleId", quoted: false)), ConfigNode(.scalar(Fixtures.bundleID, quoted: false))),
            ]
            for (k, v) in extra { pairs.append((ConfigNode(.scalar(k, quoted: false)), ConfigNode(.scalar(v, quoted: true)))) }
            return try APNsConfiguration.parse(ConfigNode(.mapping(pairs)),
                                               context: ProviderConfigurationContext(instanceName: "apns", baseDirectory: "."))
        }
        let plain = try parse([])
        #expect(plain.broadcastEndpoint(for: .sandbox) == .sandbox)
        #expect(plain.broadcastEndpoint(for: .production) == .production)
        #expect(plain.managementEndpoint(for: .production) == .managementProduction)
        let both = try parse([("broadcastEndpoint", "https://api-broadcast.push.apple.com"),
                              ("managementEndpoint", "https://127.0.0.1:9000")])
        #expect(both.broadcastEndpoint(for: .sandbox) == APNsEndpoint(host: "api-broadcast.push.apple.com"))
        #expect(both.managementEndpoint(for: .sandbox) == APNsEndpoint(host: "127.0.0.1", port: 9000))
        let shown = Dictionary(uniqueKeysWithValues: both.summary.map { ($0.key, $0.value) })
        #expect(shown["broadcastProductionEndpoint"] == "https://api-broadcast.push.apple.com:443")
        #expect(shown["managementSandboxEndpoint"] == "https://127.0.0.1:9000")
        #expect(plain.summary.allSatisfy { !$0.key.hasPrefix("broadcast") && !$0.key.hasPrefix("management") })
        let one = try parse([("broadcastSandboxEndpoint", "https://api-broadcast.sandbox.push.apple.com:443")])
        #expect(one.broadcastEndpoint(for: .sandbox).host == "api-broadcast.sandbox.push.apple.com")
        #expect(one.broadcastEndpoint(for: .production) == .production)
        #expect(errorCode { _ = try parse([("broadcastEndpoint", "ftp://x")]) } == "config/invalid-value")
    }
}
