@testable import Norq
import NorqCore
@testable import NorqServer
import NorqStore
import Testing

/// `GET /v1/sends/{id}`'s summary of a durable send: tickets whose receipts are still to come are `accepted`, not
/// failures, and count as delivered for `allDelivered` (as in a direct send's report).
@Suite struct DurableSummaryTests {
    @Test func acceptedTicketsAreCountedAsAcceptedNotFailed() {
        let progress = DurableDelivery.Progress(sendID: "s", targetCount: 6,
                                                states: [.delivered: 2, .accepted: 3, .rejected: 1])
        let summary = ServerJSON.summary(progress)
        #expect(summary["accepted"] == .int(3))
        #expect(summary["failed"] == .int(0))
        #expect(summary["allDelivered"] == .bool(false))
        let all = ServerJSON.summary(DurableDelivery.Progress(sendID: "s", targetCount: 5,
                                                              states: [.delivered: 2, .accepted: 3]))
        #expect(all["allDelivered"] == .bool(true) && all["failed"] == .int(0))
        // Still in flight: neither failed nor finished.
        let open = ServerJSON.summary(DurableDelivery.Progress(sendID: "s", targetCount: 5,
                                                               states: [.pending: 4, .failed: 1]))
        #expect(open["failed"] == .int(1) && open["allDelivered"] == .bool(false))
    }
}
