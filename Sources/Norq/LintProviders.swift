public import Logging
public import NorqConfig
public import NorqCore

/// The provider instances of a configuration, made (credentials loaded, nothing connected or sent) so that
/// ``TemplateLinter`` runs each one's own `prepare` on every sample, as a send would.
public struct LintProviders: Sendable {
    /// One provider instance and the platforms a send routes to it.
    public struct Entry: Sendable {
        /// The instance name (`apns`, `apns-enterprise`).
        public var name: String
        public var provider: any PushProvider
        /// The platforms routing sends to this instance (`push.ios`, `push`, or the only provider for a
        /// platform); every platform it serves when no rule names it (a token may still name it).
        public var platforms: [Platform]
        /// Whether a routing rule (or being the only provider of a platform) reaches this instance. False: only a
        /// token's own `provider` can, so its refusals are warnings.
        public var routed: Bool
    }

    public var entries: [Entry]
    /// A finding for each instance that could not be made (`apns/invalid-certificate` for a certificate key that
    /// cannot be read, ...), naming the instance and its place in the config file.
    public var failures: [LintFinding]

    public init(entries: [Entry] = [], failures: [LintFinding] = []) {
        self.entries = entries
        self.failures = failures
    }

    /// Makes every provider instance of `configuration` through its type in `registry`. An instance that cannot be
    /// made is a failure finding, not a thrown error: the others are still checked. Nil configuration: none.
    public static func make(configuration: NorqConfiguration?, registry: ProviderTypeRegistry,
                            logger: Logger = Self.quietLogger) -> LintProviders {
        guard let configuration else { return LintProviders() }
        var result = LintProviders()
        for instance in configuration.providers {
            let location: SourceLocation?
            if case .file(let at) = instance.origin { location = at } else { location = nil }
            guard let type = registry.type(named: instance.typeName) else {
                result.failures.append(LintFinding(
                    severity: .error, code: .configUnknownProviderType,
                    message: "provider \"\(instance.name)\" has type \"\(instance.typeName)\", which is not registered",
                    hint: "registered types: " + registry.typeNames.joined(separator: ", "),
                    file: location?.file, line: location?.line ?? 0, column: location?.column ?? 0,
                    provider: instance.name))
                continue
            }
            let provider: any PushProvider
            do throws(NorqError) {
                provider = try type.makeProvider(name: instance.name, configuration: instance.configuration,
                                                 policy: DeliveryPolicy(retry: instance.retry,
                                                                        maxInFlight: instance.maxInFlight),
                                                 context: ProviderContext(logger: logger))
            } catch {
                result.failures.append(Self.failure(error, instance: instance))
                continue
            }
            result.entries.append(entry(instance.name, provider: provider,
                                        served: type.platforms.union(provider.platforms),
                                        configuration: configuration) { other in
                registry.type(named: other.typeName)?.platforms ?? []
            })
        }
        return result
    }

    /// The entries of providers made already (a router's, as `norq preview` holds for its dry runs), routed as
    /// `configuration` routes them: nothing is made again. An instance the router could not make (an
    /// ``UnavailableProvider`` in its place) is a failure finding, as in ``make(configuration:registry:logger:)``.
    public static func make(configuration: NorqConfiguration?, providers: [String: any PushProvider]) -> LintProviders {
        guard let configuration else { return LintProviders() }
        var result = LintProviders()
        for instance in configuration.providers {
            guard let provider = providers[instance.name] else { continue }
            if let unavailable = provider as? UnavailableProvider {
                result.failures.append(Self.failure(unavailable.error, instance: instance))
                continue
            }
            result.entries.append(entry(instance.name, provider: provider, served: provider.platforms,
                                        configuration: configuration) { other in
                providers[other.name]?.platforms ?? []
            })
        }
        return result
    }

    /// One instance's entry: the platforms routing sends to it (a rule naming it, the default provider, or being
    /// the only provider serving the platform), else every platform it serves, unrouted.
    private static func entry(_ name: String, provider: any PushProvider, served: Set<Platform>,
                              configuration: NorqConfiguration,
                              platformsOf: (ProviderInstanceConfiguration) -> Set<Platform>) -> Entry {
        let named = served.filter { platform in
            if let route = configuration.routing.byPlatform[platform] { return route == name }
            if let fallback = configuration.routing.defaultProvider { return fallback == name }
            // No rule: the only provider of the platform gets its tokens.
            return configuration.providers.count { platformsOf($0).contains(platform) } == 1
        }
        let platforms = (named.isEmpty ? served : named).sorted { $0.rawValue < $1.rawValue }
        return Entry(name: name, provider: provider, platforms: platforms, routed: !named.isEmpty)
    }

    /// `error` of making `instance`, with the instance's name and type and, when the error has no place of its
    /// own, the instance's place in the config file.
    public static func failure(_ error: NorqError, instance: ProviderInstanceConfiguration) -> LintFinding {
        var finding = LintFinding(error, severity: .error, provider: instance.name)
        finding.message = "provider \(instance.name) (type \(instance.typeName), \(instance.origin)): " + error.message
        if finding.file == nil, case .file(let at) = instance.origin {
            finding.file = at.file
            finding.line = at.line
            finding.column = at.column
        }
        return finding
    }

    /// Drains every made provider (none has connected: linting never sends).
    public func shutdown() async {
        for entry in entries { await entry.provider.shutdown() }
    }

    /// A logger that keeps the providers quiet while linting (errors only).
    public static var quietLogger: Logger {
        var logger = Logger(label: "norq.lint")
        logger.logLevel = .error
        return logger
    }
}
