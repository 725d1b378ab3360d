public import NorqCore
import NorqStore
import SQLiteNIO

extension SQLiteDeliveryStore {
    /// Every token of the batch in one UPDATE: the tokens are bound as one JSON array and read with `json_each`
    /// (no limit on the number of SQL variables), matched through the registry's primary key (token first).
    public func registerTokens(_ tokens: [String], provider: String?, environment: String?,
                               at: Int64) async throws(NorqError) {
        guard !tokens.isEmpty else { return }
        let list = String(decoding: JSONValue.array(tokens.map(JSONValue.string)).serialized(), as: UTF8.self)
        try await call("recording \(tokens.count) token registrations") { connection in
            try await connection.run(Self.registerTokensStatement, [
                .integer(Int(at)), .text(list), provider.map(SQLiteData.text) ?? .null,
                environment.map(SQLiteData.text) ?? .null,
            ])
        }
    }

    /// An entry without a provider or environment ('') applies everywhere: any filter re-registers it
    /// (`DeliveryStoreRules.registrationApplies`), as in `registerToken`.
    static let registerTokensStatement = """
        UPDATE norq_invalid_tokens SET registered_at = max(coalesce(registered_at, ?1), ?1)
        WHERE token IN (SELECT value FROM json_each(?2))
            AND (?3 IS NULL OR provider IN ('', ?3)) AND (?4 IS NULL OR environment IN ('', ?4))
        """
}
