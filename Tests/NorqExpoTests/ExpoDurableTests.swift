import Norq
import NorqCore
@testable import NorqExpo
import NorqStore
import NorqTesting
import Testing

/// Expo through durable delivery (a worker, a store) against the Expo emulator: a ticket is stored and reported as
/// `accepted` with its ticket id (never as `delivered`), and a `DeviceNotRegistered` ticket reaches the token
/// registry, so a later send skips the token.
@Suite("Expo durable delivery", .serialized)
struct ExpoDurableTests {
    @Test func ticketsAreStoredAsAcceptedAndDeviceNotRegisteredReachesTheRegistry() async throws {
        var configuration = ExpoEmulator.Configuration()
        configuration.faults.unregisteredTokens = [ExpoEndToEndTests.token(2)]
        let setup = try await ExpoEndToEndTests.setup(emulator: configuration)
        let store = InMemoryDeliveryStore()
        let durable = DurableDelivery(router: try setup.router(), store: store,
                                      settings: DeliveryStoreSettings(pollInterval: .milliseconds(20)))
        let worker = DurableWorker(delivery: durable)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await worker.run() }
            defer { worker.stop() }
            let receipt = try await durable.enqueue(content: PushContent(title: "Hi"),
                                                    to: ExpoEndToEndTests.recipients(5))
            let report = try await durable.wait(for: receipt.sendID, timeout: .seconds(30))
            #expect(report.outcomes.map(\.result.kind) == ["accepted", "accepted", "rejected", "accepted", "accepted"])
            // The ticket ids the emulator handed out are the outcomes' message ids.
            let tickets = report.outcomes.compactMap { outcome -> String? in
                guard case .delivered(let delivered) = outcome.result, delivered.accepted else { return nil }
                return delivered.messageID
            }
            #expect(Set(tickets).count == 4)
            #expect(tickets.allSatisfy { !$0.isEmpty })
            let status = try await durable.status(of: receipt.sendID)
            #expect(status.rows.filter { $0.last?.isAccepted == true }.count == 4)
            // The unregistered token is in the registry: the next send skips it without a request.
            #expect(try await store.invalidTokens(limit: 10).map(\.token) == [ExpoEndToEndTests.token(2)])
            let later = try await durable.enqueue(content: PushContent(title: "Again"),
                                                  to: ExpoEndToEndTests.recipients(3))
            let second = try await durable.wait(for: later.sendID, timeout: .seconds(30))
            #expect(second.outcomes.map(\.result.kind) == ["accepted", "accepted", "skipped"])
            worker.stop()
            try await group.waitForAll()
        }
        try await setup.shutdown()
    }

    /// The worker groups a claimed batch's Expo targets into requests of up to 100 recipients, as a send without a
    /// store does (one request per token would be 100 times Expo's request rate), and each token still gets its
    /// own outcome.
    @Test func theWorkerSendsExpoTargetsInBatchesOfAHundred() async throws {
        let setup = try await ExpoEndToEndTests.setup()
        let store = InMemoryDeliveryStore()
        let durable = DurableDelivery(router: try setup.router(), store: store,
                                      settings: DeliveryStoreSettings(pollInterval: .milliseconds(20)))
        let worker = DurableWorker(delivery: durable, lanes: 1)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await worker.run() }
            defer { worker.stop() }
            let receipt = try await durable.enqueue(content: PushContent(title: "Hi"),
                                                    to: ExpoEndToEndTests.recipients(250))
            let report = try await durable.wait(for: receipt.sendID, timeout: .seconds(30))
            #expect(report.outcomes.count == 250 && report.accepted == 250)
            let requests = setup.emulator.sendRequests
            #expect(requests.allSatisfy { $0.detail.recipients.count <= 100 })
            #expect(requests.count <= 6, "250 targets in \(requests.count) requests")
            #expect(requests.flatMap(\.detail.recipients).count == 250, "each token sent once")
            worker.stop()
            try await group.waitForAll()
        }
        try await setup.shutdown()
    }
}
