import NorqCore

extension APNsProviderType {
    /// The eleven APNs push types (`APNsPushType.all`), which templates may name in `apns-push-type`.
    public var pushTypes: Set<String> { Set(APNsPushType.all.map(\.rawValue)) }
}
