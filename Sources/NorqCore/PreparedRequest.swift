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
///
/// A value whose fields are in one shared, immutable box (a setter makes a new one): the router hands a request from
/// `prepare` to its job, to a batch's array and to the transport, and each of those copies is one retain instead of
/// one per field (a dozen strings, arrays and the target).
public struct PreparedRequest: Sendable, Hashable {
    /// Every field of a request, as the box holds them.
    private struct Fields: Sendable {
        var method: String
        var scheme: String
        var authority: String
        var path: String
        var headers: [HTTPHeader]
        var requestBody: RequestBody
        var provider: String
        var target: DeliveryTarget
        var environment: PushEnvironment?
        var requestID: String?
        var payloadLimit: Int?
        var redactions: [String: String]
    }

    /// The shared box: immutable, so a setter puts its change in a new box.
    private final class Storage: Sendable {
        let fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private var storage: Storage

    /// Sets one field: a new box with the others copied (setters are rare: a request is built whole by `prepare`).
    private mutating func change(_ body: (inout Fields) -> Void) {
        var fields = storage.fields
        body(&fields)
        storage = Storage(fields)
    }

    public var method: String {
        get { storage.fields.method }
        set { change { $0.method = newValue } }
    }
    /// `https`.
    public var scheme: String {
        get { storage.fields.scheme }
        set { change { $0.scheme = newValue } }
    }
    /// `host` or `host:port`.
    public var authority: String {
        get { storage.fields.authority }
        set { change { $0.authority = newValue } }
    }
    /// Path with query, e.g. `/3/device/<token>`.
    public var path: String {
        get { storage.fields.path }
        set { change { $0.path = newValue } }
    }
    /// Headers in send order, including `authorization` when the provider signs at prepare time.
    public var headers: [HTTPHeader] {
        get { storage.fields.headers }
        set { change { $0.headers = newValue } }
    }
    /// The body's bytes (a spliced body is joined on each read: transports send `requestBody`).
    public var body: [UInt8] {
        get { requestBody.bytes }
        set { requestBody = .bytes(newValue) }
    }
    /// The body as the provider made it.
    package var requestBody: RequestBody {
        get { storage.fields.requestBody }
        set { change { $0.requestBody = newValue } }
    }
    /// The provider instance that prepared it.
    public var provider: String {
        get { storage.fields.provider }
        set { change { $0.provider = newValue } }
    }
    public var target: DeliveryTarget {
        get { storage.fields.target }
        set { change { $0.target = newValue } }
    }
    /// The environment the request goes to, where the provider has environments.
    public var environment: PushEnvironment? {
        get { storage.fields.environment }
        set { change { $0.environment = newValue } }
    }
    /// The provider's per-request id (APNs `apns-id`), stable across retries.
    public var requestID: String? {
        get { storage.fields.requestID }
        set { change { $0.requestID = newValue } }
    }
    /// The payload size limit that applied, for dry-run display.
    public var payloadLimit: Int? {
        get { storage.fields.payloadLimit }
        set { change { $0.payloadLimit = newValue } }
    }
    /// Display values for secret headers (`authorization` -> `bearer <redacted ES256 JWT kid=… iss=…>`).
    public var redactions: [String: String] {
        get { storage.fields.redactions }
        set { change { $0.redactions = newValue } }
    }

    public init(method: String, scheme: String = "https", authority: String, path: String,
                headers: [HTTPHeader], body: [UInt8], provider: String, target: DeliveryTarget,
                environment: PushEnvironment? = nil, requestID: String? = nil, payloadLimit: Int? = nil,
                redactions: [String: String] = [:]) {
        self.init(method: method, scheme: scheme, authority: authority, path: path, headers: headers,
                  requestBody: .bytes(body), provider: provider, target: target, environment: environment,
                  requestID: requestID, payloadLimit: payloadLimit, redactions: redactions)
    }

    /// A request whose body is `requestBody` (spliced or not).
    package init(method: String, scheme: String = "https", authority: String, path: String,
                 headers: [HTTPHeader], requestBody: RequestBody, provider: String, target: DeliveryTarget,
                 environment: PushEnvironment? = nil, requestID: String? = nil, payloadLimit: Int? = nil,
                 redactions: [String: String] = [:]) {
        storage = Storage(Fields(method: method, scheme: scheme, authority: authority, path: path, headers: headers,
                                 requestBody: requestBody, provider: provider, target: target,
                                 environment: environment, requestID: requestID, payloadLimit: payloadLimit,
                                 redactions: redactions))
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
