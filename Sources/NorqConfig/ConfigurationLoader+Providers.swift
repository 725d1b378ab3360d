public import NorqCore

extension ConfigurationLoader {
    static let instanceKeys = ["type", "config", "retry", "maxInFlight"]
    static let retryKeys = ["on", "retries", "backoff", "max_backoff", "ambiguous"]

    func parseProviders(_ node: ConfigNode, file: String?,
                        baseDirectory: String) throws(NorqError) -> [ProviderInstanceConfiguration] {
        var result: [ProviderInstanceConfiguration] = []
        for entry in try node.orderedMapping(path: "providers") {
            let name = entry.key
            guard Self.isInstanceName(name) else {
                throw NorqError(.configInvalidValue,
                                "provider name \"\(name.prefix(40))\" must be letters, digits, \"-\" or \"_\"",
                                at: entry.keyNode.location)
            }
            let path = "providers.\(name)"
            let keys = try entry.value.mapping(allowedKeys: Self.instanceKeys, path: path)
            let typeName = try keys["type"]?.string(path: "\(path).type") ?? name
            guard let type = registry.type(named: typeName) else {
                let suggestion = ConfigNode.suggestion(for: typeName, among: registry.typeNames)
                let known = registry.typeNames.isEmpty ? "none registered" : registry.typeNames.joined(separator: ", ")
                throw NorqError(.configUnknownProviderType, "provider \(name) has unknown type \"\(typeName.prefix(40))\"",
                                at: (keys["type"] ?? entry.keyNode).location,
                                hint: suggestion.map { "did you mean \"\($0)\"?" } ?? "known types: \(known)")
            }
            let configNode = keys["config"] ?? ConfigNode(.null, at: entry.keyNode.location)
            let context = ProviderConfigurationContext(instanceName: name, baseDirectory: baseDirectory, file: file)
            let configuration = try type.parseConfiguration(configNode, context: context)
            let retry = try keys["retry"].map { node throws(NorqError) in try Self.parseRetry(node, path: "\(path).retry") }
                ?? .default
            var maxInFlight = 1000
            if let node = keys["maxInFlight"] {
                maxInFlight = try node.int(path: "\(path).maxInFlight")
                guard (1...1_000_000).contains(maxInFlight) else {
                    throw NorqError(.configInvalidValue, "\(path).maxInFlight must be between 1 and 1000000", at: node.location)
                }
            }
            result.append(ProviderInstanceConfiguration(name: name, typeName: typeName, configuration: configuration,
                                                        retry: retry, maxInFlight: maxInFlight,
                                                        origin: .file(entry.keyNode.location)))
        }
        return result
    }

    static func isInstanceName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 64 && name.unicodeScalars.allSatisfy {
            $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_")
        }
    }

    /// Parses a `retry:` block: `on` (statuses, or `4xx`/`5xx`), `retries`, `backoff`, `max_backoff`,
    /// `ambiguous` (`never` | `collapsible` | `always`; anything else is `config/invalid-ambiguous-retry`).
    public static func parseRetry(_ node: ConfigNode, path: String) throws(NorqError) -> RetryPolicy {
        let keys = try node.mapping(allowedKeys: retryKeys, path: path)
        var policy = RetryPolicy.default
        if let on = keys["on"] {
            var statuses = Set<Int>()
            let items: [ConfigNode]
            switch on.value {
            case .sequence(let list): items = list
            case .scalar: items = [on]
            case .null: items = []
            case .mapping:
                throw NorqError(.configInvalidType, "\(path).on must be a list of HTTP statuses", at: on.location)
            }
            for item in items {
                guard let text = item.scalar else {
                    throw NorqError(.configInvalidType, "\(path).on must be a list of HTTP statuses", at: item.location)
                }
                if text.count == 3, text.hasSuffix("xx"), let hundred = Int(text.prefix(1)), (1...5).contains(hundred) {
                    statuses.formUnion((hundred * 100)...(hundred * 100 + 99))
                } else if let status = Int(text), (100...599).contains(status) {
                    statuses.insert(status)
                } else {
                    throw NorqError(.configInvalidValue,
                                    "\(path).on: \(item.describe) is not an HTTP status (100-599, or 4xx/5xx)",
                                    at: item.location)
                }
            }
            policy.retryOn = statuses
        }
        if let node = keys["retries"] {
            policy.retries = try node.int(path: "\(path).retries")
            guard (0...20).contains(policy.retries) else {
                throw NorqError(.configInvalidValue, "\(path).retries must be between 0 and 20", at: node.location)
            }
        }
        if let node = keys["backoff"] { policy.backoff = try node.duration(path: "\(path).backoff") }
        if let node = keys["max_backoff"] {
            policy.maxBackoff = try node.duration(path: "\(path).max_backoff")
            guard policy.maxBackoff >= policy.backoff else {
                throw NorqError(.configInvalidValue, "\(path).max_backoff must not be less than backoff", at: node.location)
            }
        }
        if let node = keys["ambiguous"] { policy.ambiguous = try Self.parseAmbiguousRetry(node, path: "\(path).ambiguous") }
        return policy
    }

    /// Parses `retry.ambiguous`: one of `AmbiguousRetry.allValues`.
    static func parseAmbiguousRetry(_ node: ConfigNode, path: String) throws(NorqError) -> AmbiguousRetry {
        let allowed = AmbiguousRetry.allValues.map(\.rawValue)
        guard let text = node.scalar, let value = AmbiguousRetry.allValues.first(where: { $0.rawValue == text }) else {
            throw NorqError(.configInvalidAmbiguousRetry,
                            "\(path) must be one of \(allowed.joined(separator: ", ")), not \(node.describe)",
                            at: node.location,
                            hint: "never: a request that may have reached the provider is not sent again; "
                                + "collapsible: only when the push has a collapse id; always: always")
        }
        return value
    }

    /// One instance per registered type whose env vars are set, unless an instance of that name is declared.
    func environmentProviders(excluding declared: Set<String>) throws(NorqError) -> [ProviderInstanceConfiguration] {
        var result: [ProviderInstanceConfiguration] = []
        for typeName in registry.typeNames where !declared.contains(typeName) {
            guard let type = registry.type(named: typeName) else { continue }
            let context = ProviderConfigurationContext(instanceName: typeName, baseDirectory: workingDirectory, file: nil)
            guard let configuration = try type.configurationFromEnvironment(environment, context: context) else { continue }
            result.append(ProviderInstanceConfiguration(name: typeName, typeName: typeName, configuration: configuration,
                                                        origin: .environment(prefix: type.environmentPrefix)))
        }
        return result
    }
}
