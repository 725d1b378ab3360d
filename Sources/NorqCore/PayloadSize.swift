/// The size of one payload a provider would send, and the provider's limit for it: what a provider type's
/// ``ProviderType/payloadSizes(for:platforms:options:)`` measures with its own payload-building code, so that
/// templates, the CLI and the router check sizes by the provider's rules rather than by a copy of them.
public struct PayloadSize: Sendable, Hashable, CustomStringConvertible {
    /// The provider type that measured it (`apns`, `fcm`, `webpush`).
    public var provider: String
    /// The token platform the payload is built for when it depends on it (FCM builds one message per platform),
    /// else nil.
    public var platform: Platform?
    /// What was measured, in the provider's words (`payload (push type voip)`, `message`, `plaintext`).
    public var what: String
    /// The exact size in bytes.
    public var bytes: Int
    /// The largest size the provider accepts, in bytes; nil when nothing limits it.
    public var limit: Int?

    public init(provider: String, platform: Platform? = nil, what: String, bytes: Int, limit: Int?) {
        self.provider = provider
        self.platform = platform
        self.what = what
        self.bytes = bytes
        self.limit = limit
    }

    /// Bytes above the limit (0 when it fits or nothing limits it).
    public var excess: Int { limit.map { max(0, bytes - $0) } ?? 0 }
    /// Whether the payload fits its limit.
    public var fits: Bool { excess == 0 }

    /// Names the payload: `apns payload (push type voip)`, `fcm message for android tokens`.
    public var subject: String {
        var text = provider + " " + what
        if let platform { text += " for \(platform) tokens" }
        return text
    }

    /// `fcm message for android tokens: 4,200 bytes, 104 over the limit of 4,096`.
    public var description: String {
        var text = "\(subject): \(Self.grouped(bytes)) bytes"
        if let limit {
            text += excess > 0 ? ", \(Self.grouped(excess)) over the limit of \(Self.grouped(limit))"
                               : " (limit \(Self.grouped(limit)))"
        }
        return text
    }

    /// `4096` -> `4,096`.
    static func grouped(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var out = ""
        for (index, character) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(character)
        }
        return value < 0 ? "-" + out : out
    }
}

/// A provider type's payload sizes for the token platforms it is used for: what `TemplateRules` carries to the
/// template checks (`payload_bytes`, `norq validate`). Equal when the type names and platforms are.
public struct PayloadSizer: Sendable, Hashable {
    /// The provider type that measures.
    public let providerType: any ProviderType
    /// The platforms measured (for FCM, one message per platform); by default every platform of the type.
    public var platforms: Set<Platform>

    public init(_ providerType: any ProviderType, platforms: Set<Platform>? = nil) {
        self.providerType = providerType
        self.platforms = platforms ?? providerType.platforms
    }

    /// The type name (`apns`).
    public var typeName: String { providerType.typeName }

    /// The payloads the type's providers would send for `content` (see `ProviderType.payloadSizes`).
    public func sizes(of content: PushContent, options: SendOptions = SendOptions()) throws(NorqError) -> [PayloadSize] {
        try providerType.payloadSizes(for: content, platforms: platforms, options: options)
    }

    public static func == (lhs: PayloadSizer, rhs: PayloadSizer) -> Bool {
        lhs.typeName == rhs.typeName && lhs.platforms == rhs.platforms
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(typeName)
        hasher.combine(platforms)
    }
}
