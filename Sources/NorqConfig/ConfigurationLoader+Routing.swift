import NorqCore

extension ConfigurationLoader {
    /// `routing:` in the flat form (`push: apns`, `push.ios: apns`) or the nested one (`push: {ios: apns}`).
    /// Norq's channels other than push: a routing entry for one is kept, never used.
    public static let otherChannels = ["email", "sms", "slack", "whatsapp", "msteams"]

    func parseRouting(_ node: ConfigNode, providers: [ProviderInstanceConfiguration],
                      unserved: [UnservedProvider] = []) throws(NorqError) -> RoutingTable {
        let platformNames = Platform.known.map(\.rawValue)
        let allowed = ["push"] + platformNames.map { "push.\($0)" } + Self.otherChannels
        var table = RoutingTable()
        var seen: [Platform: SourceLocation] = [:]

        func set(_ platform: Platform?, _ valueNode: ConfigNode, path: String) throws(NorqError) {
            let name = try valueNode.string(path: path)
            if let other = unserved.first(where: { $0.name == name }) {
                throw NorqError(.configProviderNotServed,
                                "\(path) names provider \"\(name)\" (type \(other.typeName)), which this router does not serve",
                                at: valueNode.location,
                                hint: "route push to a provider this router serves: "
                                    + (providers.isEmpty ? "none is declared" : providers.map(\.name).joined(separator: ", ")))
            }
            guard let instance = providers.first(where: { $0.name == name }) else {
                let declared = providers.map(\.name)
                let suggestion = ConfigNode.suggestion(for: name, among: declared)
                throw NorqError(.configUnknownProvider, "\(path) names provider \"\(name.prefix(40))\", which is not declared",
                                at: valueNode.location,
                                hint: suggestion.map { "did you mean \"\($0)\"?" }
                                    ?? (declared.isEmpty ? "no providers are declared" : "declared: \(declared.joined(separator: ", "))"))
            }
            guard let platform else {
                table.defaultProvider = name
                return
            }
            if let type = registry.type(named: instance.typeName), !type.platforms.contains(platform) {
                throw NorqError(.configRoutingPlatformMismatch,
                                "\(path) routes \(platform) to \(name), but provider type \(instance.typeName) serves only "
                                    + type.platforms.map(\.rawValue).sorted().joined(separator: ", "),
                                at: valueNode.location)
            }
            if let previous = seen[platform] {
                throw NorqError(.configConflictingKeys,
                                "routing for \(platform) is set twice (also at line \(previous.line))", at: valueNode.location)
            }
            seen[platform] = valueNode.location
            table.byPlatform[platform] = name
        }

        for entry in try node.orderedMapping(allowedKeys: allowed, path: "routing") {
            if Self.otherChannels.contains(entry.key) {
                let name = try entry.value.string(path: "routing.\(entry.key)")
                let declared = providers.map(\.name) + unserved.map(\.name)
                guard declared.contains(name) else {
                    throw NorqError(.configUnknownProvider,
                                    "routing.\(entry.key) names provider \"\(name.prefix(40))\", which is not declared",
                                    at: entry.value.location,
                                    hint: ConfigNode.suggestion(for: name, among: declared).map { "did you mean \"\($0)\"?" })
                }
                table.otherChannels[entry.key] = name
                continue
            }
            if entry.key == "push" {
                if case .mapping = entry.value.value {
                    let nested = try entry.value.orderedMapping(allowedKeys: platformNames + ["default"], path: "routing.push")
                    for item in nested {
                        let platform = item.key == "default" ? nil : Platform(rawValue: item.key)
                        try set(platform, item.value, path: "routing.push.\(item.key)")
                    }
                } else {
                    try set(nil, entry.value, path: "routing.push")
                }
            } else {
                try set(Platform(rawValue: String(entry.key.dropFirst("push.".count))), entry.value, path: "routing.\(entry.key)")
            }
        }
        return table
    }
}
