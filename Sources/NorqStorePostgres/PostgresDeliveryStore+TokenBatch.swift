public import NorqCore
import NorqStore
import PostgresNIO

extension PostgresDeliveryStore {
    /// Every token of the batch in one UPDATE: the tokens are bound as one `text[]` and matched with `= ANY`
    /// through the registry's primary key (token first).
    public func registerTokens(_ tokens: [String], provider: String?, environment: String?,
                               at: Int64) async throws(NorqError) {
        guard !tokens.isEmpty else { return }
        let logger = self.logger
        // An entry without a provider or environment ('') applies everywhere: any filter re-registers it
        // (`DeliveryStoreRules.registrationApplies`), as in `registerToken`.
        try await call("recording \(tokens.count) token registrations") { client in
            _ = try await client.query("""
                UPDATE norq_invalid_tokens SET registered_at = greatest(coalesce(registered_at, \(at)), \(at))
                WHERE token = ANY(\(tokens)::text[]) AND (\(provider)::text IS NULL OR provider IN ('', \(provider)::text))
                    AND (\(environment)::text IS NULL OR environment IN ('', \(environment)::text))
                """, logger: logger)
        }
    }
}
