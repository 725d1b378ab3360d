public import NorqCore

/// Options of one `NotificationRouter` send.
public struct RouterSendOptions: Sendable, Hashable, Codable {
    /// How the collapse id is chosen.
    public struct CollapseMode: Sendable, Hashable, RawRepresentable, Codable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// Whatever the template or `collapseID` says.
        public static let template = CollapseMode(rawValue: "template")
        /// When neither the template nor the options set one, derive `apns-collapse-id` from the idempotency
        /// key, so that even a retry after an ambiguous timeout cannot show two alerts.
        public static let idempotency = CollapseMode(rawValue: "idempotency")
    }

    /// The caller's idempotency key. With a key, repeats are deduplicated; without one a random key is used.
    public var idempotencyKey: String?
    /// Bound on all attempts of one token, from the moment the token's first attempt starts.
    public var deadline: Duration
    /// The environment of tokens that name none (overrides the provider's default); a token's own
    /// `environment` still wins, since a token only works in the environment it was issued for.
    public var environment: PushEnvironment?
    public var priority: Int?
    public var expiration: PushExpiration?
    public var collapseID: String?
    public var collapse: CollapseMode
    /// Strict rendering (missing variables are errors). Default true.
    public var strict: Bool
    /// Send time in UNIX epoch seconds, passed to providers (nil: wall clock).
    public var sendTime: Int64?
    /// The app (bundle id, `apns-topic` before its push-type suffix) for every token of this send; wins over
    /// the template's `headers.apns-topic`. Nil: the template's, else the provider's bundle id.
    public var topic: String? = nil
    /// A server-side dry run (FCM `validate_only`): providers that support it have their service validate each
    /// request and deliver nothing; the tokens of providers that do not (APNs, Web Push) fail with
    /// `routing/validate-only-unsupported` and nothing is sent to them. Default false.
    public var validateOnly: Bool = false

    public init(idempotencyKey: String? = nil, deadline: Duration = .seconds(30), environment: PushEnvironment? = nil,
                priority: Int? = nil, expiration: PushExpiration? = nil, collapseID: String? = nil,
                collapse: CollapseMode = .template, strict: Bool = true, sendTime: Int64? = nil) {
        self.idempotencyKey = idempotencyKey
        self.deadline = deadline
        self.environment = environment
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.collapse = collapse
        self.strict = strict
        self.sendTime = sendTime
    }
}
