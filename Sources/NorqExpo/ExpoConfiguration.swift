public import NorqCore

/// An `https://host[:port]` (or `http://`) base URL of the Expo push service.
public struct ExpoURL: Sendable, Hashable, CustomStringConvertible {
    public var scheme: String
    public var host: String
    public var port: Int

    public init(scheme: String = "https", host: String, port: Int = 443) {
        self.scheme = scheme
        self.host = host
        self.port = port
    }

    /// `https://exp.host`.
    public static let expo = ExpoURL(host: "exp.host")

    /// `host`, or `host:port` when the port is not the scheme's default (the HTTP/2 `:authority`).
    public var authority: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let defaultPort = scheme == "https" ? 443 : 80
        return port == defaultPort ? shownHost : "\(shownHost):\(port)"
    }

    public var description: String { "\(scheme)://\(authority)" }

    /// Parses `https://host[:port]` (a trailing `/` allowed, no other path); nil when malformed.
    public static func parse(_ text: String) -> ExpoURL? {
        guard text.hasPrefix("https://") else { return nil }
        var rest = Substring(text.dropFirst(8))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("/") else { return nil }
        var host = rest
        var port = 443
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let number = Int(after.dropFirst()) else { return nil }
                port = number
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            guard let number = Int(rest[rest.index(after: colon)...]) else { return nil }
            port = number
        }
        guard !host.isEmpty, (1...65535).contains(port),
              !host.contains(where: { $0 == " " || $0 == "@" || $0 == "?" || $0 == "#" }) else { return nil }
        return ExpoURL(host: String(host), port: port)
    }
}

/// A validated Expo provider configuration (the `config:` block, or `NORQ_EXPO_*` env vars).
///
/// `description` and `summary` say whether an access token is set and where it came from, never the token.
public struct ExpoConfiguration: ProviderConfiguration, Sendable, Hashable, CustomStringConvertible {
    /// The access token sent as `Authorization: Bearer ...` (needed when the Expo project enables enhanced push
    /// security); nil for anonymous access.
    public var accessToken: String?
    /// Where the access token came from, for display (`inline`, a file path, `env NORQ_EXPO_ACCESS_TOKEN`).
    public var accessTokenSource: String?
    /// The push service's base URL (default `https://exp.host`).
    public var endpoint: ExpoURL
    /// Extra trusted CA certificates (PEM), from `caPath` or `caPem`.
    public var additionalTrustRootsPEM: String?
    /// `caPath` as written (or `caPem (inline)`), for display.
    public var caPath: String?
    /// When receipts are fetched after a ticket (default 15 minutes, Expo's advice).
    public var receiptDelay: Duration
    /// Notifications per second per Expo project (Expo's limit: 600); 0 turns the provider's limiter off.
    public var rateLimit: Int
    /// Requests in flight at once (default 6, Expo's advice).
    public var maxConcurrentRequests: Int
    /// Per-request deadline within the caller's. Default 30 s.
    public var requestTimeout: Duration
    /// Gzip request bodies larger than this many bytes (default 1,024, as Expo's SDK); nil never compresses.
    public var gzipThreshold: Int?
    /// Where the configuration came from (`config`, `env` or `code`), for `norq validate`.
    public var origin: String

    public init(accessToken: String? = nil, accessTokenSource: String? = nil, endpoint: ExpoURL = .expo,
                additionalTrustRootsPEM: String? = nil, caPath: String? = nil, receiptDelay: Duration = .seconds(900),
                rateLimit: Int = 600, maxConcurrentRequests: Int = 6, requestTimeout: Duration = .seconds(30),
                gzipThreshold: Int? = 1024, origin: String = "code") {
        self.accessToken = accessToken
        self.accessTokenSource = accessToken == nil ? nil : (accessTokenSource ?? "code")
        self.endpoint = endpoint
        self.additionalTrustRootsPEM = additionalTrustRootsPEM
        self.caPath = caPath
        self.receiptDelay = receiptDelay
        self.rateLimit = rateLimit
        self.maxConcurrentRequests = maxConcurrentRequests
        self.requestTimeout = requestTimeout
        self.gzipThreshold = gzipThreshold
        self.origin = origin
    }

    /// `/--/api/v2/push/send`.
    public static let sendPath = "/--/api/v2/push/send"
    /// `/--/api/v2/push/getReceipts`.
    public static let receiptsPath = "/--/api/v2/push/getReceipts"

    /// Safe-to-print lines for `norq validate`: never the access token.
    public var summary: [(key: String, value: String)] {
        var lines: [(key: String, value: String)] = [
            ("auth", accessToken == nil ? "anonymous (no access token)" : "access token from \(accessTokenSource ?? "code")"),
        ]
        if endpoint != .expo { lines.append(("endpoint", endpoint.description)) }
        if let caPath { lines.append(("caPath", caPath)) }
        lines.append(("rateLimit", rateLimit == 0 ? "off" : "\(rateLimit)/s per project"))
        lines.append(("maxConcurrentRequests", String(maxConcurrentRequests)))
        lines.append(("receiptDelay", "\(receiptDelay.components.seconds)s"))
        return lines
    }

    public var description: String {
        "ExpoConfiguration(" + summary.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + ", origin: \(origin))"
    }
}
