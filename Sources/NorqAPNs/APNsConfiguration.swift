public import NorqCore

/// How an APNs provider instance authenticates.
public enum APNsAuthentication: Sendable, Hashable {
    /// Token auth: an ES256 JWT signed with a PKCS#8 P-256 key (`.p8`).
    case token(keyID: String, teamID: String, privateKeyPEM: String, keySource: String)
    /// Certificate auth: a PEM chain and key (the key optionally encrypted), or PKCS#12.
    case certificate(APNsCertificateCredentials)

    /// True for token (JWT) auth.
    public var isToken: Bool {
        if case .token = self { return true }
        return false
    }
}

/// Certificate credentials as loaded from config (`certPath`/`certPem`, `certKeyPath`/`certKeyPem`, `pfxPath`, `passphrase`).
public struct APNsCertificateCredentials: Sendable, Hashable {
    public enum Material: Sendable, Hashable {
        case pem(certificateChainPEM: String, privateKeyPEM: String)
        case pkcs12(bytes: [UInt8])
    }
    public var material: Material
    /// Passphrase of an encrypted key or of the PKCS#12 file. Never printed.
    public var passphrase: String?
    /// Where it came from, for messages (`./secrets/cert.pem`, `certPem`).
    public var source: String

    public init(material: Material, passphrase: String? = nil, source: String) {
        self.material = material
        self.passphrase = passphrase
        self.source = source
    }
}

/// A host and port to connect to.
public struct APNsEndpoint: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public init(host: String, port: Int = 443) {
        self.host = host
        self.port = port
    }
    public static let production = APNsEndpoint(host: "api.push.apple.com")
    public static let sandbox = APNsEndpoint(host: "api.sandbox.push.apple.com")
    public static let managementProduction = APNsEndpoint(host: "api-manage-broadcast.push.apple.com", port: 2196)
    public static let managementSandbox = APNsEndpoint(host: "api-manage-broadcast.sandbox.push.apple.com", port: 2195)
    /// `host` when the port is 443, else `host:port` (the HTTP/2 `:authority`).
    public var authority: String { port == 443 ? host : "\(host):\(port)" }
    public var description: String { "https://\(host):\(port)" }

    /// The endpoint of an `:authority` (`host` or `host:port`, as ``authority`` writes it).
    init(authority: String) {
        if let colon = authority.lastIndex(of: ":"), !authority.hasSuffix("]"), let port = Int(authority[authority.index(after: colon)...]) {
            self.init(host: String(authority[..<colon]), port: port)
        } else {
            self.init(host: authority)
        }
    }
}

/// A validated APNs provider configuration (the `config:` block, or `NORQ_APNS_*` env vars).
public struct APNsConfiguration: ProviderConfiguration, Sendable, Hashable {
    public var authentication: APNsAuthentication
    /// The app's bundle id: the base `apns-topic`.
    public var bundleID: String
    /// Default environment for tokens that do not name one (`production: true|false`, default sandbox).
    public var production: Bool
    /// Overrides for device-push endpoints (`endpoint`, `sandboxEndpoint`, `productionEndpoint`).
    public var sandboxEndpoint: APNsEndpoint
    public var productionEndpoint: APNsEndpoint
    /// Channel-management endpoints (broadcast).
    public var managementSandboxEndpoint: APNsEndpoint
    public var managementProductionEndpoint: APNsEndpoint
    /// Broadcast-send endpoints (`POST /4/broadcasts/apps/<bundleId>`); nil sends to the device-push endpoint
    /// of the environment (`api[.sandbox].push.apple.com`), as Apple's command-line guide does.
    public var broadcastSandboxEndpoint: APNsEndpoint? = nil
    public var broadcastProductionEndpoint: APNsEndpoint? = nil
    /// Extra trusted CA certificates (PEM), from `caPath`.
    public var additionalTrustRootsPEM: String?
    /// `caPath` as written, for display.
    public var caPath: String?
    /// HTTP CONNECT proxy (`proxy: http://host:port`).
    public var proxy: APNsEndpoint?
    /// Connections per (environment, credentials). Default 1.
    public var connectionsPerEndpoint: Int
    /// Per-request deadline when the caller gives none. Default 10 s.
    public var requestTimeout: Duration
    /// JWT renewal age, 20-55 minutes. Default 50.
    public var tokenRefreshInterval: Duration
    /// Idle PING interval. Default 60 s.
    public var pingInterval: Duration
    /// Most concurrent streams per connection the client will use, even if the server allows more.
    public var maxConcurrentStreamsPerConnection: Int
    /// Where the configuration came from (`config` or `env`), for `norq validate`.
    public var origin: String
    /// After this many consecutive failed connection attempts to an endpoint, the requests waiting for a
    /// connection fail (not processed: the router retries them within its budget) and no attempt is made until
    /// the next request. Nil: they wait (with backoff between attempts) until their deadline. Default 1.
    public var connectionRetryLimit: Int? = 1
    /// A connection without requests for this long is closed. Nil (the default): kept open, with PING.
    public var idleTimeout: Duration? = nil

    public init(authentication: APNsAuthentication, bundleID: String, production: Bool = false,
                sandboxEndpoint: APNsEndpoint = .sandbox, productionEndpoint: APNsEndpoint = .production,
                managementSandboxEndpoint: APNsEndpoint = .managementSandbox,
                managementProductionEndpoint: APNsEndpoint = .managementProduction,
                additionalTrustRootsPEM: String? = nil, caPath: String? = nil, proxy: APNsEndpoint? = nil,
                connectionsPerEndpoint: Int = 1, requestTimeout: Duration = .seconds(10),
                tokenRefreshInterval: Duration = .seconds(50 * 60), pingInterval: Duration = .seconds(60),
                maxConcurrentStreamsPerConnection: Int = 1000, origin: String = "code") {
        self.authentication = authentication
        self.bundleID = bundleID
        self.production = production
        self.sandboxEndpoint = sandboxEndpoint
        self.productionEndpoint = productionEndpoint
        self.managementSandboxEndpoint = managementSandboxEndpoint
        self.managementProductionEndpoint = managementProductionEndpoint
        self.additionalTrustRootsPEM = additionalTrustRootsPEM
        self.caPath = caPath
        self.proxy = proxy
        self.connectionsPerEndpoint = connectionsPerEndpoint
        self.requestTimeout = requestTimeout
        self.tokenRefreshInterval = tokenRefreshInterval
        self.pingInterval = pingInterval
        self.maxConcurrentStreamsPerConnection = maxConcurrentStreamsPerConnection
        self.origin = origin
    }

    /// Safe-to-print lines for `norq validate`: never key material or passphrases.
    public var summary: [(key: String, value: String)] {
        var lines: [(key: String, value: String)] = []
        switch authentication {
        case .token(let keyID, let teamID, _, let source):
            lines.append(("auth", "token (ES256 JWT)"))
            lines.append(("keyId", keyID))
            lines.append(("teamId", teamID))
            lines.append(("key", source))
        case .certificate(let credentials):
            lines.append(("auth", "certificate"))
            lines.append(("certificate", credentials.source))
        }
        lines.append(("bundleId", bundleID))
        lines.append(("default environment", production ? "production" : "sandbox"))
        if sandboxEndpoint != .sandbox { lines.append(("sandboxEndpoint", sandboxEndpoint.description)) }
        if productionEndpoint != .production { lines.append(("productionEndpoint", productionEndpoint.description)) }
        if managementSandboxEndpoint != .managementSandbox {
            lines.append(("managementSandboxEndpoint", managementSandboxEndpoint.description))
        }
        if managementProductionEndpoint != .managementProduction {
            lines.append(("managementProductionEndpoint", managementProductionEndpoint.description))
        }
        if let endpoint = broadcastSandboxEndpoint { lines.append(("broadcastSandboxEndpoint", endpoint.description)) }
        if let endpoint = broadcastProductionEndpoint { lines.append(("broadcastProductionEndpoint", endpoint.description)) }
        if let caPath { lines.append(("caPath", caPath)) }
        if let proxy { lines.append(("proxy", proxy.description)) }
        if connectionRetryLimit != 1 { lines.append(("connectionRetryLimit", connectionRetryLimit.map(String.init) ?? "none")) }
        if let idleTimeout { lines.append(("idleTimeout", "\(idleTimeout)")) }
        return lines
    }
}
