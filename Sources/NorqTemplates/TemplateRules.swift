public import NorqCore

/// What the provider types allow a template to say, handed to the template compiler by whoever knows the
/// providers (the CLI, a deployment): the template language keeps no copy of a provider's lists.
public struct TemplateRules: Sendable, Hashable {
    /// The `apns-push-type` values the provider types know (`ProviderType.pushTypes`). Nil: the value is only
    /// checked to be a lowercase name when compiling, and the provider checks it when it prepares a request
    /// (APNs: `apns/invalid-push-type`).
    public var pushTypes: Set<String>?
    /// The provider types whose payloads `payload_bytes` (tests.yaml) and `norq validate` measure, each for the
    /// platforms it is used for (`ProviderType.payloadSizes`). Empty: no provider's payload is known, so
    /// `payload_bytes` is the size of the provider-neutral rendered output and no limit is checked (see
    /// `TemplateRules.payloadSizes(of:)`).
    public var payloadSizers: [PayloadSizer]

    public init(pushTypes: Set<String>? = nil, payloadSizers: [PayloadSizer] = []) {
        self.pushTypes = pushTypes
        self.payloadSizers = payloadSizers
    }

    /// The rules of `providerTypes`: the union of their push types (nil when none declares any), and each type's
    /// payload sizes for every platform it serves.
    public init(providerTypes: [any ProviderType]) {
        let known = providerTypes.reduce(into: Set<String>()) { $0.formUnion($1.pushTypes) }
        self.pushTypes = known.isEmpty ? nil : known
        self.payloadSizers = providerTypes.map { PayloadSizer($0) }
    }
}
