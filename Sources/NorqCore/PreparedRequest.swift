/// One HTTP header, in the order it is sent. Names are lowercase (HTTP/2).
public struct HTTPHeader: Sendable, Hashable {
    public var name: String
    public var value: String
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// What a notification is addressed to: one device token or one broadcast channel.
public enum DeliveryTarget: Sendable, Hashable {
    case token(PushToken)
    case channel(ChannelRecipient)

    /// A short, log-safe form (first 8 characters).
    public var redacted: String {
        switch self {
        case .token(let token): return token.redacted
        case .channel(let channel): return "channel:" + String(channel.channel.prefix(8))
        }
    }
}

/// The exact request a provider will send: the dry run prints this, the transport sends it.
/// Building it is pure and synchronous (`PushProvider.prepare`).
public struct PreparedRequest: Sendable, Hashable {
    public var method: String
    /// `https`.
    public var scheme: String
    /// `host` or `host:port`.
    public var authority: String
    /// Path with query, e.g. `/3/device/<token>`.
    public var path: String
    /// Headers in send order, including `authorization` when the provider signs at prepare time.
    public var headers: [HTTPHeader]
    public var body: [UInt8]
    /// The provider instance that prepared it.
    public var provider: String
    public var target: DeliveryTarget
    /// The environment the request goes to, where the provider has environments.
    public var environment: PushEnvironment?
    /// The provider's per-request id (APNs `apns-id`), stable across retries.
    public var requestID: String?
    /// The payload size limit that applied, for dry-run display.
    public var payloadLimit: Int?
    /// Display values for secret headers (`authorization` -> `bearer <redacted ES256 JWT kid=… iss=…>`).
    public var redactions: [String: String]

    public init(method: String, scheme: String = "https", authority: String, path: String,
                headers: [HTTPHeader], body: [UInt8], provider: String, target: DeliveryTarget,
                environment: PushEnvironment? = nil, requestID: String? = nil, payloadLimit: Int? = nil,
                redactions: [String: String] = [:]) {
        self.method = method
        self.scheme = scheme
        self.authority = authority
        self.path = path
        self.headers = headers
        self.body = body
        self.provider = provider
        self.target = target
        self.environment = environment
        self.requestID = requestID
        self.payloadLimit = payloadLimit
        self.redactions = redactions
    }

    public var url: String { "\(scheme)://\(authority)\(path)" }

    /// The value of the first header with this (lowercase) name.
    public func header(_ name: String) -> String? {
        headers.first(where: { $0.name == name })?.value
    }

    /// Headers safe to print: secret ones replaced by their redaction.
    public var displayHeaders: [HTTPHeader] {
        headers.map { header in
            if let shown = redactions[header.name] { return HTTPHeader(header.name, shown) }
            return header
        }
    }
}
