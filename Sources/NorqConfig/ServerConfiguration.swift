public import NorqCore

extension NorqError.Code {
    /// The `server:` block of `norq.yaml` is invalid (bad port, an API key without a name or key, a duplicate
    /// key name, a limit below its minimum). The message never contains a key.
    public static let configInvalidServer: Self = "config/invalid-server"
    /// Two entries of `server.apiKeys` have the same secret: a presented key would match both, so one's scopes
    /// would never apply. The message names both entries, never the secret.
    public static let configDuplicateAPIKey: Self = "config/duplicate-api-key"
}

/// The `server:` block of `norq.yaml`: how `norq serve` listens and whom it lets in.
///
/// ```yaml
/// server:
///   host: 127.0.0.1
///   port: 8080
///   apiKeys:
///     - { name: billing, key: "${NORQ_KEY_BILLING}", templates: [order-shipped], providers: [apns] }
///     - { name: ops, key: "${NORQ_KEY_OPS}", scopes: [metrics, register-tokens, read-all] }
///   limits:
///     bodyBytes: 1048576          # largest request body (bytes)
///     recipients: 10000           # most targets in one send
///     ratePerSecond: 100          # per API key, sustained
///     burst: 200                  # per API key, at once
///     waitTimeout: 30s            # longest ?wait=true
///     idleTimeout: 60s            # an idle or slow client is disconnected after this
///     bodyTimeout: 10s            # longest time to receive one request body
///   tls:                          # optional: HTTPS (TLS 1.2+) with this certificate chain and key (PEM)
///     certPath: ./tls/server.pem
///     keyPath: ./tls/server.key
/// ```
public struct ServerConfiguration: Sendable, CustomStringConvertible {
    /// One API key. `description` never prints the key.
    public struct APIKey: Sendable, CustomStringConvertible {
        /// A name for logs, metrics and errors (never the key itself).
        public var name: String
        /// The secret as configured (usually `${VAR}`); the server keeps only its SHA-256.
        public var secret: String
        /// Templates this key may send or render; nil: all.
        public var templates: [String]?
        /// Provider instances this key may send through; nil: all.
        public var providers: [String]?
        /// What this key may do beyond sending, rendering, validating and reading its own sends: a subset of
        /// ``ServerConfiguration/APIKey/knownScopes``. Empty: nothing more.
        public var scopes: Set<String>

        /// `admin`: every scope. `read-all`: the status of any send (not only the key's own). `register-tokens`:
        /// `POST /v1/tokens/invalid` with `register`. `metrics`: `GET /metrics`.
        public static let knownScopes: [String] = ["admin", "read-all", "register-tokens", "metrics"]

        public init(name: String, secret: String, templates: [String]? = nil, providers: [String]? = nil,
                    scopes: Set<String> = []) {
            self.name = name
            self.secret = secret
            self.templates = templates
            self.providers = providers
            self.scopes = scopes
        }

        public var description: String { "api key \(name) (key redacted)" }
    }

    /// Bounds on what one client can make the server do.
    public struct Limits: Sendable, Hashable {
        /// The largest request body, in bytes (a larger one is `server/body-too-large`, 413).
        public var bodyBytes: Int = 1 << 20
        /// Most targets (tokens and channels) in one send (`server/too-many-recipients`, 413).
        public var recipients: Int = 10_000
        /// Requests per second per API key, sustained (`server/rate-limited`, 429).
        public var ratePerSecond: Double = 100
        /// Requests per API key at once before the rate applies.
        public var burst: Int = 200
        /// The longest `?wait=true`; after it the answer is 202 with the progress so far.
        public var waitTimeout: Duration = .seconds(30)
        /// A connection idle (or a client this slow) for this long is closed.
        public var idleTimeout: Duration = .seconds(60)
        /// The longest time from a request's head to the end of its body; a slower client's connection is closed.
        public var bodyTimeout: Duration = .seconds(10)

        public init() {}
    }

    /// HTTPS: the server's certificate chain and private key, PEM files (paths resolved against the config file's
    /// directory). `description` prints the paths, never the key.
    public struct TLS: Sendable, Hashable {
        public var certificatePath: String
        public var keyPath: String

        public init(certificatePath: String, keyPath: String) {
            self.certificatePath = certificatePath
            self.keyPath = keyPath
        }
    }

    public var host: String = "127.0.0.1"
    public var port: Int = 8080
    public var apiKeys: [APIKey] = []
    public var limits = Limits()
    /// nil: plain HTTP (put a TLS-terminating proxy in front, or listen on loopback only).
    public var tls: TLS?
    public var location: SourceLocation?

    public init(host: String = "127.0.0.1", port: Int = 8080, apiKeys: [APIKey] = [], limits: Limits = Limits()) {
        self.host = host
        self.port = port
        self.apiKeys = apiKeys
        self.limits = limits
    }

    public var description: String {
        "server \(tls == nil ? "http" : "https")://\(host):\(port), \(apiKeys.count) api keys (\(apiKeys.map(\.name).joined(separator: ", ")))"
    }

    static let keys = ["host", "port", "apiKeys", "limits", "tls"]
    static let tlsKeys = ["certPath", "keyPath"]
    static let apiKeyKeys = ["name", "key", "templates", "providers", "scopes"]
    static let limitKeys = ["bodyBytes", "recipients", "ratePerSecond", "burst", "waitTimeout", "idleTimeout",
                            "bodyTimeout"]

    /// Parses and validates a `server:` node; relative TLS paths resolve against `baseDirectory`.
    public static func parse(_ node: ConfigNode, baseDirectory: String = ".") throws(NorqError) -> ServerConfiguration {
        let map = try node.mapping(allowedKeys: keys, path: "server")
        var server = ServerConfiguration()
        server.location = node.location
        if let host = map["host"] { server.host = try host.string(path: "server.host") }
        if let port = map["port"] {
            let value = try port.int(path: "server.port")
            guard (0...65535).contains(value) else {
                throw NorqError(.configInvalidServer, "server.port must be from 0 to 65535 (0: any free port)", at: port.location)
            }
            server.port = value
        }
        if let list = map["apiKeys"], list.value != .null {
            guard case .sequence(let items) = list.value else {
                throw NorqError(.configInvalidServer, "server.apiKeys must be a list of {name, key}", at: list.location)
            }
            var names = Set<String>()
            var secrets: [String: String] = [:]  // secret -> the name of the entry that has it (kept in memory only)
            for (index, item) in items.enumerated() {
                let path = "server.apiKeys[\(index)]"
                let entry = try item.mapping(allowedKeys: apiKeyKeys, path: path)
                guard let nameNode = entry["name"] else {
                    throw NorqError(.configInvalidServer, "\(path) needs a name", at: item.location)
                }
                let name = try nameNode.string(path: "\(path).name")
                guard let keyNode = entry["key"], case .scalar(let secret, _) = keyNode.value, !secret.isEmpty else {
                    throw NorqError(.configInvalidServer, "\(path) (\(name)) needs a non-empty key, e.g. key: ${NORQ_API_KEY}",
                                    at: item.location)
                }
                guard secret.utf8.count >= 16 else {
                    throw NorqError(.configInvalidServer, "\(path) (\(name)): the key is shorter than 16 bytes",
                                    at: keyNode.location, hint: "generate one: openssl rand -hex 32")
                }
                guard names.insert(name).inserted else {
                    throw NorqError(.configInvalidServer, "\(path): the name \"\(name)\" is used twice", at: nameNode.location)
                }
                if let first = secrets[secret] {
                    throw NorqError(.configDuplicateAPIKey,
                                    "\(path) (\(name)) has the same key as \(first): each API key needs its own secret",
                                    at: keyNode.location, hint: "generate one per key: openssl rand -hex 32")
                }
                secrets[secret] = name
                let scopes = try stringList(entry["scopes"], "\(path).scopes") ?? []
                if let unknown = scopes.first(where: { !APIKey.knownScopes.contains($0) }) {
                    throw NorqError(.configInvalidServer,
                                    "\(path).scopes: unknown scope \"\(unknown.prefix(64))\" (known: \(APIKey.knownScopes.joined(separator: ", ")))",
                                    at: entry["scopes"]?.location ?? item.location)
                }
                server.apiKeys.append(APIKey(name: name, secret: secret,
                                             templates: try stringList(entry["templates"], "\(path).templates"),
                                             providers: try stringList(entry["providers"], "\(path).providers"),
                                             scopes: Set(scopes)))
            }
        }
        if let limitsNode = map["limits"] {
            let limits = try limitsNode.mapping(allowedKeys: limitKeys, path: "server.limits")
            if let value = limits["bodyBytes"] {
                server.limits.bodyBytes = try atLeast(value.int(path: "server.limits.bodyBytes"), 1024, "server.limits.bodyBytes", value)
            }
            if let value = limits["recipients"] {
                server.limits.recipients = try atLeast(value.int(path: "server.limits.recipients"), 1, "server.limits.recipients", value)
            }
            if let value = limits["burst"] {
                server.limits.burst = try atLeast(value.int(path: "server.limits.burst"), 1, "server.limits.burst", value)
            }
            if let value = limits["ratePerSecond"] {
                guard let scalar = value.scalar, let rate = Double(scalar), rate > 0, rate.isFinite else {
                    throw NorqError(.configInvalidServer, "server.limits.ratePerSecond must be a number above 0", at: value.location)
                }
                server.limits.ratePerSecond = rate
            }
            if let value = limits["waitTimeout"] {
                server.limits.waitTimeout = try value.duration(path: "server.limits.waitTimeout")
            }
            if let value = limits["idleTimeout"] {
                let duration = try value.duration(path: "server.limits.idleTimeout")
                guard duration >= .seconds(1) else {
                    throw NorqError(.configInvalidServer, "server.limits.idleTimeout must be at least 1s", at: value.location)
                }
                server.limits.idleTimeout = duration
            }
            if let value = limits["bodyTimeout"] {
                let duration = try value.duration(path: "server.limits.bodyTimeout")
                guard duration >= .milliseconds(100) else {
                    throw NorqError(.configInvalidServer, "server.limits.bodyTimeout must be at least 100ms", at: value.location)
                }
                server.limits.bodyTimeout = duration
            }
        }
        if let tlsNode = map["tls"], tlsNode.value != .null {
            let tls = try tlsNode.mapping(allowedKeys: tlsKeys, path: "server.tls")
            guard let cert = tls["certPath"], let key = tls["keyPath"] else {
                throw NorqError(.configInvalidServer, "server.tls needs certPath and keyPath (PEM files)", at: tlsNode.location)
            }
            server.tls = TLS(
                certificatePath: ConfigurationLoader.resolve(try cert.string(path: "server.tls.certPath"), against: baseDirectory),
                keyPath: ConfigurationLoader.resolve(try key.string(path: "server.tls.keyPath"), against: baseDirectory))
        }
        return server
    }

    private static func stringList(_ node: ConfigNode?, _ path: String) throws(NorqError) -> [String]? {
        guard let node else { return nil }
        guard case .sequence(let items) = node.value else {
            throw NorqError(.configInvalidServer, "\(path) must be a list of names", at: node.location)
        }
        var result: [String] = []
        for item in items { result.append(try item.string(path: path)) }
        return result
    }

    private static func atLeast(_ value: Int, _ minimum: Int, _ path: String, _ node: ConfigNode) throws(NorqError) -> Int {
        guard value >= minimum else {
            throw NorqError(.configInvalidServer, "\(path) must be at least \(minimum)", at: node.location)
        }
        return value
    }
}
