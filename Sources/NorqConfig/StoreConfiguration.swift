public import NorqCore
public import NorqStore

/// The `store:` block of `norq.yaml`: where durable delivery keeps its outbox, idempotency keys and token
/// registry, and how it behaves. Without it nothing is stored (sends are delivered in process, as before).
///
/// ```yaml
/// store:
///   sqlite: ./norq.db                 # or: postgres: postgres://norq:${PGPASSWORD}@db:5432/norq
///   poolSize: 4                       # PostgreSQL connections
///   leaseDuration: 10s
///   retention: 168h                   # finished rows kept this long
///   idempotencyWindow: 24h
/// ```
public struct StoreConfiguration: Sendable, Hashable, CustomStringConvertible {
    /// The database.
    public enum Backend: Sendable, Hashable {
        /// A SQLite file (resolved against the config file's directory).
        case sqlite(path: String)
        case postgres(PostgresStoreConfiguration)
    }

    public var backend: Backend
    public var settings: DeliveryStoreSettings
    /// Where the block starts, for messages.
    public var location: SourceLocation?

    public init(backend: Backend, settings: DeliveryStoreSettings = DeliveryStoreSettings(),
                location: SourceLocation? = nil) {
        self.backend = backend
        self.settings = settings
        self.location = location
    }

    /// `sqlite ./norq.db` or `postgres postgres://user:***@host:port/db`: never a password.
    public var description: String {
        switch backend {
        case .sqlite(let path): "sqlite \(path)"
        case .postgres(let configuration): "postgres \(configuration)"
        }
    }

    /// The keys of `store:`.
    static let keys = ["sqlite", "postgres", "poolSize", "leaseDuration", "retention", "idempotencyWindow",
                       "callTimeout", "pollInterval", "claimBatchSize", "segmentSize"]
    /// The keys of a `postgres:` mapping.
    static let postgresKeys = ["url", "host", "port", "user", "username", "password", "database", "sslmode", "listen"]

    /// Parses and validates a `store:` node; relative SQLite paths resolve against `baseDirectory`.
    public static func parse(_ node: ConfigNode, baseDirectory: String) throws(NorqError) -> StoreConfiguration {
        let map = try node.mapping(allowedKeys: keys, path: "store")
        let backend: Backend
        switch (map["sqlite"], map["postgres"]) {
        case (let sqlite?, nil):
            var path = try sqlite.string(path: "store.sqlite")
            while path.hasPrefix("./") { path.removeFirst(2) }
            backend = .sqlite(path: ConfigurationLoader.resolve(path, against: baseDirectory))
        case (nil, let postgres?):
            backend = .postgres(try parsePostgres(postgres))
        case (.some, .some):
            throw NorqError(.configInvalidStore, "store: has both sqlite and postgres; choose one", at: node.location)
        case (nil, nil):
            throw NorqError(.configInvalidStore, "store: needs sqlite: <file> or postgres: <url>", at: node.location)
        }
        var settings = DeliveryStoreSettings()
        if let value = map["poolSize"] {
            settings.poolSize = try positive(value.int(path: "store.poolSize"), "store.poolSize", value)
        }
        if let value = map["segmentSize"] {
            let size = try positive(value.int(path: "store.segmentSize"), "store.segmentSize", value)
            guard size <= 100_000 else {
                throw NorqError(.configInvalidStore, "store.segmentSize must be at most 100000", at: value.location)
            }
            settings.segmentSize = size
        }
        if let value = map["claimBatchSize"] {
            settings.claimBatchSize = try positive(value.int(path: "store.claimBatchSize"), "store.claimBatchSize", value)
        }
        if let value = map["leaseDuration"] {
            settings.leaseDuration = try atLeast(value.duration(path: "store.leaseDuration"), .seconds(1), "store.leaseDuration", value)
        }
        if let value = map["retention"] {
            settings.retention = try atLeast(value.duration(path: "store.retention"), .seconds(60), "store.retention", value)
        }
        if let value = map["idempotencyWindow"] {
            settings.idempotencyWindow = try atLeast(value.duration(path: "store.idempotencyWindow"), .seconds(1),
                                                     "store.idempotencyWindow", value)
        }
        if let value = map["callTimeout"] {
            settings.callTimeout = try atLeast(value.duration(path: "store.callTimeout"), .milliseconds(100),
                                               "store.callTimeout", value)
        }
        if let value = map["pollInterval"] {
            settings.pollInterval = try atLeast(value.duration(path: "store.pollInterval"), .milliseconds(10),
                                                "store.pollInterval", value)
        }
        return StoreConfiguration(backend: backend, settings: settings, location: node.location)
    }

    static func parsePostgres(_ node: ConfigNode) throws(NorqError) -> PostgresStoreConfiguration {
        if node.scalar != nil {
            do {
                return try PostgresStoreConfiguration(url: try node.string(path: "store.postgres"))
            } catch {
                throw NorqError(.configInvalidStore, "store.postgres: \(error.message)", at: node.location)
            }
        }
        let map = try node.mapping(allowedKeys: postgresKeys, path: "store.postgres")
        var configuration = PostgresStoreConfiguration()
        if let url = map["url"] {
            do {
                configuration = try PostgresStoreConfiguration(url: try url.string(path: "store.postgres.url"))
            } catch {
                throw NorqError(.configInvalidStore, "store.postgres.url: \(error.message)", at: url.location)
            }
        }
        if let host = map["host"] { configuration.host = try host.string(path: "store.postgres.host") }
        if let port = map["port"] {
            let value = try port.int(path: "store.postgres.port")
            guard (1...65535).contains(value) else {
                throw NorqError(.configInvalidStore, "store.postgres.port must be from 1 to 65535", at: port.location)
            }
            configuration.port = value
        }
        if let user = map["user"] ?? map["username"] { configuration.username = try user.string(path: "store.postgres.user") }
        if let password = map["password"] { configuration.password = try password.string(path: "store.postgres.password") }
        if let database = map["database"] { configuration.database = try database.string(path: "store.postgres.database") }
        if let mode = map["sslmode"] {
            let text = try mode.string(path: "store.postgres.sslmode")
            guard let tls = PostgresStoreConfiguration.TLSMode.all.first(where: { $0.rawValue == text }) else {
                throw NorqError(.configInvalidStore, "store.postgres.sslmode must be disable, prefer or require",
                                at: mode.location)
            }
            configuration.tls = tls
        }
        if let listen = map["listen"] { configuration.listen = try listen.bool(path: "store.postgres.listen") }
        return configuration
    }

    private static func positive(_ value: Int, _ path: String, _ node: ConfigNode) throws(NorqError) -> Int {
        guard value > 0 else { throw NorqError(.configInvalidStore, "\(path) must be at least 1", at: node.location) }
        return value
    }

    private static func atLeast(_ value: Duration, _ minimum: Duration, _ path: String,
                                _ node: ConfigNode) throws(NorqError) -> Duration {
        guard value >= minimum else {
            throw NorqError(.configInvalidStore, "\(path) must be at least \(minimum)", at: node.location)
        }
        return value
    }
}
