import Foundation
import NorqAPNs
import NorqCore
import NorqStore
import NorqStoreSQLite
import NorqTesting
import Testing

@testable import Norq

/// A send enqueued by one instance and delivered by another (which never saw its plan: it reads the store, as a
/// second process, a restarted worker or an old send does) goes out byte for byte as the enqueuing instance would
/// have sent it: every iOS field, the template's topic and the send's topic (issue 29: the wrong app).
@Suite(.serialized) struct DurableLosslessTests {
    static let token = DurableRig.token(7)

    /// Alert fields, sound, badge and the rest of `aps`, both topics (the send's wins), custom data in its order.
    static var alert: (PushContent, RouterSendOptions) {
        var c = PushContent(title: "Order shipped", body: "On its way")
        c.ios.subtitle = "Sub"
        c.ios.sound = PushSound(name: "ping.caf", critical: true, volume: 0.75)
        c.ios.badge = 4
        c.ios.category = "ORDER"
        c.ios.threadID = "orders"
        c.ios.mutableContent = true
        c.ios.interruptionLevel = "time-sensitive"
        c.ios.relevanceScore = 0.5
        c.ios.targetContentID = "order-42"
        c.ios.filterCriteria = "work"
        c.ios.launchImage = "launch.png"
        c.ios.titleLocKey = "TITLE_KEY"
        c.ios.titleLocArgs = ["a"]
        c.ios.subtitleLocKey = "SUB_KEY"
        c.ios.subtitleLocArgs = ["b"]
        c.ios.locKey = "BODY_KEY"
        c.ios.locArgs = ["c", "d"]
        c.ios.actionLocKey = "OPEN_KEY"
        c.ios.action = "Open"
        c.ios.urlArgs = ["orders", "42"]
        c.headers.priority = 10
        c.headers.pushType = "alert"
        c.headers.collapseID = "order-42"
        c.headers.expiration = .after(seconds: 3600)
        c.headers.topic = "com.example.template"
        c.data = ["zeta": 1, "alpha": ["nested": true], "orderId": "42"]
        var options = RouterSendOptions(idempotencyKey: "lossless-alert", sendTime: 1_800_000_000)
        options.topic = "com.example.options"
        return (c, options)
    }

    /// A plain-string alert and the template's topic alone.
    static var plain: (PushContent, RouterSendOptions) {
        var c = PushContent()
        c.ios.alertText = "Hello"
        c.ios.sound = PushSound(name: "default")
        c.headers.topic = "com.example.template"
        return (c, RouterSendOptions(idempotencyKey: "lossless-plain", sendTime: 1_800_000_000))
    }

    /// A Live Activity update (its own push type and topic suffix).
    static var liveActivity: (PushContent, RouterSendOptions) {
        var c = PushContent(title: "Score", body: "2-1")
        c.ios.event = "update"
        c.ios.contentState = ["home": 2, "away": 1]
        c.ios.timestamp = 1_800_000_000
        c.ios.staleDate = 1_800_003_600
        c.ios.dismissalDate = 1_800_007_200
        c.headers.pushType = "liveactivity"
        c.headers.priority = 5
        c.headers.topic = "com.example.template"
        return (c, RouterSendOptions(idempotencyKey: "lossless-live", sendTime: 1_800_000_000))
    }

    @Test(arguments: ["alert", "plain", "liveActivity"])
    func anotherInstanceDeliversTheSameRequestBytes(_ name: String) async throws {
        let (content, options) = switch name {
        case "alert": Self.alert
        case "plain": Self.plain
        default: Self.liveActivity
        }
        let rig = try await DurableRig.make()
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("norq.db").path
        let enqueuingStore = try await SQLiteDeliveryStore.open(path: path)
        try await enqueuingStore.migrate()
        let deliveringStore = try await SQLiteDeliveryStore.open(path: path)
        do {
            // The instance that enqueues runs no worker; the other one never saw the plan.
            let enqueuer = DurableDelivery(router: rig.router, store: enqueuingStore)
            let deliverer = DurableDelivery(router: rig.router, store: deliveringStore)
            let token = PushToken(token: Self.token, platform: .ios)
            let receipt = try await enqueuer.enqueue(content: content, to: [Recipient(id: "u", tokens: [token])],
                                                     options: options)
            let report = try await withWorker(DurableWorker(delivery: deliverer)) {
                try await deliverer.wait(for: receipt.sendID, timeout: .seconds(20))
            }
            #expect(report.delivered == 1, "\(report.outcomes)")

            // What this process would send for the same plan (what `norq render` prints).
            let provider = try #require(rig.router.providers["apns"])
            let expected = try rig.router.prepareRequest(
                target: .token(token), provider: provider,
                plan: SendPlan(content: content, templateName: nil, options: options),
                requestID: RequestID.make(idempotencyKey: try #require(options.idempotencyKey), token: Self.token))
            let received = try #require(rig.emulator.requests.first)
            #expect(rig.emulator.requests.count == 1)
            #expect(received.body == expected.body, "\(String(decoding: received.body, as: UTF8.self))")
            #expect(received.path == expected.path)
            for header in expected.headers where header.name != "authorization" {
                #expect(received.header(header.name) == header.value, "\(header.name)")
            }
            #expect(received.header("apns-topic")?.hasPrefix(options.topic ?? "com.example.template") == true)
        } catch {
            Issue.record("\(error)")
        }
        await enqueuingStore.close()
        await deliveringStore.close()
        await rig.shutdown()
    }
}
