public import NorqCore

/// What the provider types allow a template to say, handed to the template compiler by whoever knows the
/// providers (the CLI, a deployment): the template language keeps no copy of a provider's lists.
public struct TemplateRules: Sendable, Hashable {
    /// The `apns-push-type` values the provider types know (`ProviderType.pushTypes`). Nil: the value is only
    /// checked to be a lowercase name when compiling, and the provider checks it when it prepares a request
    /// (APNs: `apns/invalid-push-type`).
    public var pushTypes: Set<String>?

    public init(pushTypes: Set<String>? = nil) {
        self.pushTypes = pushTypes
    }

    /// The rules of `providerTypes`: the union of their push types (nil when none declares any).
    public init(providerTypes: [any ProviderType]) {
        let known = providerTypes.reduce(into: Set<String>()) { $0.formUnion($1.pushTypes) }
        self.pushTypes = known.isEmpty ? nil : known
    }
}
