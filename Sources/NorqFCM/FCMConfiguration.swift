public import NorqCore

/// An `https://host[:port][/path]` (or `http://` for a proxy) address.
public struct FCMURL: Sendable, Hashable, CustomStringConvertible {
    public var scheme: String
    public var host: String
    public var port: Int
    /// Path without query, `""` or starting with `/`.
    public var path: String

    public init(scheme: String = "https", host: String, port: Int = 443, path: String = "") {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.path = path
    }

    /// `host` when the port is the scheme's default, else `host:port` (the HTTP/2 `:authority`).
    public var authority: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let defaultPort = scheme == "https" ? 443 : 80
        return port == defaultPort ? shownHost : "\(shownHost):\(port)"
    }

    public var description: String { "\(scheme)://\(authority)\(path)" }

    /// `https://fcm.googleapis.com`.
    public static let fcm = FCMURL(host: "fcm.googleapis.com")
    /// `https://oauth2.googleapis.com/token`.
    public static let googleToken = FCMURL(host: "oauth2.googleapis.com", path: "/token")

    /// Parses `scheme://host[:port][/path]`; nil when malformed or of another scheme.
    public static func parse(_ text: String, scheme: String) -> FCMURL? {
        guard text.hasPrefix("\(scheme)://") else { return nil }
        var rest = Substring(text.dropFirst(scheme.count + 3))
        var path = ""
        if let slash = rest.firstIndex(of: "/") {
            path = String(rest[slash...])
            rest = rest[..<slash]
            if path == "/" { path = "" }
            if path.hasSuffix("/") { path.removeLast() }
        }
        var host = rest
        var port = scheme == "https" ? 443 : 80
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
              !host.contains(where: { $0 == "/" || $0 == " " || $0 == "@" || $0 == "?" || $0 == "#" }),
              !path.contains(where: { $0 == " " || $0 == "?" || $0 == "#" }) else { return nil }
        return FCMURL(scheme: scheme, host: String(host), port: port, path: path)
    }
}

/// A validated FCM provider configuration (the `config:` block, or `NORQ_FCM_*` env vars).
///
/// `description` and `summary` name where the service account came from and its e-mail, never key material.
public struct FCMConfiguration: ProviderConfiguration, Sendable, Hashable, CustomStringConvertible {
    /// The Firebase project id (or number) in `/v1/projects/<id>/messages:send`.
    public var projectID: String
    /// The service account that signs the OAuth assertions.
    public var serviceAccount: FCMServiceAccount
    /// Where the service account came from, for display: a file path, `inline JSON`, `env NORQ_FCM_SERVICE_ACCOUNT`.
    public var serviceAccountSource: String
    /// The FCM API origin (default `https://fcm.googleapis.com`).
    public var endpoint: FCMURL
    /// The OAuth token endpoint: `tokenEndpoint`, else the service account's `token_uri`, else Google's.
    public var tokenEndpoint: FCMURL
    /// Extra trusted CA certificates (PEM), from `caPath`.
    public var additionalTrustRootsPEM: String?
    /// `caPath` as written, for display.
    public var caPath: String?
    /// HTTP CONNECT proxy (`proxy: http://host:port`).
    public var proxy: FCMURL?
    /// HTTP/2 connections to the FCM endpoint. Default 1.
    public var connections: Int
    /// Most concurrent streams per connection the client will use, even if the server allows more. Default 1000.
    public var maxConcurrentStreams: Int
    /// Per-request deadline when the caller gives none. Default 15 s (FCM's backend timeout: retrying earlier
    /// only duplicates notifications, since FCM has no idempotency key).
    public var requestTimeout: Duration
    /// Send every message with `"validate_only": true`: FCM checks it and delivers nothing (a server-side dry run).
    public var validateOnly: Bool
    /// Where the configuration came from (`config`, `env` or `code`), for `norq validate`.
    public var origin: String

    public init(projectID: String, serviceAccount: FCMServiceAccount, serviceAccountSource: String = "code",
                endpoint: FCMURL = .fcm, tokenEndpoint: FCMURL? = nil, additionalTrustRootsPEM: String? = nil,
                caPath: String? = nil, proxy: FCMURL? = nil, connections: Int = 1, maxConcurrentStreams: Int = 1000,
                requestTimeout: Duration = .seconds(15), validateOnly: Bool = false, origin: String = "code") {
        self.projectID = projectID
        self.serviceAccount = serviceAccount
        self.serviceAccountSource = serviceAccountSource
        self.endpoint = endpoint
        self.tokenEndpoint = tokenEndpoint
            ?? serviceAccount.tokenURI.flatMap { FCMURL.parse($0, scheme: "https") } ?? .googleToken
        self.additionalTrustRootsPEM = additionalTrustRootsPEM
        self.caPath = caPath
        self.proxy = proxy
        self.connections = connections
        self.maxConcurrentStreams = maxConcurrentStreams
        self.requestTimeout = requestTimeout
        self.validateOnly = validateOnly
        self.origin = origin
    }

    /// `/v1/projects/<projectID>/messages:send`.
    public var sendPath: String { "/v1/projects/\(projectID)/messages:send" }

    /// Safe-to-print lines for `norq validate`: never key material.
    public var summary: [(key: String, value: String)] {
        var lines: [(key: String, value: String)] = [
            ("auth", "OAuth2 service account (RS256 assertion)"),
            ("projectId", projectID),
            ("serviceAccount", "\(serviceAccount.clientEmail) from \(serviceAccountSource)"),
        ]
        if endpoint != .fcm { lines.append(("endpoint", endpoint.description)) }
        if tokenEndpoint != .googleToken { lines.append(("tokenEndpoint", tokenEndpoint.description)) }
        if let caPath { lines.append(("caPath", caPath)) }
        if let proxy { lines.append(("proxy", proxy.description)) }
        if connections != 1 { lines.append(("connections", String(connections))) }
        if validateOnly { lines.append(("validateOnly", "true (FCM validates, delivers nothing)")) }
        return lines
    }

    public var description: String {
        "FCMConfiguration(" + summary.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + ", origin: \(origin))"
    }
}
