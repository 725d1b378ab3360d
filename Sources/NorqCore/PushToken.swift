import Crypto

/// Web Push subscription keys.
public struct WebPushKeys: Sendable, Hashable, Codable {
    public var p256dh: String
    public var auth: String
    public init(p256dh: String, auth: String) {
        self.p256dh = p256dh
        self.auth = auth
    }
}

/// One device token of a recipient, as in Norq's recipient JSON.
public struct PushToken: Sendable, Hashable {
    /// The device token (hex for APNs, a registration token for FCM, an endpoint URL for Web Push).
    public var token: String
    public var platform: Platform
    /// The provider instance that must deliver this token; overrides routing.
    public var provider: String? {
        get { extras?.provider }
        set { setExtras(provider: newValue, environment: environment, keys: keys) }
    }
    /// The APNs environment of this token; overrides the provider's `production` flag.
    public var environment: PushEnvironment? {
        get { extras?.environment }
        set { setExtras(provider: provider, environment: newValue, keys: keys) }
    }
    /// Web Push subscription keys.
    public var keys: WebPushKeys? {
        get { extras?.keys }
        set { setExtras(provider: provider, environment: environment, keys: newValue) }
    }

    /// The fields most tokens do not have, out of line: a token is then 40 bytes instead of 96, which a send to
    /// 100,000 recipients held in an array feels as 6 MB.
    private final class Extras: Sendable {
        let provider: String?
        let environment: PushEnvironment?
        let keys: WebPushKeys?
        init(provider: String?, environment: PushEnvironment?, keys: WebPushKeys?) {
            self.provider = provider
            self.environment = environment
            self.keys = keys
        }
    }
    private var extras: Extras?

    private mutating func setExtras(provider: String?, environment: PushEnvironment?, keys: WebPushKeys?) {
        extras = provider == nil && environment == nil && keys == nil
            ? nil : Extras(provider: provider, environment: environment, keys: keys)
    }

    public init(token: String, platform: Platform, provider: String? = nil,
                environment: PushEnvironment? = nil, keys: WebPushKeys? = nil) {
        self.token = token
        self.platform = platform
        setExtras(provider: provider, environment: environment, keys: keys)
    }

    public static func == (lhs: PushToken, rhs: PushToken) -> Bool {
        lhs.token == rhs.token && lhs.platform == rhs.platform && lhs.provider == rhs.provider
            && lhs.environment == rhs.environment && lhs.keys == rhs.keys
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(token)
        hasher.combine(platform)
        hasher.combine(provider)
        hasher.combine(environment)
        hasher.combine(keys)
    }

    /// The first 8 characters, for logs. A whole device token is never logged.
    public var redacted: String { Self.redact(token) }

    /// A token shortened for logs and messages: its first 8 characters and an ellipsis (stars when shorter).
    ///
    /// A Web Push endpoint (`https://…`) is a capability URL whose path is the secret: it shows its origin, an
    /// ellipsis for the path and the first 8 hex digits of the SHA-256 of the whole endpoint, e.g.
    /// `https://fcm.googleapis.com/…[3f9a12bc]`: enough to tell services and subscriptions apart in logs, and not
    /// reversible (the path is never shown).
    public static func redact(_ token: String) -> String {
        if let redacted = redactEndpoint(token) { return redacted }
        // Counts at most nine characters (a full `count` walks every grapheme of the token).
        let head = token.prefix(9)
        let shown = head.count
        return shown <= 8 ? String(repeating: "*", count: shown) : String(head.prefix(8)) + "…"
    }

    /// `scheme://authority/…[8 hex digits of SHA-256(endpoint)]` for an `http(s)://` URL (the authority cut to
    /// 64 characters, user info dropped); nil for anything else.
    static func redactEndpoint(_ token: String) -> String? {
        let utf8 = token.utf8
        let scheme: Int
        if utf8.starts(with: "https://".utf8) {
            scheme = 8
        } else if utf8.starts(with: "http://".utf8) {
            scheme = 7
        } else {
            return nil
        }
        let rest = utf8.dropFirst(scheme)
        let end = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
            ?? rest.endIndex
        var authority = rest[rest.startIndex..<end]
        if let at = authority.lastIndex(of: UInt8(ascii: "@")) { authority = authority[authority.index(after: at)...] }
        let shownAuthority = String(decoding: authority.prefix(64), as: UTF8.self)
            .filter { $0.isASCII && !$0.isWhitespace && $0 != "\u{7f}" && ($0.asciiValue ?? 0) >= 0x20 }
        let digest = SHA256.hash(data: Array(utf8))
        var hex = ""
        for byte in digest.prefix(4) {
            hex.append(Self.hexDigits[Int(byte >> 4)])
            hex.append(Self.hexDigits[Int(byte & 0x0f)])
        }
        return (scheme == 8 ? "https://" : "http://") + shownAuthority + (authority.count > 64 ? "…" : "") + "/…[" + hex + "]"
    }

    private static let hexDigits = Array("0123456789abcdef")

    /// Builds a token from loose JSON, validating platform, environment and web keys.
    public init(json: JSONValue) throws(NorqError) {
        guard case .object(let object) = json else {
            throw NorqError(.invalidRecipient, "a push token must be an object with \"token\" and \"platform\"")
        }
        // A Web Push subscription as `PushSubscription.toJSON()` gives it names its URL `endpoint`.
        guard case .string(let token)? = object["token"] ?? object["endpoint"], !token.isEmpty else {
            throw NorqError(.emptyToken, "a push token needs a non-empty \"token\" string")
        }
        guard let platformValue = object["platform"], platformValue != .null else {
            throw NorqError(.missingPlatform, "push token \(Self.shorten(token)) has no \"platform\" (ios, android or web)")
        }
        guard case .string(let platformName) = platformValue,
              let platform = Platform.known.first(where: { $0.rawValue == platformName })
        else {
            throw NorqError(.unknownPlatform,
                            "push token \(Self.shorten(token)) has unknown platform \(platformValue.compactDescription); expected ios, android or web")
        }
        var provider: String?
        if let value = object["provider"], value != .null {
            guard case .string(let name) = value else {
                throw NorqError(.invalidRecipient, "\"provider\" must be a string")
            }
            provider = name
        }
        var environment: PushEnvironment?
        if let value = object["environment"], value != .null {
            guard case .string(let name) = value else {
                throw NorqError(.invalidEnvironment, "environment must be \"sandbox\" or \"production\"")
            }
            environment = try PushEnvironment.parse(name)
        }
        var keys: WebPushKeys?
        if case .object(let keyObject)? = object["keys"],
           case .string(let p256dh)? = keyObject["p256dh"], case .string(let auth)? = keyObject["auth"],
           !p256dh.isEmpty, !auth.isEmpty {
            keys = WebPushKeys(p256dh: p256dh, auth: auth)
        }
        if platform == .web && keys == nil {
            throw NorqError(.missingVAPIDKeys, "web push token \(Self.shorten(token)) needs keys.p256dh and keys.auth")
        }
        self.init(token: token, platform: platform, provider: provider, environment: environment, keys: keys)
    }

    static func shorten(_ token: String) -> String {
        if let redacted = redactEndpoint(token) { return "\"\(redacted)\"" }
        return token.count <= 8 ? "\"…\"" : "\"\(token.prefix(8))…\""
    }
}
