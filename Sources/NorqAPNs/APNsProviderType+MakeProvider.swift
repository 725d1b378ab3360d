public import NorqCore

extension APNsProviderType {
    /// Creates a live APNs provider instance from a parsed `APNsConfiguration`.
    public func makeProvider(name: String, configuration: any ProviderConfiguration, policy: DeliveryPolicy,
                             context: ProviderContext) throws(NorqError) -> any PushProvider {
        guard let configuration = configuration as? APNsConfiguration else {
            throw NorqError(.apnsWrongConfiguration,
                            "provider \(name) of type apns was given a \(type(of: configuration)) configuration")
        }
        return try APNsProvider(name: name, configuration: configuration, policy: policy, logger: context.logger)
    }
}
