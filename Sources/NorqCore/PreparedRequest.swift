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

/// A request body as a provider made it: its bytes, or a shared head and tail around one string's UTF-8 (a body
/// made per token, written by the transport part by part, without an array of its own per request).
package enum RequestBody: Sendable {
    case bytes([UInt8])
    /// `head`, then `middle`'s UTF-8, then `tail`.
    case spliced(head: [UInt8], middle: String, tail: [UInt8])

    package var count: Int {
        switch self {
        case .bytes(let bytes): bytes.count
        case .spliced(let head, let middle, let tail): head.count + middle.utf8.count + tail.count
        }
    }

    /// The body's bytes (joined when spliced).
    package var bytes: [UInt8] {
        switch self {
        case .bytes(let bytes):
            return bytes
        case .spliced(let head, let middle, let tail):
            var joined: [UInt8] = []
            joined.reserveCapacity(count)
            joined.append(contentsOf: head)
            joined.append(contentsOf: middle.utf8)
            joined.append(contentsOf: tail)
            return joined
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
    /// The body's bytes (a spliced body is joined on each read: transports send `requestBody`).
    public var body: [UInt8] {
        get { requestBody.bytes }
        set { requestBody = .bytes(newValue) }
    }
    /// The body as the provider made it.
    package var requestBody: RequestBody
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
        self.init(method: method, scheme: scheme, authority: authority, path: path, headers: headers,
                  requestBody: .bytes(body), provider: provider, target: target, environment: environment,
                  requestID: requestID, payloadLimit: payloadLimit, redactions: redactions)
    }

    /// A request whose body is `requestBody` (spliced or not). The public init delegates here, not the other way
    /// round: delegating to it and then replacing the body built the request in a temporary, copied it out and
    /// destroyed it, per push (`Benchmarks/README.md`, "FCM at 0.8 x h2load, stop 28").
    package init(method: String, scheme: String = "https", authority: String, path: String,
                 headers: [HTTPHeader], requestBody: RequestBody, provider: String, target: DeliveryTarget,
                 environment: PushEnvironment? = nil, requestID: String? = nil, payloadLimit: Int? = nil,
                 redactions: [String: String] = [:]) {
        self.method = method
        self.scheme = scheme
        self.authority = authority
        self.path = path
        self.headers = headers
        self.requestBody = requestBody
        self.provider = provider
        self.target = target
        self.environment = environment
        self.requestID = requestID
        self.payloadLimit = payloadLimit
        self.redactions = redactions
    }

    /// Equal when every field is, the body compared by its bytes (however it is held).
    public static func == (lhs: PreparedRequest, rhs: PreparedRequest) -> Bool {
        lhs.method == rhs.method && lhs.scheme == rhs.scheme && lhs.authority == rhs.authority
            && lhs.path == rhs.path && lhs.headers == rhs.headers && lhs.provider == rhs.provider
            && lhs.target == rhs.target && lhs.environment == rhs.environment && lhs.requestID == rhs.requestID
            && lhs.payloadLimit == rhs.payloadLimit && lhs.redactions == rhs.redactions && lhs.body == rhs.body
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(method)
        hasher.combine(scheme)
        hasher.combine(authority)
        hasher.combine(path)
        hasher.combine(headers)
        hasher.combine(body)
        hasher.combine(provider)
        hasher.combine(target)
        hasher.combine(environment)
        hasher.combine(requestID)
        hasher.combine(payloadLimit)
        hasher.combine(redactions)
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
