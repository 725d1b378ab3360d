import Foundation
import NIOCore
import NorqTesting
import Synchronization
import Testing

/// A settable clock for the emulator.
final class TestClock: Sendable {
    let value: Mutex<Int64>
    init(_ start: Int64 = 1_700_000_000) { value = Mutex(start) }
    var now: Int64 { value.withLock { $0 } }
    func advance(_ seconds: Int64) { value.withLock { $0 += seconds } }
}

let token64 = String(repeating: "ab", count: 32)
let otherToken = String(repeating: "cd", count: 32)
let alertBody = Array(#"{"aps":{"alert":"hi"}}"#.utf8)

struct Fixture {
    let signer = TestSigner()
    let clock = TestClock()
    let emulator: APNsEmulator
    /// One JWT for the whole test (ES256 signatures are randomised, so signing again makes a new token).
    let jwt: String

    init(bundleIDs: Set<String>? = ["com.example.app"], faults: APNsEmulator.Faults = .init(),
         requireClientCertificate: Bool = false) throws {
        let clock = self.clock
        emulator = try APNsEmulator(configuration: .init(
            environmentName: "sandbox", teamID: signer.teamID, keyID: signer.keyID,
            signingPublicKeyPEM: signer.publicKeyPEM, bundleIDs: bundleIDs,
            requireClientCertificate: requireClientCertificate, maxConcurrentStreams: 100,
            now: { clock.now }, faults: faults))
        jwt = try signer.token(issuedAt: clock.now)
    }

    func headers(topic: String = "com.example.app", pushType: String = "alert", extra: [(String, String)] = [],
                 jwt: String? = nil) throws -> [(String, String)] {
        let bearer = jwt ?? self.jwt
        return [("authorization", "bearer \(bearer)"), ("apns-topic", topic), ("apns-push-type", pushType)] + extra
    }

    func reason(_ r: TestResponse) -> String? {
        guard let obj = try? JSONSerialization.jsonObject(with: Data(r.body.utf8)) as? [String: Any] else { return nil }
        return obj["reason"] as? String
    }
}

@Suite("APNs emulator over TLS HTTP/2")
struct APNsEmulatorTests {
    @Test("a valid push gets 200 with the request's apns-id lowercased and an apns-unique-id, and is recorded")
    func success() async throws {
        let f = try Fixture()
        try await f.emulator.start()
        #expect(f.emulator.port > 0)
        #expect(f.emulator.endpoint == "https://127.0.0.1:\(f.emulator.port)")
        let client = try await TestH2Client.connect(to: f.emulator)
        let id = "0A1B2C3D-0000-4000-8000-00000000ABCD"
        let r = try await client.send(path: "/3/device/\(token64)",
                                      headers: f.headers(extra: [("apns-id", id), ("apns-priority", "10")]), body: alertBody)
        #expect(r.status == 200)
        #expect(r.headers["apns-id"] == id.lowercased())
        #expect(r.headers["apns-unique-id"]?.count == 36)
        #expect(r.body.isEmpty)
        let generated = try await client.send(path: "/3/device/\(token64)", headers: f.headers(), body: alertBody)
        #expect(generated.status == 200)
        #expect(generated.headers["apns-id"]?.count == 36)
        #expect(generated.headers["apns-unique-id"] != r.headers["apns-unique-id"])
        let records = f.emulator.requests
        #expect(records.count == 2)
        #expect(records[0].method == "POST")
        #expect(records[0].deviceToken == token64)
        #expect(records[0].header("apns-topic") == "com.example.app")
        #expect(records[0].header("apns-priority") == "10")
        #expect(records[0].body == alertBody)
        #expect(records[0].status == 200)
        #expect(records[0].environmentName == "sandbox")
        #expect(records[0].connectionID == 1)
        #expect(records[0].streamID == 1)
        #expect(records[1].streamID == 3)
        #expect(f.emulator.connectionCount == 1)
        f.emulator.resetRecords()
        #expect(f.emulator.requests.isEmpty)
        await client.close()
        try await f.emulator.shutdown()
    }

    @Test("JWT checks: missing, bad signature, wrong team, unknown kid, expired, future, too many updates")
    func jwt() async throws {
        let f = try Fixture()
        try await f.emulator.start()
        let client = try await TestH2Client.connect(to: f.emulator)
        let path = "/3/device/\(token64)"
        let missing = try await client.send(path: path, headers: [("apns-topic", "com.example.app")], body: alertBody)
        #expect(missing.status == 403)
        #expect(f.reason(missing) == "MissingProviderToken")
        #expect(missing.headers["apns-id"]?.count == 36)

        let otherKey = TestSigner()
        let forged = try f.signer.token(issuedAt: f.clock.now, signer: otherKey.key)
        let bad = try await client.send(path: path, headers: f.headers(jwt: forged), body: alertBody)
        #expect(bad.status == 403)
        #expect(f.reason(bad) == "InvalidProviderToken")
        let wrongTeam = try await client.send(
            path: path, headers: f.headers(jwt: f.signer.token(issuedAt: f.clock.now, teamID: "OTHER")), body: alertBody)
        #expect(f.reason(wrongTeam) == "InvalidProviderToken")
        let wrongKid = try await client.send(
            path: path, headers: f.headers(jwt: f.signer.token(issuedAt: f.clock.now, keyID: "NOPE")), body: alertBody)
        #expect(f.reason(wrongKid) == "InvalidProviderToken")
        let future = try await client.send(
            path: path, headers: f.headers(jwt: f.signer.token(issuedAt: f.clock.now + 3600)), body: alertBody)
        #expect(f.reason(future) == "InvalidProviderToken")
        let expired = try await client.send(
            path: path, headers: f.headers(jwt: f.signer.token(issuedAt: f.clock.now - 3601)), body: alertBody)
        #expect(expired.status == 403)
        #expect(f.reason(expired) == "ExpiredProviderToken")

        // A good token, reused: verified once, accepted until it is an hour old.
        let good = try f.signer.token(issuedAt: f.clock.now)
        #expect(try await client.send(path: path, headers: f.headers(jwt: good), body: alertBody).status == 200)
        f.clock.advance(60)
        #expect(try await client.send(path: path, headers: f.headers(jwt: good), body: alertBody).status == 200)
        // A new token one minute later on the same connection: too soon.
        let newer = try f.signer.token(issuedAt: f.clock.now)
        let tooSoon = try await client.send(path: path, headers: f.headers(jwt: newer), body: alertBody)
        #expect(tooSoon.status == 429)
        #expect(f.reason(tooSoon) == "TooManyProviderTokenUpdates")
        // A new connection may use it at once.
        let second = try await TestH2Client.connect(to: f.emulator)
        #expect(try await second.send(path: path, headers: f.headers(jwt: newer), body: alertBody).status == 200)
        // After 20 minutes the first connection may switch.
        f.clock.advance(20 * 60)
        #expect(try await client.send(path: path, headers: f.headers(jwt: newer), body: alertBody).status == 200)
        // The old token expires an hour after iat.
        f.clock.advance(40 * 60)
        let stale = try await second.send(path: path, headers: f.headers(jwt: good), body: alertBody)
        #expect(f.reason(stale) == "ExpiredProviderToken")
        await client.close()
        await second.close()
        try await f.emulator.shutdown()
    }

    @Test("header, path, topic and payload checks answer APNs' reasons", arguments: [
        (label: "background with priority 10", token: token64, method: "POST", type: "background", topic: "com.example.app",
         extra: [("apns-priority", "10")], size: 0, status: 400, reason: "BadPriority"),
        ("priority 7", token64, "POST", "alert", "com.example.app", [("apns-priority", "7")], 0, 400, "BadPriority"),
        ("voip to the bare topic", token64, "POST", "voip", "com.example.app", [], 0, 400, "DeviceTokenNotForTopic"),
        ("alert to the .voip topic", token64, "POST", "alert", "com.example.app.voip", [], 0, 400, "DeviceTokenNotForTopic"),
        ("liveactivity without its suffix", token64, "POST", "liveactivity", "com.example.app.voip", [], 0, 400,
         "DeviceTokenNotForTopic"),
        ("unknown bundle", token64, "POST", "alert", "com.other.app", [], 0, 400, "TopicDisallowed"),
        ("unknown push type", token64, "POST", "shout", "com.example.app", [], 0, 400, "InvalidPushType"),
        ("collapse id of 65 bytes", token64, "POST", "alert", "com.example.app",
         [("apns-collapse-id", String(repeating: "x", count: 65))], 0, 400, "BadCollapseId"),
        ("apns-id not a UUID", token64, "POST", "alert", "com.example.app", [("apns-id", "nope")], 0, 400, "BadMessageId"),
        ("expiration not a number", token64, "POST", "alert", "com.example.app", [("apns-expiration", "soon")], 0, 400,
         "BadExpirationDate"),
        ("duplicate topic", token64, "POST", "alert", "com.example.app", [("apns-topic", "com.example.app")], 0, 400,
         "DuplicateHeaders"),
        ("short token", "abcd", "POST", "alert", "com.example.app", [], 0, 400, "BadDeviceToken"),
        ("non-hex token", String(repeating: "zz", count: 32), "POST", "alert", "com.example.app", [], 0, 400, "BadDeviceToken"),
        ("GET", token64, "GET", "alert", "com.example.app", [], 0, 405, "MethodNotAllowed"),
        ("alert payload of 4097 bytes", token64, "POST", "alert", "com.example.app", [], 4097, 413, "PayloadTooLarge"),
        ("voip payload of 5121 bytes", token64, "POST", "voip", "com.example.app.voip", [], 5121, 413, "PayloadTooLarge"),
        // Above the 64 KiB a stream's body is kept at most: dropped while it arrives, still answered 413.
        ("body of 100,000 bytes", token64, "POST", "alert", "com.example.app", [], 100_000, 413, "PayloadTooLarge"),
        ("empty payload", token64, "POST", "alert", "com.example.app", [], -1, 400, "PayloadEmpty"),
        ("payload not JSON", token64, "POST", "alert", "com.example.app", [], -2, 400, "BadPayload"),
    ] as [(label: String, token: String, method: String, type: String, topic: String, extra: [(String, String)],
           size: Int, status: Int, reason: String)])
    func rejections(_ c: (label: String, token: String, method: String, type: String, topic: String,
                          extra: [(String, String)], size: Int, status: Int, reason: String)) async throws {
        let f = try Fixture()
        try await f.emulator.start()
        let client = try await TestH2Client.connect(to: f.emulator)
        let body: [UInt8]
        switch c.size {
        case -1: body = []
        case -2: body = Array(#"{"aps":"#.utf8)
        case 0: body = alertBody
        default: body = Self.payload(size: c.size)
        }
        let r = try await client.send(method: c.method, path: "/3/device/\(c.token)",
                                      headers: f.headers(topic: c.topic, pushType: c.type, extra: c.extra), body: body)
        #expect(r.status == c.status, "\(c.label)")
        #expect(f.reason(r) == c.reason, "\(c.label)")
        #expect(f.emulator.requests.first?.status == c.status)
        #expect(f.emulator.requests.first?.reason == c.reason)
        await client.close()
        try await f.emulator.shutdown()
    }

    @Test("accepted edge cases: every push type with its suffix, 4096-byte alert, 5120-byte voip, expiration 0")
    func accepted() async throws {
        let f = try Fixture()
        try await f.emulator.start()
        let client = try await TestH2Client.connect(to: f.emulator)
        let cases: [(String, String, [(String, String)], [UInt8])] = [
            ("alert", "", [("apns-expiration", "0"), ("apns-priority", "5")], Self.payload(size: 4096)),
            ("background", "", [("apns-priority", "5")], Array(#"{"aps":{"content-available":1}}"#.utf8)),
            ("voip", ".voip", [], Self.payload(size: 5120)),
            ("complication", ".complication", [], alertBody),
            ("fileprovider", ".pushkit.fileprovider", [], alertBody),
            ("location", ".location-query", [], alertBody),
            ("liveactivity", ".push-type.liveactivity", [], alertBody),
            ("pushtotalk", ".voip-ptt", [("apns-priority", "10"), ("apns-expiration", "0")], alertBody),
            ("widgets", ".push-type.widgets", [], Array(#"{"aps":{"content-changed":true}}"#.utf8)),
            ("controls", ".push-type.controls", [], Array(#"{"aps":{"content-changed":true}}"#.utf8)),
            ("alert", "", [("apns-collapse-id", String(repeating: "c", count: 64))], alertBody),
        ]
        let results = await client.sendAll(try cases.map { c in
            ("POST", "/3/device/\(token64)", try f.headers(topic: "com.example.app" + c.1, pushType: c.0, extra: c.2), c.3)
        })
        for (c, r) in zip(cases, results) {
            let response = try r.get()
            #expect(response.status == 200, "\(c.0): \(response.body)")
        }
        await client.close()
        try await f.emulator.shutdown()
    }

    @Test("410 Unregistered carries the timestamp in milliseconds; scripted failures carry retry-after")
    func faults() async throws {
        var faults = APNsEmulator.Faults()
        faults.unregisteredTokens = [token64: 1_700_000_000_123]
        faults.failFirstAttempts = [otherToken: [.serviceUnavailable, .init(status: 429, reason: "TooManyRequests")]]
        faults.retryAfterSeconds = 7
        let f = try Fixture(faults: faults)
        try await f.emulator.start()
        let client = try await TestH2Client.connect(to: f.emulator)
        let gone = try await client.send(path: "/3/device/\(token64)", headers: f.headers(), body: alertBody)
        #expect(gone.status == 410)
        let obj = try JSONSerialization.jsonObject(with: Data(gone.body.utf8)) as? [String: Any]
        #expect(obj?["reason"] as? String == "Unregistered")
        #expect((obj?["timestamp"] as? NSNumber)?.int64Value == 1_700_000_000_123)

        let first = try await client.send(path: "/3/device/\(otherToken)", headers: f.headers(), body: alertBody)
        #expect(first.status == 503)
        #expect(f.reason(first) == "ServiceUnavailable")
        #expect(first.headers["retry-after"] == "7")
        let second = try await client.send(path: "/3/device/\(otherToken)", headers: f.headers(), body: alertBody)
        #expect(second.status == 429)
        let third = try await client.send(path: "/3/device/\(otherToken)", headers: f.headers(), body: alertBody)
        #expect(third.status == 200)

        // Faults change at runtime: a burst, then a silent token next to a normal one.
        var burst = APNsEmulator.Faults()
        burst.failNextRequests = [.internalServerError]
        burst.silentTokens = [otherToken]
        f.emulator.setFaults(burst)
        let results = await client.sendAll([
            ("POST", "/3/device/\(token64)", try f.headers(), alertBody),
            ("POST", "/3/device/\(token64)", try f.headers(), alertBody),
        ], timeout: .seconds(8))
        // The burst fails the first request the emulator receives; the test client may open the two streams in
        // either order, so compare without order.
        #expect(results.compactMap { (try? $0.get())?.status }.sorted() == [200, 500])
        let silent = await client.sendAll([("POST", "/3/device/\(otherToken)", try f.headers(), alertBody)],
                                          timeout: .milliseconds(500))
        #expect((try? silent[0].get()) == nil)
        // A normal request on the same connection is still answered while the silent stream stays open.
        #expect(try await client.send(path: "/3/device/\(token64)", headers: f.headers(), body: alertBody).status == 200)
        await client.close()
        try await f.emulator.shutdown()
    }

    @Test("GOAWAY after N streams: streams up to N answered, later ones refused, connection closed")
    func goAway() async throws {
        var faults = APNsEmulator.Faults()
        faults.goAwayAfterStreams = 3
        let f = try Fixture(faults: faults)
        try await f.emulator.start()
        let client = try await TestH2Client.connect(to: f.emulator)
        let results = await client.sendAll(try (0..<5).map { _ in
            ("POST", "/3/device/\(token64)", try f.headers(), alertBody)
        })
        let answered = results.compactMap { try? $0.get() }
        #expect(answered.count == 3)
        #expect(answered.allSatisfy { $0.status == 200 })
        #expect(results.prefix(3).allSatisfy { (try? $0.get()) != nil })
        #expect(client.goAwaySeen.withLockedValue { $0 } == 5)
        #expect(f.emulator.requests.count == 3)
        try await client.channel.closeFuture.get()
        // A new connection works.
        let again = try await TestH2Client.connect(to: f.emulator)
        #expect(try await again.send(path: "/3/device/\(token64)", headers: f.headers(), body: alertBody).status == 200)
        #expect(f.emulator.connectionCount == 2)
        await again.close()
        try await f.emulator.shutdown()
    }

    @Test("a dropped connection leaves the Nth request unanswered")
    func dropConnection() async throws {
        var faults = APNsEmulator.Faults()
        faults.dropConnectionAfterStreams = 2
        let f = try Fixture(faults: faults)
        try await f.emulator.start()
        let client = try await TestH2Client.connect(to: f.emulator)
        let first = try await client.send(path: "/3/device/\(token64)", headers: f.headers(), body: alertBody)
        #expect(first.status == 200)
        let results = await client.sendAll(try (0..<2).map { _ in
            ("POST", "/3/device/\(token64)", try f.headers(), alertBody)
        })
        #expect(results.allSatisfy { (try? $0.get()) == nil })
        try await client.channel.closeFuture.get()
        #expect(f.emulator.requests.filter { $0.status == 200 }.count == 1)
        try await f.emulator.shutdown()
    }

    @Test("lowering SETTINGS_MAX_CONCURRENT_STREAMS reaches open connections")
    func lowerStreams() async throws {
        let f = try Fixture()
        try await f.emulator.start()
        let client = try await TestH2Client.connect(to: f.emulator)
        #expect(try await client.send(path: "/3/device/\(token64)", headers: f.headers(), body: alertBody).status == 200)
        #expect(client.settingsSeen.withLockedValue { $0 } == [100])
        await f.emulator.lowerMaxConcurrentStreams(to: 2)
        // A round trip after the SETTINGS frame guarantees it was read.
        #expect(try await client.send(path: "/3/device/\(token64)", headers: f.headers(), body: alertBody).status == 200)
        #expect(client.settingsSeen.withLockedValue { $0 } == [100, 2])
        await client.close()
        try await f.emulator.shutdown()
    }

    @Test("certificate mode: a client without a certificate is refused, one with a CA-signed certificate needs no JWT")
    func clientCertificate() async throws {
        let f = try Fixture(requireClientCertificate: true)
        try await f.emulator.start()
        let anonymous = try await TestH2Client.connect(to: f.emulator)
        let refused = await anonymous.sendAll([("POST", "/3/device/\(token64)", [("apns-topic", "com.example.app")], alertBody)])
        #expect((try? refused[0].get()) == nil)
        #expect(f.emulator.requests.isEmpty)

        let cert = try f.emulator.makeClientCertificate(commonName: "Apple Push Services: com.example.app")
        let client = try await TestH2Client.connect(to: f.emulator, clientCertificate: cert)
        let r = try await client.send(path: "/3/device/\(token64)", headers: [("apns-topic", "com.example.app")], body: alertBody)
        #expect(r.status == 200)
        await client.close()
        try await f.emulator.shutdown()
    }

    @Test("restart drops connections and listens again on the same port")
    func restart() async throws {
        let f = try Fixture()
        try await f.emulator.start()
        let port = f.emulator.port
        let client = try await TestH2Client.connect(to: f.emulator)
        #expect(try await client.send(path: "/3/device/\(token64)", headers: f.headers(), body: alertBody).status == 200)
        try await f.emulator.restart()
        try await client.channel.closeFuture.get()
        #expect(f.emulator.port == port)
        let again = try await TestH2Client.connect(to: f.emulator)
        #expect(try await again.send(path: "/3/device/\(token64)", headers: f.headers(), body: alertBody).status == 200)
        await again.close()
        try await f.emulator.shutdown()
    }

    @Test("the CONNECT proxy tunnels TLS HTTP/2 to the emulator")
    func proxy() async throws {
        let f = try Fixture()
        try await f.emulator.start()
        let proxy = ConnectProxy()
        try await proxy.start()
        let client = try await TestH2Client.connect(to: f.emulator, proxy: proxy)
        #expect(try await client.send(path: "/3/device/\(token64)", headers: f.headers(), body: alertBody).status == 200)
        #expect(proxy.connectCount == 1)
        #expect(proxy.connectTargets == ["127.0.0.1:\(f.emulator.port)"])
        await client.close()
        try await proxy.shutdown()
        try await f.emulator.shutdown()
    }

    static func payload(size: Int) -> [UInt8] {
        let head = Array(#"{"aps":{"alert":""#.utf8)
        let tail = Array(#""}}"#.utf8)
        return head + Array(repeating: UInt8(ascii: "x"), count: size - head.count - tail.count) + tail
    }
}
