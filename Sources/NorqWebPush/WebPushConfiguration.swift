public import NorqCore

/// A validated Web Push provider configuration (the `config:` block, or `NORQ_WEBPUSH_*` env vars).
/// Its `description` and `summary` never show the private key.
public struct WebPushConfiguration: ProviderConfiguration, Sendable, Hashable, CustomStringConvertible {
    /// The VAPID pair (`vapidPublicKey`, `vapidPrivateKey`), checked to match.
    public var vapidKeys: VAPIDKeyPair
    /// Where the private key came from (`inline`, a file path, `env NORQ_WEBPUSH_VAPID_PRIVATE_KEY`), for display.
    public var keySource: String
    /// `mailto:` or `https:` contact (the JWT `sub`).
    public var subject: String
    /// Host suffixes endpoints must match (`fcm.googleapis.com`, `.push.apple.com`); nil allows any public host.
    public var allowedHosts: [String]?
    /// Allows loopback, private, link-local and reserved addresses (tests, self-hosted push servers).
    public var allowPrivateEndpoints: Bool
    /// Extra trusted CA certificates (PEM), from `caPath`.
    public var additionalTrustRootsPEM: String?
    /// `caPath` as written, for display.
    public var caPath: String?
    /// Connections per push-service origin. Default 1 (HTTP/2 multiplexes).
    public var connectionsPerOrigin: Int
    /// Most origins with an open pool at once; the least recently used pool is closed beyond it. Default 64.
    public var maxOrigins: Int
    /// Per-request deadline when the caller gives none. Default 10 s.
    public var requestTimeout: Duration
    /// `TTL` when the template and the send give no expiration, in seconds. Default 28 days (2,419,200).
    public var defaultTTL: Int
    /// Plaintext padding: the payload is padded with zeros to the next multiple of this many bytes (hides its
    /// length; 0 = none). Never beyond the 4,096-byte body.
    public var paddingBlock: Int
    /// VAPID token lifetime (at most 24 h) and renewal margin.
    public var vapidRenewal: VAPIDRenewalPolicy
    /// `config` or `env`, for `norq validate`.
    public var origin: String
    /// Sends every request to this host and port instead of the endpoint's own origin (path and query kept; the
    /// VAPID `aud` is the origin connected to). Not a config key: `norq send --emulator` points the provider at
    /// the in-process push service this way, leaving the subscriptions themselves unchanged (so a durable send's
    /// idempotency fingerprint is the same on every run). The subscription's endpoint is still checked by the
    /// SSRF guard, and so is the destination (the CLI allows private endpoints for its emulator on 127.0.0.1).
    package var originOverride: WebPushOriginOverride?

    public init(vapidKeys: VAPIDKeyPair, keySource: String = "code", subject: String, allowedHosts: [String]? = nil,
                allowPrivateEndpoints: Bool = false, additionalTrustRootsPEM: String? = nil, caPath: String? = nil,
                connectionsPerOrigin: Int = 1, maxOrigins: Int = 64, requestTimeout: Duration = .seconds(10),
                defaultTTL: Int = 2_419_200, paddingBlock: Int = 0,
                vapidRenewal: VAPIDRenewalPolicy = VAPIDRenewalPolicy(), origin: String = "code") {
        self.vapidKeys = vapidKeys
        self.keySource = keySource
        self.subject = subject
        self.allowedHosts = allowedHosts
        self.allowPrivateEndpoints = allowPrivateEndpoints
        self.additionalTrustRootsPEM = additionalTrustRootsPEM
        self.caPath = caPath
        self.connectionsPerOrigin = connectionsPerOrigin
        self.maxOrigins = maxOrigins
        self.requestTimeout = requestTimeout
        self.defaultTTL = defaultTTL
        self.paddingBlock = paddingBlock
        self.vapidRenewal = vapidRenewal
        self.origin = origin
    }

    /// Safe-to-print lines for `norq validate`: the public key, never the private one.
    public var summary: [(key: String, value: String)] {
        var lines: [(key: String, value: String)] = [
            ("vapidPublicKey", vapidKeys.publicKeyBase64URL),
            ("vapidPrivateKey", "\(keySource) (not shown)"),
            ("subject", subject),
        ]
        if let allowedHosts { lines.append(("allowedHosts", allowedHosts.joined(separator: ", "))) }
        if allowPrivateEndpoints { lines.append(("allowPrivateEndpoints", "true (no SSRF guard on private addresses)")) }
        if let caPath { lines.append(("caPath", caPath)) }
        if let originOverride { lines.append(("originOverride", "https://\(originOverride.authority) (every endpoint)")) }
        return lines
    }

    public var description: String {
        "WebPushConfiguration(" + summary.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + ")"
    }

    public static func == (lhs: WebPushConfiguration, rhs: WebPushConfiguration) -> Bool {
        lhs.vapidKeys == rhs.vapidKeys && lhs.subject == rhs.subject && lhs.allowedHosts == rhs.allowedHosts
            && lhs.allowPrivateEndpoints == rhs.allowPrivateEndpoints
            && lhs.additionalTrustRootsPEM == rhs.additionalTrustRootsPEM && lhs.caPath == rhs.caPath
            && lhs.connectionsPerOrigin == rhs.connectionsPerOrigin && lhs.maxOrigins == rhs.maxOrigins
            && lhs.requestTimeout == rhs.requestTimeout && lhs.defaultTTL == rhs.defaultTTL
            && lhs.paddingBlock == rhs.paddingBlock && lhs.vapidRenewal == rhs.vapidRenewal
            && lhs.origin == rhs.origin && lhs.keySource == rhs.keySource && lhs.originOverride == rhs.originOverride
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(vapidKeys)
        hasher.combine(subject)
        hasher.combine(allowedHosts)
    }

    /// Whether `subject` is a `mailto:` address or an `https:` URL without spaces or angle brackets (Apple
    /// answers 403 BadJwtToken otherwise).
    public static func isValidSubject(_ subject: String) -> Bool {
        guard subject.utf8.count <= 512,
              subject.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: "<") && $0 != UInt8(ascii: ">") })
        else { return false }
        if subject.hasPrefix("mailto:") {
            let address = subject.dropFirst(7)
            guard let at = address.firstIndex(of: "@") else { return false }
            return at != address.startIndex && address.index(after: at) != address.endIndex
                && address[address.index(after: at)...].contains(".")
        }
        if subject.hasPrefix("https://") { return subject.count > 8 && !subject.dropFirst(8).hasPrefix("/") }
        return false
    }
}

/// Where ``WebPushConfiguration/originOverride`` sends every request: a host (name or IP literal, no brackets) and
/// a port.
package struct WebPushOriginOverride: Sendable, Hashable {
    package var host: String
    package var port: Int
    package init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
    /// `host:port`, brackets around an IPv6 literal.
    package var authority: String { (host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host) + ":\(port)" }
}
