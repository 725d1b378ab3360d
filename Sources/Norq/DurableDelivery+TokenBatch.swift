public import NorqCore

extension DurableDelivery {
    /// `registerToken(_:provider:environment:)` for a batch: the store records them all at once (one statement
    /// per batch in the SQL stores).
    public func registerTokens(_ tokens: [String], provider: String? = nil,
                               environment: PushEnvironment? = nil) async throws(NorqError) {
        try await store.registerTokens(tokens, provider: provider, environment: environment?.rawValue,
                                       at: clock.nowMillis())
    }
}
