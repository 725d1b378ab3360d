import Norq
import NorqAPI
import NorqCore
@testable import NorqServer
import NorqStore
import Testing

/// The generated documents the server answers with carry the same JSON as the library's forms (`DryRunJSON`,
/// which the server answered with before issue 33's spec-first answers, and which `norq send --json`, `norq status
/// --json` and `norq render --json` still print): every field, every `null`, up to the order of object keys.
@Suite struct APIDocumentsTests {
    static let token = DeliveryTarget.token(PushToken(token: String(repeating: "ab", count: 32), platform: .ios,
                                                      environment: .sandbox))
    static let channel = DeliveryTarget.channel(.init(channel: "dHdjaGFubmVs", environment: nil))

    /// `json` with every object's keys sorted (the answers' order).
    static func sorted(_ json: JSONValue) -> JSONValue {
        switch json {
        case .object(let object):
            .object(.init(uniqueKeysWithValues: object.sorted { $0.key < $1.key }.map { ($0.key, sorted($0.value)) }))
        case .array(let items): .array(items.map(sorted))
        default: json
        }
    }

    static func same(_ document: some Encodable, _ library: JSONValue, sourceLocation: Testing.SourceLocation = #_sourceLocation) {
        let answer = ServerJSON.json(document)
        #expect(answer == sorted(library), "\(answer?.compactDescription ?? "nil")\n!=\n\(sorted(library).compactDescription)",
                sourceLocation: sourceLocation)
    }

    static let results: [PushOutcome.Result] = {
        var failure = NorqError(.transportFailed, "reset")
        failure.possiblyProcessed = true
        let rejected = PushOutcome.Result.rejected(.init(status: 410, reason: "Unregistered", code: .invalidJSON,
                                                         classification: ResponseClass(rawValue: "token-invalid"),
                                                         invalidSince: 1_700_000_000_123, messageID: "m-2"))
        return [
            .delivered(.init(status: 200, messageID: "m-1", uniqueID: "u-1")),
            .delivered(.init(status: 200, messageID: nil, accepted: true)),
            rejected,
            .rejected(.init(status: 400, reason: nil, code: .invalidJSON, classification: .retryable)),
            .failed(failure),
            .skipped(.init(code: .noProvider, reason: "no provider for this target")),
            .duplicate(of: rejected),
        ]
    }()

    @Test func outcomesAreTheLibrarysOutcomeJSON() {
        for (index, result) in Self.results.enumerated() {
            let outcome = PushOutcome(target: index.isMultiple(of: 2) ? Self.token : Self.channel,
                                      recipientID: index == 1 ? nil : "u1", provider: index == 2 ? nil : "apns",
                                      attempts: index + 1, requeues: index % 2, result: result)
            Self.same(APIDocuments.outcome(outcome), DryRunJSON.outcomeEntryJSON(outcome, redactTokens: true))
        }
    }

    @Test func rowsAreTheLibrarysRowJSON() {
        let full = OutboxRow(id: 1, sendID: "s", position: 4, target: "t", identity: String(repeating: "cd", count: 32),
                             provider: "apns", recipientID: "u9", state: .rejected, attempts: 2, nextAttemptAt: 0,
                             messageID: "m-9", mayHaveBeenDelivered: true,
                             last: StoredOutcome(state: .rejected, status: 410, reason: "Unregistered", code: "push/token-invalid"))
        let bare = OutboxRow(id: 2, sendID: "s", position: 0, target: "t", identity: "short", provider: nil,
                             recipientID: nil, state: .pending, attempts: 0, nextAttemptAt: 0, messageID: nil)
        for row in [full, bare] { Self.same(APIDocuments.row(row), DryRunJSON.rowJSON(row)) }
    }

    @Test func renderedContentIsTheLibrarysContentJSON() {
        var content = PushContent(title: "Shipped", body: "Your order", actionURL: "https://example.com/a",
                                  headers: PushHeaders(priority: 10, pushType: "alert"), data: ["order": ["id": "A-1"], "n": 2.5])
        content.ios.badge = 3
        content.ios.relevanceScore = 0.5
        Self.same(APIDocuments.rendered(content, template: "order-shipped"),
                  ["content": DryRunJSON.contentJSON(content, template: "order-shipped")])
        content.nativePayload = ["aps": ["alert": "hi"], "z": .null]
        Self.same(APIDocuments.rendered(content, template: "raw"), ["content": DryRunJSON.contentJSON(content, template: "raw")])
    }

    @Test func renderedDeliveriesAreTheLibrarysDeliveriesJSON() {
        let json = PreparedRequest(method: "POST", authority: "api.sandbox.push.apple.com", path: "/3/device/abcd",
                                   headers: [HTTPHeader("apns-push-type", "alert")], body: Array(#"{"aps":{"alert":"hi"},"k":[1,null]}"#.utf8),
                                   provider: "apns", target: Self.token, environment: .sandbox, payloadLimit: 4096)
        let binary = PreparedRequest(method: "POST", authority: "push.example.net", path: "/p/1", headers: [],
                                     body: [0xff, 0x00, 0x10], provider: "webpush", target: Self.token)
        let deliveries = [
            PreparedDelivery(target: Self.token, recipientID: "u1", provider: "apns", routing: "push", plan: .request(json)),
            PreparedDelivery(target: Self.token, recipientID: nil, provider: "webpush", routing: "push.web", plan: .request(binary)),
            PreparedDelivery(target: Self.channel, recipientID: nil, provider: nil, routing: "none",
                             plan: .noRequest(.skipped(.init(code: .noProvider, reason: "no provider")))),
        ]
        Self.same(APIDocuments.rendered(deliveries, template: "t"),
                  DryRunJSON.deliveriesJSON(deliveries, template: "t", redactTokens: true))
    }

    /// A registry entry has every field (`null` for a provider or environment it was recorded without, and for
    /// `registeredAt` until the token is registered again); a token the registry does not know has its shortened
    /// form and `invalid: false` only.
    @Test func tokenEntriesKeepTheirNullsAndUnknownTokensHaveNone() throws {
        let token = String(repeating: "ef", count: 32)
        let record = InvalidTokenRecord(token: token, provider: nil, reason: "Unregistered", invalidSince: 1_700_000_000_000,
                                        recordedAt: 1_700_000_000_000)
        let entry = try #require(ServerJSON.json(APIDocuments.token(record)))
        #expect(entry == ["environment": .null, "invalid": .bool(record.isInvalid), "invalidSince": 1_700_000_000_000,
                          "provider": .null, "reason": "Unregistered", "registeredAt": .null,
                          "token": .string(PushToken.redact(token))])
        let unknown = try #require(ServerJSON.json(Components.Schemas.Tokens(tokens: [APIDocuments.unknownToken(token)])))
        #expect(unknown == ["tokens": [["invalid": false, "token": .string(PushToken.redact(token))]]])
    }
}
