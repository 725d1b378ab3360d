import NorqCore
import NorqStore
import Testing

/// The token registry per (token, provider instance, environment) (issue 29), for every store.
extension StoreConformance {
    /// A send to `targets` (token, provider, environment), positions in order.
    static func send(to targets: [(token: String, provider: String, environment: String?)]) -> NewSend {
        NewSend(id: RequestID.random(), idempotencyKey: nil, fingerprint: "f-env", content: #"{"title":"hi"}"#,
                targets: targets.enumerated().map { index, target in
                    NewDelivery(position: index, target: #"{"token":"\#(target.token)","platform":"ios"}"#,
                                identity: target.token, provider: target.provider, recipientID: "u\(index)",
                                messageID: "m-\(index)", environment: target.environment)
                })
    }

    /// Finishes the leased row of `token` with a token-invalid answer sent to `environment`.
    static func reject(_ store: any DeliveryStore, token: String, reason: String, status: Int, invalidSince: Int64?,
                       environment: String?, now: Int64) async throws {
        let claimed = try await store.claim(owner: "w", limit: 10_000, now: now, leaseUntil: now + 100)
        let row = try #require(claimed.first { $0.identity == token })
        let report = try await store.complete([.finish(row.lease!, StoredOutcome(
            state: .rejected, status: status, reason: reason, code: "provider/rejected",
            classification: "token-invalid", invalidSince: invalidSince, environment: environment))], now: now)
        #expect(report.applied == [row.id])
        // Give the other claimed rows back.
        _ = try await store.complete(claimed.filter { $0.id != row.id }.map { .release($0.lease!) }, now: now)
    }

    /// The states of a new send's rows to `targets`.
    static func states(_ store: any DeliveryStore, _ targets: [(token: String, provider: String, environment: String?)],
                       now: Int64) async throws -> [DeliveryState] {
        let id = try await store.enqueue(send(to: targets), now: now, idempotencyWindow: window).sendID
        return try await store.deliveries(ofSend: id).map(\.state)
    }

    /// `BadDeviceToken` from sandbox skips later sandbox sends of the token, and production sends (and sends through
    /// another provider instance) still go out; re-registering in production does not lift the sandbox entry.
    static func registryPerEnvironment(_ store: any DeliveryStore) async throws {
        _ = try await store.enqueue(send(to: [("tok", "apns", "sandbox")]), now: 0, idempotencyWindow: window)
        try await reject(store, token: "tok", reason: "BadDeviceToken", status: 400, invalidSince: nil,
                         environment: "sandbox", now: 10)
        let registry = try await store.invalidTokens(limit: 10)
        #expect(registry.count == 1)
        #expect(registry.first?.token == "tok" && registry.first?.provider == "apns")
        #expect(registry.first?.environment == "sandbox" && registry.first?.reason == "BadDeviceToken")
        #expect(registry.first?.invalidSince == 10, "no provider timestamp: the time it was recorded")
        // Production: sent. Sandbox: skipped. Another instance in sandbox: sent.
        #expect(try await states(store, [("tok", "apns", "production"), ("tok", "apns", "sandbox"),
                                         ("tok", "apns-enterprise", "sandbox")], now: 20)
                == [.pending, .skipped, .pending])
        let skippedSend = try await store.enqueue(send(to: [("tok", "apns", "sandbox")]), now: 21,
                                                  idempotencyWindow: window).sendID
        let skipped = try #require(try await store.deliveries(ofSend: skippedSend).first)
        #expect(skipped.last?.code == NorqError.Code.tokenInvalid.rawValue)
        #expect(skipped.last?.reason?.contains("BadDeviceToken") == true)
        // A production send of the token is delivered (claimed and finished), and the registry does not change.
        let claimed = try await store.claim(owner: "w", limit: 100, now: 30, leaseUntil: 130)
        #expect(claimed.filter { $0.identity == "tok" }.count == 2, "the production and the other instance's rows")
        _ = try await store.complete(claimed.map { .finish($0.lease!, StoredOutcome(state: .delivered, status: 200,
                                                                                     environment: "production")) },
                                     now: 31)
        #expect(try await store.invalidTokens(limit: 10).count == 1)
        // Re-registered in production only: sandbox stays skipped; in sandbox: sent again.
        try await store.registerToken("tok", provider: nil, environment: "production", at: 40)
        #expect(try await states(store, [("tok", "apns", "sandbox")], now: 41) == [.skipped])
        try await store.registerToken("tok", provider: "apns", environment: "sandbox", at: 50)
        #expect(try await states(store, [("tok", "apns", "sandbox")], now: 51) == [.pending])
        #expect(try await store.invalidTokens(limit: 10).first?.registeredAt == 50)
    }

    /// `Unregistered` in production keeps the provider's timestamp, is scoped to production like any other
    /// token-invalid answer, and an entry for each environment lists separately; a large (bulk) send applies the
    /// same matching.
    static func registryEnvironmentsInLargeSends(_ store: any DeliveryStore) async throws {
        _ = try await store.enqueue(send(to: [("tok", "apns", "production"), ("other", "apns", "sandbox")]), now: 0,
                                    idempotencyWindow: window)
        try await reject(store, token: "tok", reason: "Unregistered", status: 410, invalidSince: 5,
                         environment: "production", now: 10)
        try await reject(store, token: "other", reason: "BadDeviceToken", status: 400, invalidSince: nil,
                         environment: "sandbox", now: 20)
        let registry = try await store.invalidTokens(limit: 10)
        #expect(registry.map(\.token) == ["other", "tok"], "newest first")
        #expect(registry.last?.invalidSince == 5 && registry.last?.environment == "production")
        #expect(registry.last?.reason == "Unregistered" && registry.last?.recordedAt == 10)
        // 5,200 targets: more than one insert statement of either SQL store (PostgreSQL's bulk path).
        var targets: [(token: String, provider: String, environment: String?)] = []
        for index in 0..<5_200 {
            switch index {
            case 7: targets.append(("tok", "apns", "production"))
            case 8: targets.append(("tok", "apns", "sandbox"))
            case 5_100: targets.append(("other", "apns", "sandbox"))
            case 5_101: targets.append(("other", "apns", "production"))
            default: targets.append(("bulk\(index)", "apns", index.isMultiple(of: 2) ? "sandbox" : "production"))
            }
        }
        let id = try await store.enqueue(send(to: targets), now: 30, idempotencyWindow: window).sendID
        let rows = try await store.deliveries(ofSend: id)
        #expect(rows.count == 5_200)
        #expect(rows.filter { $0.state == .skipped }.map(\.position) == [7, 5_100])
        #expect(rows[7].last?.invalidSince == 5, "the provider's timestamp")
        #expect(rows[5_100].last?.reason?.contains("BadDeviceToken") == true)
        #expect(rows.filter { $0.state == .pending }.count == 5_198)
    }

    /// An entry recorded without an environment (a provider without environments, or one migrated from before the
    /// registry was per environment) matches every environment, as every entry did before; re-registering the token
    /// in one environment lifts it (it applied there too).
    static func registryEntryWithoutEnvironmentMatchesEvery(_ store: any DeliveryStore) async throws {
        _ = try await store.enqueue(send(to: [("fcm-tok", "fcm", nil)]), now: 0, idempotencyWindow: window)
        try await reject(store, token: "fcm-tok", reason: "UNREGISTERED", status: 404, invalidSince: nil,
                         environment: nil, now: 10)
        let registry = try await store.invalidTokens(limit: 10)
        #expect(registry.count == 1 && registry.first?.environment == nil && registry.first?.provider == "fcm")
        #expect(try await states(store, [("fcm-tok", "fcm", nil), ("fcm-tok", "fcm", "production"),
                                         ("fcm-tok", "fcm-2", nil)], now: 20)
                == [.skipped, .skipped, .pending])
        try await store.registerToken("fcm-tok", provider: "fcm", environment: "production", at: 30)
        #expect(try await states(store, [("fcm-tok", "fcm", nil)], now: 31) == [.pending])
    }

    static let environmentChecks: [(String, @Sendable (any DeliveryStore) async throws -> Void)] = [
        ("registryPerEnvironment", registryPerEnvironment),
        ("registryEnvironmentsInLargeSends", registryEnvironmentsInLargeSends),
        ("registryEntryWithoutEnvironmentMatchesEvery", registryEntryWithoutEnvironmentMatchesEvery),
    ]
}

/// The registry's matching rules, without a store.
@Suite struct RegistryRulesTests {
    @Test func anEntryMatchesItsProviderAndEnvironmentAndAnEmptyOneMatchesEvery() {
        func matches(_ entry: (String?, String?), _ target: (String?, String?)) -> Bool {
            DeliveryStoreRules.registryEntryMatches(entryProvider: entry.0, entryEnvironment: entry.1,
                                                    provider: target.0, environment: target.1)
        }
        #expect(matches(("apns", "sandbox"), ("apns", "sandbox")))
        #expect(!matches(("apns", "sandbox"), ("apns", "production")))
        #expect(!matches(("apns", "sandbox"), ("apns-2", "sandbox")))
        #expect(!matches(("apns", "sandbox"), ("apns", nil)), "a target without an environment is not in sandbox")
        #expect(matches(("apns", nil), ("apns", "production")) && matches(("apns", ""), ("apns", "sandbox")))
        #expect(matches((nil, nil), ("fcm", nil)) && matches(("", "sandbox"), ("apns-2", "sandbox")))
        #expect(!matches(("", "sandbox"), ("apns-2", "production")))
    }

    @Test func aRegistrationLimitedToAnEnvironmentLiftsThatEnvironmentsAndEmptyEntries() {
        func applies(_ entry: (String?, String?), _ filter: (String?, String?)) -> Bool {
            DeliveryStoreRules.registrationApplies(entryProvider: entry.0, entryEnvironment: entry.1,
                                                   provider: filter.0, environment: filter.1)
        }
        #expect(applies(("apns", "sandbox"), (nil, nil)))
        #expect(applies(("apns", "sandbox"), ("apns", "sandbox")) && applies(("apns", "sandbox"), (nil, "sandbox")))
        #expect(!applies(("apns", "sandbox"), (nil, "production")) && !applies(("apns", "sandbox"), ("apns-2", nil)))
        #expect(applies(("apns", nil), (nil, "production")) && applies((nil, nil), ("apns", "sandbox")))
    }
}
