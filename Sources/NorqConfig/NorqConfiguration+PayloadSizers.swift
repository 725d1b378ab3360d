public import NorqCore

extension NorqConfiguration {
    /// The payload sizers of the configured providers (for `TemplateRules.payloadSizers`): one per provider type
    /// in use, for the platforms routing sends to its instances. A platform with its own route (`push.ios`) counts
    /// for the instance it names; a platform without one for the default (`push`), or, when there is no default,
    /// for every instance that serves it (the only provider for it). An instance routing never names is measured
    /// for all its type's platforms (a token may name it). Types not in `registry` are left out; empty when no
    /// provider is configured.
    public func payloadSizers(registry: ProviderTypeRegistry) -> [PayloadSizer] {
        var sizers: [PayloadSizer] = []
        for instance in providers {
            guard let type = registry.type(named: instance.typeName) else { continue }
            var platforms = type.platforms.filter { platform in
                if let named = routing.byPlatform[platform] { return named == instance.name }
                if let fallback = routing.defaultProvider { return fallback == instance.name }
                return true
            }
            if platforms.isEmpty { platforms = type.platforms }
            if let index = sizers.firstIndex(where: { $0.typeName == type.typeName }) {
                sizers[index].platforms.formUnion(platforms)
            } else {
                sizers.append(PayloadSizer(type, platforms: platforms))
            }
        }
        return sizers
    }
}
