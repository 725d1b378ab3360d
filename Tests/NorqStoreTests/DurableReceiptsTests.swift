import Foundation
import Norq
import NorqCore
import NorqExpo
import NorqStore
import NorqStorePostgres
import NorqStoreSQLite
import NorqTesting
import Synchronization
import Testing

/// Receipts on the durable path (issues 29 and 31), on real stores against the Expo emulator: a ticket is an
/// `accepted` outcome at once (`wait` does not wait for the receipt), the worker fetches the receipts after the
/// provider's `receiptDelay` (asking again while they are absent), records each final outcome, and a
/// `DeviceNotRegistered` ticket or receipt reaches the token registry and the invalid-token event.
@Suite("Durable receipts", .serialized)
struct DurableReceiptsTests {
    static func token(_ index: Int) -> String { "ExponentPushToken[durable-\(index)]" }

    static func recipients(_ count: Int) -> [Recipient] {
        (0..<count).map { Recipient(id: "u\($0)", tokens: [PushToken(token: token($0), platform: .ios)]) }
    }

    static let settings = DeliveryStoreSettings(callTimeout: .seconds(20), pollInterval: .milliseconds(20))

    /// Sends five tokens through a worker on `store`: token 1's ticket is `DeviceNotRegistered`, tokens 2 and 3 get
    /// error receipts (`DeviceNotRegistered`, `MessageTooBig`), and receipts are ready only 1.5 s after their
    /// tickets, so the first poll (after the 1 s `receiptDelay`) finds none and the worker asks again.
    static func run(on store: any DeliveryStore) async throws {
        var configuration = ExpoEmulator.Configuration()
        configuration.faults.unregisteredTokens = [token(1)]
        configuration.faults.receiptErrors = [token(2): "DeviceNotRegistered", token(3): "MessageTooBig"]
        configuration.faults.receiptLatency = .milliseconds(1_500)
        let emulator = try ExpoEmulator(configuration: configuration)
        try await emulator.start()
        let expo = ExpoConfiguration(endpoint: try #require(ExpoURL.parse(emulator.endpoint)),
                                     additionalTrustRootsPEM: emulator.caCertificatePEM, receiptDelay: .seconds(1),
                                     requestTimeout: .seconds(10))
        let provider = try ExpoProvider(name: "expo", configuration: expo, policy: DeliveryPolicy())
        let events = Mutex<[String]>([])
        let router = try NotificationRouter(providers: [provider], byPlatform: [.ios: "expo"],
                                            onInvalidToken: { event in events.withLock { $0.append(event.token.token) } })
        let durable = DurableDelivery(router: router, store: store, settings: settings)
        do {
            try await withWorker(DurableWorker(delivery: durable)) {
                let receipt = try await durable.enqueue(content: PushContent(title: "Hi", body: "There"),
                                                        to: recipients(5))
                // The tickets: `wait` returns with them, not after the receipts.
                let tickets = try await durable.wait(for: receipt.sendID, timeout: .seconds(30))
                #expect(tickets.outcomes.map(\.result.kind) == ["accepted", "rejected", "accepted", "accepted", "accepted"])
                let ticketIDs = tickets.outcomes.map { outcome -> String? in
                    if case .delivered(let delivered) = outcome.result { return delivered.messageID }
                    return nil
                }
                let progress = try await durable.progress(of: receipt.sendID)
                #expect(progress.isFinished && progress.awaitingReceipts == 4)
                #expect(try await durable.status(of: receipt.sendID).rows.map(\.state)
                        == [.accepted, .rejected, .accepted, .accepted, .accepted])
                // The receipts.
                let final = try await durable.wait(for: receipt.sendID, timeout: .seconds(30), receipts: true)
                #expect(final.outcomes.map(\.result.kind) == ["delivered", "rejected", "rejected", "rejected", "delivered"])
                let reasons = final.outcomes.map { outcome -> String? in
                    if case .rejected(let rejected) = outcome.result { return rejected.reason }
                    return nil
                }
                #expect(reasons == [nil, "DeviceNotRegistered", "DeviceNotRegistered", "MessageTooBig", nil])
                // Each outcome keeps its ticket id as message id.
                let finalIDs = final.outcomes.map { outcome -> String? in
                    switch outcome.result {
                    case .delivered(let delivered): delivered.messageID
                    case .rejected(let rejected): rejected.messageID
                    default: nil
                    }
                }
                #expect(finalIDs[0] == ticketIDs[0] && finalIDs[4] == ticketIDs[4] && finalIDs[2] == ticketIDs[2])
                #expect(try await durable.progress(of: receipt.sendID).awaitingReceipts == 0)
                // Both unregistered tokens (the ticket's and the receipt's) are in the registry and were reported.
                #expect(Set(try await store.invalidTokens(limit: 10).map(\.token)) == [token(1), token(2)])
                #expect(Set(events.withLock { $0 }) == [token(1), token(2)])
                // The worker asked at least twice (the first poll found no receipt), never for more than 1,000 ids,
                // and sent each token once.
                let receiptRequests = emulator.requests.filter { $0.path.hasSuffix("/getReceipts") }
                #expect(receiptRequests.count >= 2)
                #expect(emulator.sendRequests.flatMap(\.detail.recipients).sorted() == (0..<5).map(token).sorted())
            }
        } catch {
            await router.shutdown(gracePeriod: .seconds(1))
            try? await emulator.shutdown()
            throw error
        }
        await router.shutdown(gracePeriod: .seconds(1))
        try await emulator.shutdown()
    }

    @Test("SQLite: tickets at once, receipts fetched after the delay, unregistered tokens in the registry")
    func sqlite() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try await SQLiteDeliveryStore.open(path: directory.appendingPathComponent("norq.db").path,
                                                       settings: Self.settings)
        try await store.migrate()
        do { try await Self.run(on: store) } catch {
            await store.close()
            throw error
        }
        await store.close()
    }

    @Test("PostgreSQL: tickets at once, receipts fetched after the delay, unregistered tokens in the registry",
          PostgresTestServer.enabled)
    func postgres() async throws {
        try await PostgresTestServer.withStore(settings: Self.settings) { store, _ in try await Self.run(on: store) }
    }

    @Test("In memory: the same")
    func inMemory() async throws {
        try await Self.run(on: InMemoryDeliveryStore())
    }
}

/// The durable receipt-polling rule, without I/O.
@Suite struct DurableReceiptPollingTests {
    @Test func missingReceiptsAreAskedForAgainWithGrowingWaitsUntilTheRetentionEnds() {
        let minute: Int64 = 60_000
        let delay = Duration.seconds(900), retention = Duration.seconds(24 * 3600)
        // The first poll (15 min after the ticket) found nothing: again 15 min later, then 30, then hourly.
        #expect(ReceiptPolling.next(now: 15 * minute, acceptedAt: 0, delay: delay, retention: retention)
                == .poll(at: 30 * minute))
        #expect(ReceiptPolling.next(now: 30 * minute, acceptedAt: 0, delay: delay, retention: retention)
                == .poll(at: 60 * minute))
        #expect(ReceiptPolling.next(now: 300 * minute, acceptedAt: 0, delay: delay, retention: retention)
                == .poll(at: 360 * minute))
        // A failed request is tried again within a minute.
        #expect(ReceiptPolling.next(now: 300 * minute, acceptedAt: 0, delay: delay, retention: retention, failed: true)
                == .poll(at: 301 * minute))
        // Never past the retention; at it, give up.
        #expect(ReceiptPolling.next(now: 1_430 * minute, acceptedAt: 0, delay: delay, retention: retention)
                == .poll(at: 1_440 * minute))
        #expect(ReceiptPolling.next(now: 1_440 * minute, acceptedAt: 0, delay: delay, retention: retention) == .giveUp)
        // A zero delay still waits (a millisecond), never a busy loop at the same instant.
        #expect(ReceiptPolling.next(now: 5, acceptedAt: 5, delay: .zero, retention: retention) == .poll(at: 6))
    }
}
