import Norq
import NorqCore
import Testing

/// The one JSON form of outcomes (`norq send --json`, the server's `outcomes`, `norq status --json`'s rows).
@Suite struct OutcomeJSONTests {
    let token = DeliveryTarget.token(PushToken(token: String(repeating: "ab", count: 32), platform: .ios))

    @Test func anOutcomeCarriesItsAttemptsRequeuesAndProviderNeutralIDs() {
        let outcome = PushOutcome(target: token, recipientID: "u1", provider: "apns", attempts: 3, requeues: 2,
                                  result: .delivered(.init(status: 200, messageID: "m-1", uniqueID: "u-1")))
        let json = DryRunJSON.outcomeEntryJSON(outcome, redactTokens: true)
        #expect(json["attempts"] == .int(3))
        #expect(json["requeues"] == .int(2))
        #expect(json["recipient"] == .string("u1"))
        #expect(json["result"]?["messageId"] == .string("m-1"))
        #expect(json["result"]?["uniqueId"] == .string("u-1"))
        #expect(json["result"]?["apnsId"] == nil)
        #expect(json["result"]?["mayHaveBeenDelivered"] == .bool(false))
        #expect(json["target"]?["token"]?.stringValue?.count ?? 0 < 64, "shortened")
    }

    @Test func everyKindSaysWhetherItMayHaveBeenDelivered() {
        var error = NorqError(.transportFailed, "reset")
        error.possiblyProcessed = true
        #expect(DryRunJSON.outcomeJSON(.failed(error))["mayHaveBeenDelivered"] == .bool(true))
        #expect(DryRunJSON.outcomeJSON(.skipped(.init(code: .noProvider, reason: "none")))["mayHaveBeenDelivered"] == .bool(false))
    }
}
