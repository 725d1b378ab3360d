public import NorqCore

extension DeliveryStore {
    /// One call per token: the stores without a batch statement (the in-memory store takes one lock per token).
    public func registerTokens(_ tokens: [String], provider: String?, environment: String?,
                               at: Int64) async throws(NorqError) {
        for token in tokens {
            try await registerToken(token, provider: provider, environment: environment, at: at)
        }
    }
}
