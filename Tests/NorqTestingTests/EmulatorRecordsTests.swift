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
}
