public import NorqCore

/// One provider instance of `norq.yaml` (or of the env-var fallback), parsed and validated.
public struct ProviderInstanceConfiguration: Sendable {
    /// Where an instance was declared.
    public enum Origin: Sendable, Hashable, CustomStringConvertible {
        /// In a config file, at the instance's key.
        case file(SourceLocation)
        /// From environment variables with this prefix (`NORQ_APNS_`).
        case environment(prefix: String)

        /// `norq.yaml:4` or `env NORQ_APNS_*`.
        public var description: String {
            switch self {
            case .file(let location): "\(location.file ?? "<input>"):\(location.line)"
            case .environment(let prefix): "env \(prefix)*"
            }
        }
    }

    /// The instance name (`apns`, `apns-enterprise`): what routing and tokens refer to.
    public var name: String
    /// The provider type (`apns`).
    public var typeName: String
    /// The type's parsed configuration (for APNs an `APNsConfiguration`).
    public var configuration: any ProviderConfiguration
    public var retry: RetryPolicy
    /// Most requests in flight at once for this instance.
    public var maxInFlight: Int
    public var origin: Origin

    public init(name: String, typeName: String, configuration: any ProviderConfiguration,
                retry: RetryPolicy = .default, maxInFlight: Int = 1000, origin: Origin) {
        self.name = name
        self.typeName = typeName
        self.configuration = configuration
        self.retry = retry
        self.maxInFlight = maxInFlight
        self.origin = origin
    }
}

/// Which provider instance serves which platform (`routing:` of `norq.yaml`).
public struct RoutingTable: Sendable, Hashable {
    /// `push: apns`: the fallback for every platform.
    public var defaultProvider: String?
    /// `push.ios: apns` (or `push: {ios: apns}`).
    public var byPlatform: [Platform: String]

    public init(defaultProvider: String? = nil, byPlatform: [Platform: String] = [:]) {
        self.defaultProvider = defaultProvider
        self.byPlatform = byPlatform
    }

    /// The instance for `platform`: its own entry, else the default; nil when neither is set.
    public func provider(for platform: Platform) -> String? {
        byPlatform[platform] ?? defaultProvider
    }

    /// Entries for Norq's other channels (`email: resend`, `sms: twilio`): kept and shown by `norq validate`,
    /// never used by this router, which sends push only.
    public var otherChannels: [String: String] = [:]

    /// True when no push entry is set.
    public var isEmpty: Bool { defaultProvider == nil && byPlatform.isEmpty }
}

/// A provider the config declares for a channel this router does not send (`resend` for email, `twilio` for
/// SMS, a custom HTTP adapter) or a push provider without an implementation here (`expo`). It loads without
/// error, so that a Norq project works unchanged, and `norq validate` lists it as not served by this router.
public struct UnservedProvider: Sendable, Hashable {
    /// The instance name (`resend`).
    public var name: String
    /// The provider type (`resend`, or `custom` for an HTTP adapter).
    public var typeName: String
    /// The channels it serves in Norq (`email`, `sms`, ...).
    public var channels: [String]
    /// Where it is declared.
    public var location: SourceLocation

    public init(name: String, typeName: String, channels: [String], location: SourceLocation) {
        self.name = name
        self.typeName = typeName
        self.channels = channels
        self.location = location
    }
}

/// Which key named the templates folder: ours (`templates:`) or Norq's (`notifications:`). A `notifications:`
/// project uses Norq's template ids (`transactional/orders/order-shipped`).
public enum TemplatesKey: String, Sendable, Hashable {
    case templates
    case notifications
}

/// A loaded, validated `norq.yaml` (plus env-var fallback providers).
public struct NorqConfiguration: Sendable {
    /// The config file path as given or found, nil for env-only or in-memory configurations.
    public var file: String?
    /// `templates:` resolved against the config file's directory; nil when not set.
    public var templatesDirectory: String?
    /// Provider instances in declaration order; env-var fallback instances come last.
    public var providers: [ProviderInstanceConfiguration]
    public var routing: RoutingTable
    /// The key that set ``templatesDirectory``; nil when neither was set.
    public var templatesKey: TemplatesKey? = nil
    /// Providers declared for channels this router does not serve (see ``UnservedProvider``).
    public var unservedProviders: [UnservedProvider] = []
    /// Norq top-level keys present and read past (`brand`, `codegen`, ...).
    public var ignoredKeys: [String] = []
    /// `store:`: durable delivery's database; nil when not configured (sends are delivered in process).
    public var store: StoreConfiguration?
    /// `server:`: how `norq serve` listens and its API keys; nil when not configured.
    public var server: ServerConfiguration?
    /// `telemetry:`: whether `norq serve` exports spans (off when not configured).
    public var telemetry = TelemetryConfiguration()

    public init(file: String? = nil, templatesDirectory: String? = nil,
                providers: [ProviderInstanceConfiguration] = [], routing: RoutingTable = RoutingTable()) {
        self.file = file
        self.templatesDirectory = templatesDirectory
        self.providers = providers
        self.routing = routing
    }

    /// The instance named `name`, or nil.
    public func provider(named name: String) -> ProviderInstanceConfiguration? {
        providers.first { $0.name == name }
    }
}
