import Norq
import NorqCore
import Synchronization
import Testing

@Suite("Invalid-token events")
struct InvalidTokenTests {
    final class Events: Sendable {
        let list = Mutex<[InvalidTokenEvent]>([])
        var all: [InvalidTokenEvent] { list.withLock { $0 } }
    }

    @Test("the hook fires for Unregistered, ExpiredToken and BadDeviceToken only")
    func onlyThreeReasons() async throws {
        let answers: [String: DeliveryResponse] = [
            "t-unreg": FakeProvider.fail(410, "Unregistered", .tokenInvalid, invalidSince: 1_700_000_000_000),
            "t-expired": FakeProvider.fail(410, "ExpiredToken", .tokenInvalid),
            "t-bad": FakeProvider.fail(400, "BadDeviceToken", .tokenInvalid),
            "t-cred": FakeProvider.fail(403, "InvalidProviderToken", .credentials),
            "t-topic": FakeProvider.fail(400, "BadTopic", .permanent),
            "t-forbidden": FakeProvider.fail(403, "Forbidden", .credentials),
            "t-ok": FakeProvider.ok(),
        ]
        let apns = FakeProvider(name: "apns") { request, _ throws(NorqError) in
            answers[String(request.path.dropFirst("/push/".count))] ?? FakeProvider.ok()
        }
        let events = Events()
        let r = try NotificationRouter(providers: [apns], onInvalidToken: { event in
            events.list.withLock { $0.append(event) }
        })
        let tokens = answers.keys.sorted().map { ios($0, environment: $0 == "t-bad" ? .production : nil) }
        let report = try await r.send(content: PushContent(title: "t"), to: recipients(tokens))
        #expect(report.outcomes.count == answers.count)
        let byToken = Dictionary(uniqueKeysWithValues: events.all.map { ($0.token.token, $0) })
        #expect(Set(byToken.keys) == ["t-unreg", "t-expired", "t-bad"])
        #expect(byToken["t-unreg"]?.invalidSince == 1_700_000_000_000)
        #expect(byToken["t-unreg"]?.reason == "Unregistered")
        #expect(byToken["t-unreg"]?.provider == "apns")
        #expect(byToken["t-unreg"]?.hint == nil)
        #expect(byToken["t-bad"]?.hint?.contains("sandbox") == true)
        #expect(byToken["t-bad"]?.environment == .production)

        // The same events arrive on the stream, which finishes at shutdown.
        await r.shutdown()
        var streamed: [String] = []
        for await event in r.invalidTokens { streamed.append(event.reason) }
        #expect(streamed.sorted() == ["BadDeviceToken", "ExpiredToken", "Unregistered"])
    }
}
