public import NorqCore
public import Crypto

/// An absolute `https://` push-resource URL, split the way the request needs it.
public struct WebPushEndpoint: Sendable, Hashable {
    /// The host, lowercased, without brackets for an IPv6 literal.
    public var host: String
    public var port: Int
    /// Path and query, starting with `/`.
    public var path: String

    /// `host` or `host:port` (brackets around an IPv6 literal): the HTTP `:authority`.
    public var authority: String {
        let shown = host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
        return port == 443 ? shown : "\(shown):\(port)"
    }

    /// `https://authority`: the VAPID `aud` and the key of the connection pool.
    public var origin: String { "https://" + authority }

    /// The same path and query on another origin (``WebPushConfiguration/originOverride``).
    package func moved(to override: WebPushOriginOverride) -> WebPushEndpoint {
        var moved = self
        moved.host = override.host.lowercased()
        moved.port = override.port
        return moved
    }

    /// Parses an endpoint; anything but an absolute `https://` URL with a host is `webpush/invalid-endpoint`.
    /// User info (`user@host`) is refused (it has no meaning for a push service and hides the real host).
    public init(parsing text: String) throws(NorqError) {
        func invalid(_ why: String) -> NorqError {
            NorqError(.webPushInvalidEndpoint, "web push endpoint \(PushToken.redact(text)) is not valid: \(why)")
        }
        guard text.utf8.count <= 4096 else { throw invalid("longer than 4096 bytes") }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw invalid("it contains spaces, control or non-ASCII characters")
        }
        guard text.utf8.count > 8, text.prefix(8).lowercased() == "https://" else {
            throw invalid("it must be an absolute https:// URL (Web Push is https only)")
        }
        let rest = text.dropFirst(8)
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var path = String(rest[authorityEnd...])
        if let hash = path.firstIndex(of: "#") { path = String(path[..<hash]) }
        if path.isEmpty || path.hasPrefix("?") { path = "/" + path }
        guard !authority.utf8.contains(UInt8(ascii: "@")) else { throw invalid("user info (user@host) is not allowed") }
        var host = authority
        var port = 443
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw invalid("unclosed [ in the host") }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let number = Int(after.dropFirst()) else { throw invalid("bad port") }
                port = number
            }
            guard IPAddress(parsing: String(host))?.isIPv6 == true else { throw invalid("bad IPv6 literal") }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            guard let number = Int(authority[authority.index(after: colon)...]) else { throw invalid("bad port") }
            port = number
        }
        guard !host.isEmpty else { throw invalid("no host") }
        guard (1...65535).contains(port) else { throw invalid("port out of range") }
        guard host.utf8.allSatisfy({ c in
            (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c == 45 || c == 46 || c == 58 || c == 95
        }) else { throw invalid("bad host name") }
        self.host = host.lowercased()
        self.port = port
        self.path = path
    }
}

/// A browser subscription's keys, decoded and checked (RFC 8291 §2): the user agent's P-256 public key and the
/// 16-byte authentication secret.
public struct WebPushSubscriptionKeys: Sendable {
    /// `ua_public`, 65 bytes, uncompressed.
    public let userAgentPublicKeyBytes: [UInt8]
    public let userAgentPublicKey: P256.KeyAgreement.PublicKey
    /// `auth_secret`, 16 bytes.
    public let authSecret: [UInt8]

    /// Decodes `keys.p256dh` and `keys.auth` (base64url): a p256dh that is not a point on P-256 is
    /// `webpush/invalid-p256dh`, an auth secret that is not 16 bytes `webpush/invalid-auth-secret`.
    public init(_ keys: WebPushKeys) throws(NorqError) {
        guard let point = Base64URL.decode(keys.p256dh), point.count == 65, point[0] == 0x04 else {
            throw NorqError(.webPushInvalidP256DH,
                            "keys.p256dh must be base64url of a 65-byte uncompressed P-256 point (0x04 || x || y)")
        }
        do {
            userAgentPublicKey = try P256.KeyAgreement.PublicKey(x963Representation: point)
        } catch {
            throw NorqError(.webPushInvalidP256DH, "keys.p256dh is not a point on the P-256 curve")
        }
        guard let auth = Base64URL.decode(keys.auth), auth.count == 16 else {
            throw NorqError(.webPushInvalidAuthSecret, "keys.auth must be base64url of exactly 16 bytes")
        }
        userAgentPublicKeyBytes = point
        authSecret = auth
    }
}
