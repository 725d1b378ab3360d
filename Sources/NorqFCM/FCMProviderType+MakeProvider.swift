public import NorqCore

extension FCMProviderType: ProviderType {
    /// Creates a live FCM provider instance from a parsed `FCMConfiguration`.
    public func makeProvider(name: String, configuration: any ProviderConfiguration, policy: DeliveryPolicy,
                             context: ProviderContext) throws(NorqError) -> any PushProvider {
        guard let configuration = configuration as? FCMConfiguration else {
            throw NorqError(.fcmWrongConfiguration,
                            "provider \(name) of type fcm was given a \(type(of: configuration)) configuration")
        }
        return try FCMProvider(name: name, configuration: configuration, policy: policy, logger: context.logger)
    }
}
