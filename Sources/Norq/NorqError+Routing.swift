public import NorqCore

extension NorqError.Code {
    /// No routing step found a provider for a token's platform (the token is skipped).
    public static let noProvider: Self = "routing/no-provider"
    /// A token (or the routing table) names a provider instance that does not exist.
    public static let unknownProvider: Self = "routing/unknown-provider"
    /// A token (or the routing table) names a provider that does not serve the token's platform.
    public static let platformNotSupported: Self = "routing/platform-not-supported"
    /// The template is disabled (`enabled: false`): every token is skipped.
    public static let templateDisabled: Self = "routing/template-disabled"
    /// A send by template name on a router built without templates.
    public static let noTemplates: Self = "routing/no-templates"
    /// The same (idempotency key, token) is being delivered by another send right now.
    public static let duplicateInFlight: Self = "routing/duplicate-in-flight"
    /// Two providers with the same instance name were given to the router.
    public static let duplicateProvider: Self = "routing/duplicate-provider"
    /// Data given as an `Encodable` could not be encoded to JSON.
    public static let invalidData: Self = "routing/invalid-data"
    /// A validate-only send (a server-side dry run) reached a provider without one: nothing was sent to the token.
    public static let validateOnlyUnsupported: Self = "routing/validate-only-unsupported"
}

extension NorqError.Code {
    /// The provider answered with a non-success status after all attempts; the outcome carries the status
    /// and the provider's reason.
    public static let rejectedByProvider: Self = "routing/rejected"
    /// The send's task was cancelled before this token was delivered.
    public static let sendCancelled: Self = "routing/cancelled"
}
