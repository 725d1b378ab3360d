import Crypto
import NorqAPNs
import NorqCore
import NorqTesting
import Testing

/// Channel management and broadcast through two emulators (one per environment) over TLS HTTP/2.
@Suite(.serialized, .timeLimit(.minutes(1))) struct APNsBroadcastEndToEndTests {
    /// Two emulators, one per environment, and one provider whose sandbox endpoints (device, broadcast and
    /// management) point at the first and production endpoints at the second.
    struct Setup {
        let sandbox: APNsEmulator
        let production: APNsEmulator
        let provider: APNsProvider

        func emulator(_ environment: PushEnvironment) -> APNsEmulator { environment == .production ? production : sandbox }
        /// The provider serving `environment` (the same one for both).
        func provider(_ environment: PushEnvironment) -> APNsProvider { provider }

        func close() async {
            await provider.shutdown()
            try? await sandbox.shutdown()
            try? await production.shutdown()
        }
    }

    static func setup(configure: (inout APNsEmulator.Configuration) -> Void = { _ in }) async throws -> Setup {
        let key = P256.Signing.PrivateKey()
        let clock = TestClock(1_800_000_000)
        let sandbox = try await APNsEndToEndTests.makeEmulator(key: key, clock: clock, name: "sandbox", configure: configure)
        let production = try await APNsEndToEndTests.makeEmulator(key: key, clock: clock, name: "production", configure: configure)
        var configuration = Fixtures.tokenConfiguration(key: key)
        configuration.sandboxEndpoint = APNsEndpoint(host: "localhost", port: sandbox.port)
        configuration.productionEndpoint = APNsEndpoint(host: "localhost", port: production.port)
        configuration.managementSandboxEndpoint = APNsEndpoint(host: "localhost", port: sandbox.port)
        configuration.managementProductionEndpoint = APNsEndpoint(host: "localhost", port: production.port)
        configuration.additionalTrustRootsPEM = sandbox.caCertificatePEM + "\n" + production.caCertificatePEM
        let provider = try APNsProvider(name: "apns", configuration: configuration, clock: clock.apnsClock,
                                        tokenCache: APNsTokenCache())
        return Setup(sandbox: sandbox, production: production, provider: provider)
    }

    static func update(_ eta: Int64 = 5) -> PushContent {
        APNsNotification.liveActivityUpdate(contentState: ["eta": .int(eta)]).content
    }

    static func broadcast(_ s: Setup, _ channel: String, _ environment: PushEnvironment, requestID: String? = nil,
                          content: PushContent = update()) async throws -> DeliveryResponse {
        let provider = s.provider(environment)
        let request = try provider.prepare(content, forChannel: ChannelRecipient(channel: channel, environment: environment),
                                           options: SendOptions(requestID: requestID))
        return try await provider.deliver(request, deadline: .now + .seconds(5))
    }

    static func code(_ body: () async throws -> Void) async -> String? {
        do {
            try await body()
            return nil
        } catch let error as NorqError {
            return error.code.rawValue
        } catch {
            return "unexpected \(error)"
        }
    }

    @Test("create, list, read, broadcast to and delete channels in both environments")
    func lifecycleInBothEnvironments() async throws {
        let s = try await Self.setup()
        var created: [PushEnvironment: (stored: String, noStorage: String)] = [:]
        for environment in [PushEnvironment.sandbox, .production] {
            let requestID = "5d3f1a2b-0c4e-4f6a-8b7c-9d0e1f2a3b4c"
            let stored = try await s.provider(environment).createChannel(storagePolicy: .mostRecentMessageStored, environment: environment,
                                                            requestID: requestID.uppercased())
            #expect(stored.status == 201)
            #expect(stored.requestID == requestID)
            #expect(stored.environment == environment)
            let noStorage = try await s.provider(environment).createChannel(storagePolicy: .noMessageStored, environment: environment)
            #expect(noStorage.requestID?.count == 36)
            #expect(stored.id != noStorage.id)
            created[environment] = (stored.id, noStorage.id)

            let list = try await s.provider(environment).listChannels(environment: environment)
            #expect(list.channels == [stored.id, noStorage.id])
            #expect(list.requestID != nil)
            let read = try await s.provider(environment).readChannel(noStorage.id, environment: environment)
            #expect(read.storagePolicy == .noMessageStored)
            #expect(read.pushType == "LiveActivity")
            #expect(read.id == noStorage.id)

            let sent = try await Self.broadcast(s, stored.id, environment, requestID: requestID)
            #expect(sent.status == 200)
            #expect(sent.classification == .delivered)
            #expect(sent.messageID == requestID)
            // The provider knows the no-storage policy and sends apns-expiration 0.
            let zero = try await Self.broadcast(s, noStorage.id, environment)
            #expect(zero.status == 200)
            let records = s.emulator(environment).requests.filter(\.isBroadcast)
            #expect(records.count == 2)
            #expect(records.allSatisfy { $0.path == "/4/broadcasts/apps/com.example.app" && $0.method == "POST" })
            #expect(records.allSatisfy { $0.header("apns-topic") == "com.example.app" && $0.header("apns-push-type") == "liveactivity" })
            #expect(records.last?.header("apns-expiration") == "0")
            #expect(records.first?.channelID == stored.id)
            #expect(s.emulator(environment).broadcastCount(channelID: stored.id) == 1)
        }
        // Channels are environment-scoped: a sandbox channel is unknown in production.
        guard let sandbox = created[.sandbox], let production = created[.production] else { return }
        #expect(sandbox.stored != production.stored)
        let crossed = try await Self.broadcast(s, sandbox.stored, .production)
        #expect(crossed.status == 400 && crossed.reason == "ChannelNotRegistered" && crossed.classification == .permanent)
        #expect(await Self.code { _ = try await s.provider(.sandbox).readChannel(production.stored, environment: .sandbox) }
                == "apns/channel-not-registered")
        #expect(s.sandbox.channelIDs(bundleID: "com.example.app") == [sandbox.stored, sandbox.noStorage])

        for (environment, ids) in [(PushEnvironment.sandbox, sandbox), (.production, production)] {
            let deleted = try await s.provider(environment).deleteChannel(ids.stored, environment: environment)
            #expect(deleted.requestID != nil)
            #expect(try await s.provider(environment).listChannels(environment: environment).channels == [ids.noStorage])
            #expect(await Self.code { _ = try await s.provider(environment).readChannel(ids.stored, environment: environment) }
                    == "apns/channel-not-registered")
            #expect(await Self.code { try await s.provider(environment).deleteChannel(ids.stored, environment: environment) }
                    == "apns/channel-not-registered")
            try await s.provider(environment).deleteChannel(ids.noStorage, environment: environment)
            #expect(try await s.provider(environment).listChannels(environment: environment).channels.isEmpty)
        }
        await s.close()
    }

    /// Sends a prepared request with edits, as a client that skips Norq's checks would.
    static func raw(_ s: Setup, _ request: PreparedRequest, edit: (inout PreparedRequest) -> Void) async throws -> DeliveryResponse {
        var request = request
        edit(&request)
        return try await s.provider.deliver(request, deadline: .now + .seconds(5))
    }

    static func set(_ request: inout PreparedRequest, _ name: String, _ value: String?) {
        request.headers.removeAll { $0.name == name }
        if let value { request.headers.append(HTTPHeader(name, value)) }
    }

    @Test("every broadcast and channel error reason of the emulator")
    func errorReasons() async throws {
        let s = try await Self.setup { $0.maxChannelsPerApp = 3; $0.bundleIDs = ["com.example.app"] }
        let channel = try await s.provider.createChannel(storagePolicy: .noMessageStored, environment: .sandbox)
        let good = try s.provider.prepare(Self.update(), forChannel: ChannelRecipient(channel: channel.id), options: SendOptions())
        var reasons: [String: String] = [:]
        func expect(_ reason: String, status: Int = 400, _ response: DeliveryResponse, sourceLocation: Testing.SourceLocation = #_sourceLocation) {
            #expect(response.reason == reason, sourceLocation: sourceLocation)
            #expect(response.status == status, sourceLocation: sourceLocation)
            #expect(response.classification == APNsResponseTable.entry(for: reason)?.classification, sourceLocation: sourceLocation)
            #expect(response.header("apns-request-id") != nil, sourceLocation: sourceLocation)
            reasons[reason] = APNsResponseTable.code(status: response.status, reason: response.reason)?.rawValue
        }
        // Broadcast send.
        expect("MissingChannelId", try await Self.raw(s, good) { Self.set(&$0, "apns-channel-id", nil) })
        expect("BadChannelId", try await Self.raw(s, good) { Self.set(&$0, "apns-channel-id", "abc") })
        expect("ChannelNotRegistered", try await Self.raw(s, good) { Self.set(&$0, "apns-channel-id", "AAAAAAAAAAAAAAAAAAAAAA==") })
        expect("MissingPushType", try await Self.raw(s, good) { Self.set(&$0, "apns-push-type", nil) })
        expect("InvalidPushType", try await Self.raw(s, good) { Self.set(&$0, "apns-push-type", "alert") })
        expect("TopicDisallowed", try await Self.raw(s, good) { Self.set(&$0, "apns-topic", "com.example.app.push-type.liveactivity") })
        expect("TopicMismatch", status: 403, try await Self.raw(s, good) { Self.set(&$0, "apns-topic", "com.example.other") })
        expect("BadPriority", try await Self.raw(s, good) { Self.set(&$0, "apns-priority", "7") })
        expect("BadExpirationDate", try await Self.raw(s, good) { Self.set(&$0, "apns-expiration", "1900000000") })
        expect("BadExpirationDate", try await Self.raw(s, good) { Self.set(&$0, "apns-expiration", "tomorrow") })
        expect("BadMessageId", try await Self.raw(s, good) { Self.set(&$0, "apns-request-id", "not-a-uuid") })
        expect("DuplicateHeaders", try await Self.raw(s, good) { $0.headers.append(HTTPHeader("apns-priority", "5")) })
        expect("PayloadEmpty", try await Self.raw(s, good) { $0.body = [] })
        expect("PayloadTooLarge", status: 413, try await Self.raw(s, good) { $0.body = Array(("{\"aps\":{\"event\":\"update\",\"timestamp\":1},\"x\":\"" + String(repeating: "x", count: 5200) + "\"}").utf8) })
        expect("BadRequestPayload", try await Self.raw(s, good) { $0.body = Array("[1,2]".utf8) })
        expect("BadRequestPayload", try await Self.raw(s, good) { $0.body = Array(#"{"aps":{"alert":"hi"}}"#.utf8) })
        expect("MethodNotAllowed", status: 405, try await Self.raw(s, good) { $0.method = "GET" })
        expect("BadPath", status: 404, try await Self.raw(s, good) { $0.path = "/4/broadcasts/apps/" })
        expect("BadPath", status: 404, try await Self.raw(s, good) { $0.path = "/4/broadcast/apps/com.example.app" })  // singular
        expect("TopicDisallowed", try await Self.raw(s, good) { $0.path = "/4/broadcasts/apps/com.unknown.app" })
        // Channel management.
        let create = try s.provider.prepareChannelRequest(.create(.mostRecentMessageStored))
        expect("MissingChannelQueueSize", try await Self.raw(s, create) { $0.body = Array(#"{"push-type":"LiveActivity"}"#.utf8) })
        expect("BadRequestParams", try await Self.raw(s, create) { $0.body = Array(#"{"message-storage-policy":7,"push-type":"LiveActivity"}"#.utf8) })
        expect("MissingPushType", try await Self.raw(s, create) { $0.body = Array(#"{"message-storage-policy":1}"#.utf8) })
        expect("InvalidPushType", try await Self.raw(s, create) { $0.body = Array(#"{"message-storage-policy":1,"push-type":"Alert"}"#.utf8) })
        expect("BadRequestPayload", try await Self.raw(s, create) { $0.body = Array("not json".utf8) })
        expect("MethodNotAllowed", status: 405, try await Self.raw(s, create) { $0.method = "PUT" })
        expect("BadPath", status: 404, try await Self.raw(s, create) { $0.path = "/1/apps/com.example.app/nothing" })
        let read = try s.provider.prepareChannelRequest(.read(channelID: channel.id))
        expect("MissingChannelId", try await Self.raw(s, read) { Self.set(&$0, "apns-channel-id", nil) })
        expect("BadChannelId", try await Self.raw(s, read) { Self.set(&$0, "apns-channel-id", "!!!!") })
        // The 10,000-channel limit (3 here): the fourth channel fails, through the typed API.
        _ = try await s.provider.createChannel(environment: .sandbox)
        _ = try await s.provider.createChannel(environment: .sandbox)
        #expect(await Self.code { _ = try await s.provider.createChannel(environment: .sandbox) } == "apns/cannot-create-channel-config")
        #expect(try await s.provider.createChannel(environment: .production).status == 201)  // the limit is per environment
        // The capability switched off.
        s.sandbox.setBroadcastEnabled(false)
        expect("FeatureNotEnabled", try await Self.raw(s, good) { _ in })
        #expect(await Self.code { _ = try await s.provider.listChannels(environment: .sandbox) } == "apns/feature-not-enabled")
        s.sandbox.setBroadcastEnabled(nil)
        #expect(try await Self.raw(s, good) { _ in }.status == 200)
        // Every rejection maps to its documented apns/<reason> code.
        for (reason, code) in reasons {
            #expect(code.hasPrefix("apns/") && code != "apns/unknown-reason", "\(reason)")
        }
        #expect(Set(reasons.keys) == [
            "MissingChannelId", "BadChannelId", "ChannelNotRegistered", "MissingPushType", "InvalidPushType",
            "TopicDisallowed", "TopicMismatch", "BadPriority", "BadExpirationDate", "BadMessageId", "DuplicateHeaders",
            "PayloadEmpty", "PayloadTooLarge", "BadRequestPayload", "MethodNotAllowed", "BadPath",
            "MissingChannelQueueSize", "BadRequestParams", "FeatureNotEnabled",
        ])
        await s.close()
    }

    @Test("FeatureNotEnabled from the configuration flag, for management and broadcast")
    func featureFlag() async throws {
        let s = try await Self.setup { $0.broadcastEnabled = false }
        #expect(await Self.code { _ = try await s.provider.createChannel() } == "apns/feature-not-enabled")
        let response = try await Self.broadcast(s, "AAAAAAAAAAAAAAAAAAAAAA==", .production)
        #expect(response.reason == "FeatureNotEnabled")
        s.production.setBroadcastEnabled(true)
        // Faults reach management too: a 503 is thrown with its code; an answer APNs never gives is reported.
        s.production.setFaults(.init(failNextRequests: [.serviceUnavailable, .init(status: 200, reason: "Surprise")]))
        #expect(await Self.code { _ = try await s.provider.createChannel(environment: .production) } == "apns/service-unavailable")
        #expect(await Self.code { _ = try await s.provider.createChannel(environment: .production) }
                == "apns/unexpected-channel-response")
        #expect(try await s.provider.createChannel(environment: .production).status == 201)
        await s.close()
    }

    @Test("the 10,000-channel default limit of the emulator")
    func defaultLimit() async throws {
        let configuration = APNsEmulator.Configuration()
        #expect(configuration.maxChannelsPerApp == 10_000)
        #expect(configuration.broadcastEnabled)
    }
}
