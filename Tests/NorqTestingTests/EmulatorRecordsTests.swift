@testable import NorqTesting
import Testing

/// What the emulators keep of the requests they receive is bounded.
@Suite("Emulator records")
struct EmulatorRecordsTests {
    @Test func keepsAtMostTheLimitNewestFirstDroppedCounted() {
        var records = EmulatorRecords<Int>(limit: 100)
        for value in 0..<1_000 { records.append(value) }
        #expect(records.all.count <= 100)
        #expect(records.all.count >= 90, "the oldest tenth is dropped when full, no more")
        #expect(records.all.last == 999)
        #expect(records.all == Array((1_000 - records.all.count)..<1_000), "the newest, in order")
        #expect(records.dropped + records.all.count == 1_000)
        records.removeAll()
        #expect(records.all.isEmpty && records.dropped == 0)
    }

    @Test func aLimitBelowOneKeepsOne() {
        var records = EmulatorRecords<Int>(limit: 0)
        records.append(1)
        records.append(2)
        #expect(records.all == [2])
        #expect(records.dropped == 1)
    }

    @Test func theEmulatorsDefaultToTenThousand() {
        #expect(APNsEmulator.Configuration().recordLimit == 10_000)
        #expect(FCMEmulator.Configuration().recordLimit == 10_000)
        #expect(WebPushEmulator.Configuration().recordLimit == 10_000)
    }

    /// A run longer than the bound (device pushes and channel-management calls alike) keeps at most `recordLimit`
    /// records in the APNs emulator, the newest, and counts the rest as dropped.
    @Test func theAPNsEmulatorKeepsAtMostItsLimitOverALongerRun() async throws {
        let signer = TestSigner()
        let clock = TestClock()
        var configuration = APNsEmulator.Configuration(
            environmentName: "sandbox", teamID: signer.teamID, keyID: signer.keyID,
            signingPublicKeyPEM: signer.publicKeyPEM, bundleIDs: ["com.example.app"], maxConcurrentStreams: 100,
            now: { clock.now })
        configuration.recordLimit = 30
        let emulator = try APNsEmulator(configuration: configuration)
        try await emulator.start()
        let client = try await TestH2Client.connect(to: emulator)
        let jwt = try signer.token(issuedAt: clock.now)
        let push = [("authorization", "bearer \(jwt)"), ("apns-topic", "com.example.app"), ("apns-push-type", "alert")]
        var requests: [(method: String, path: String, headers: [(String, String)], body: [UInt8])] = (0..<90).map { _ in
            ("POST", "/3/device/\(token64)", push, alertBody)
        }
        let channel = Array(#"{"message-storage-policy":0,"push-type":"LiveActivity"}"#.utf8)
        requests += (0..<10).map { _ in
            ("POST", "/1/apps/com.example.app/channels", [("authorization", "bearer \(jwt)")], channel)
        }
        for batch in stride(from: 0, to: requests.count, by: 25) {
            let answers = await client.sendAll(Array(requests[batch..<min(batch + 25, requests.count)]))
            #expect(answers.allSatisfy { (try? $0.get())?.status == 200 || (try? $0.get())?.status == 201 })
        }
        let kept = emulator.requests
        #expect(kept.count <= 30 && kept.count >= 27, "\(kept.count) records kept")
        #expect(kept.count + emulator.droppedRequestCount == 100)
        // The newest are kept: the last batch (its 10 channel calls among them) was recorded last, in whatever
        // order its answers completed, and fits in what is kept.
        #expect(kept.filter { $0.path == "/1/apps/com.example.app/channels" }.count == 10, "the newest are kept")
        await client.close()
        try await emulator.shutdown()
    }
}
