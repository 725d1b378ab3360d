import NorqCore
import NorqStore
import Testing

/// Bulk token registration (issue 33): `registerTokens` re-registers a batch as `registerToken` does one token, with
/// the same provider and environment filters, for every store.
extension StoreConformance {
    static func registerTokensInOneBatch(_ store: any DeliveryStore) async throws {
        // 600 invalid tokens in sandbox, and one in production.
        let tokens = (0..<600).map { "tok-\($0)" }
        _ = try await store.enqueue(send(to: tokens.map { ($0, "apns", "sandbox") } + [("prod", "apns", "production")]),
                                    now: 0, idempotencyWindow: window)
        let claimed = try await store.claim(owner: "w", limit: 10_000, now: 10, leaseUntil: 110)
        #expect(claimed.count == 601)
        _ = try await store.complete(claimed.map { row in
            .finish(row.lease!, StoredOutcome(state: .rejected, status: 400, reason: "BadDeviceToken",
                                              code: "provider/rejected", classification: "token-invalid",
                                              environment: row.identity == "prod" ? "production" : "sandbox"))
        }, now: 10)
        #expect(try await store.invalidTokens(limit: 10_000).filter(\.isInvalid).count == 601)
        // An empty batch changes nothing; a batch limited to production leaves the sandbox entries invalid.
        try await store.registerTokens([], provider: nil, environment: nil, at: 20)
        try await store.registerTokens(tokens + ["prod"], provider: nil, environment: "production", at: 30)
        var registry = try await store.invalidTokens(limit: 10_000)
        #expect(registry.filter(\.isInvalid).map(\.token).sorted() == tokens.sorted())
        // Another provider instance: nothing; the right one, sandbox, with a token twice and one not in the registry.
        try await store.registerTokens(["tok-1"], provider: "apns-2", environment: nil, at: 40)
        #expect(try await store.invalidTokens(limit: 10_000).filter(\.isInvalid).count == 600)
        let batch = Array(tokens[..<500]) + ["tok-0", "never-seen"]
        try await store.registerTokens(batch, provider: "apns", environment: "sandbox", at: 50)
        registry = try await store.invalidTokens(limit: 10_000)
        #expect(registry.filter(\.isInvalid).map(\.token).sorted() == tokens[500...].sorted())
        #expect(registry.first { $0.token == "tok-0" }?.registeredAt == 50)
        #expect(registry.first { $0.token == "tok-599" }?.registeredAt == nil)
        #expect(!registry.contains { $0.token == "never-seen" })
        // A later send reaches the registered tokens and skips the others; an older registration keeps the newer.
        try await store.registerTokens(["tok-0"], provider: nil, environment: nil, at: 45)
        #expect(try await store.invalidTokens(limit: 10_000).first { $0.token == "tok-0" }?.registeredAt == 50)
        #expect(try await states(store, [("tok-0", "apns", "sandbox"), ("tok-599", "apns", "sandbox")], now: 60)
                == [.pending, .skipped])
    }

    static let tokenBatchChecks: [(String, @Sendable (any DeliveryStore) async throws -> Void)] = [
        ("registerTokensInOneBatch", registerTokensInOneBatch),
    ]
}
