public import Logging

/// Per-send options that reach the provider.
public struct SendOptions: Sendable, Hashable {
    /// The caller's idempotency key (the router generates one when absent).
    public var idempotencyKey: String?
    /// The per-token request id derived by the router (APNs `apns-id`), identical on every retry.
    public var requestID: String?
    /// The environment for tokens that do not name one (a token's own `environment` always wins, since a
    /// token only works in the environment it was issued for); overrides the provider's default.
    public var environment: PushEnvironment?
    public var priority: Int?
    public var expiration: PushExpiration?
    public var collapseID: String?
    /// Send time in UNIX epoch seconds (for relative expirations and Live Activity timestamps);
    /// the provider uses the wall clock when nil.
    public var sendTime: Int64?
    /// Identifies the content: calls that pass the same `contentID` pass the same content, so a provider may
    /// reuse what it derived from it (the encoded payload) without comparing the content again. The router
    /// sets one per send (it renders once per send); nil makes no such promise.
    public var contentID: UInt64?
    /// The app this notification is for (APNs `apns-topic` before its push-type suffix): one token-auth
    /// provider can serve several apps of a team. Wins over the template's `headers.apns-topic`; nil uses the
    /// template's, else the provider's bundle id.
    public var topic: String? = nil
    /// A server-side dry run: the provider asks its service to validate the request and deliver nothing (FCM
    /// `validate_only`). Only providers whose `supportsValidateOnly` is true receive such requests; the router
    /// fails the others' tokens with `routing/validate-only-unsupported` without sending.
    public var validateOnly: Bool = false

    public init(idempotencyKey: String? = nil, requestID: String? = nil, environment: PushEnvironment? = nil,
                priority: Int? = nil, expiration: PushExpiration? = nil, collapseID: String? = nil,
                sendTime: Int64? = nil, contentID: UInt64? = nil) {
        self.idempotencyKey = idempotencyKey
        self.requestID = requestID
        self.environment = environment
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.sendTime = sendTime
        self.contentID = contentID
    }
}

/// The plug-in point for delivery: APNs is built in; FCM, Web Push and others conform the same way.
/// What a provider says of its readiness (``PushProvider/health()``).
public struct ProviderHealth: Sendable, Hashable {
    public var isReady: Bool
    /// Why it is not ready (no secret in it), or nil.
    public var detail: String?

    public init(isReady: Bool, detail: String? = nil) {
        self.isReady = isReady
        self.detail = detail
    }

    public static let ready = ProviderHealth(isReady: true)
    public static func notReady(_ detail: String) -> ProviderHealth { ProviderHealth(isReady: false, detail: detail) }
}

public protocol PushProvider: Sendable {
    /// The instance name from `norq.yaml` (`apns`, `apns-enterprise`, ...).
    var name: String { get }
    /// The provider type (`apns`).
    var typeName: String { get }
    var platforms: Set<Platform> { get }
    var policy: DeliveryPolicy { get }

    /// Builds the exact request for one token. Pure and synchronous; the dry run prints its result.
    func prepare(_ content: PushContent, for token: PushToken, options: SendOptions) throws(NorqError) -> PreparedRequest

    /// Builds the request for one broadcast channel. Providers without broadcast throw
    /// `provider/broadcast-unsupported`.
    func prepare(_ content: PushContent, forChannel channel: ChannelRecipient, options: SendOptions) throws(NorqError) -> PreparedRequest

    /// Sends one prepared request once (no retries: the router owns them). Throws a `NorqError` for
    /// transport failures (`provider/transport-failed`, `provider/deadline-exceeded`).
    func deliver(_ request: PreparedRequest, deadline: ContinuousClock.Instant) async throws(NorqError) -> DeliveryResponse
    /// Starts sending one prepared request once and calls `completion` exactly once with what `deliver` would
    /// return or throw, on any thread (possibly before returning). The router delivers through this call, so a
    /// provider whose transport is callback based spares a suspended task per request in flight; `completion`
    /// must not block. The default runs `deliver` in a new task.
    func startDelivery(_ request: PreparedRequest, deadline: ContinuousClock.Instant,
                       completion: @escaping @Sendable (Result<DeliveryResponse, NorqError>) -> Void)

    /// Stops accepting requests and drains the ones in flight.
    func shutdown() async

    /// Whether this provider can deliver now, for readiness checks (`norq serve`'s `/readyz`): its credentials are
    /// loaded and its last connection attempt, if any, succeeded. Cheap and without I/O (it reports what the
    /// provider already knows). Default: ready.
    func health() -> ProviderHealth

    /// The collapse id a prepared request carries (APNs `apns-collapse-id`), or nil. A push with one replaces an
    /// earlier push with the same id on the device, so a duplicate is harmless: under `retry.ambiguous:
    /// collapsible` (the default) the router sends such a request again after a failure that the server may have
    /// processed. The default returns nil (never re-sent under `collapsible`).
    func collapseID(of request: PreparedRequest) -> String?

    /// Whether a final rejection tells the application to stop using the token (the router then raises an
    /// `InvalidTokenEvent`). The provider owns this fact; the default is "classified token-invalid".
    func isInvalidTokenAnswer(_ response: DeliveryResponse) -> Bool

    /// Every reason string this provider's answers may carry (`DeliveryResponse.reason`): the router keeps these
    /// as metric label values and counts any other as `other`, so labels stay bounded. Default: none.
    var knownReasons: Set<String> { get }

    /// What the provider calls the message id of a delivered outcome (`apns-id`, FCM's message `name`), for
    /// display (the CLI prints it beside the id). Default `message-id`.
    var messageIDName: String { get }

    /// Whether the provider honours `SendOptions.validateOnly` (its service validates a request and delivers
    /// nothing, as FCM's `validate_only`). Default false: the router never sends such a send's requests to it.
    var supportsValidateOnly: Bool { get }

    /// Whether `prepare` reads `SendOptions.requestID` (APNs sends it as `apns-id`). Default true. A provider
    /// whose service assigns the message id (FCM's `name`, Web Push's `Location`) says false: the router then
    /// makes the request id (a UUIDv5, ~5% of an FCM send's CPU) only where it needs it, as the message id of an
    /// outcome whose answer carried none.
    var readsRequestID: Bool { get }

    /// The environment a request for `target` with `options` goes to (what `prepare` puts in
    /// `PreparedRequest.environment`), or nil when the provider has no environments. APNs: the token's own
    /// environment, else `options.environment`, else the instance's configured one. The durable store's token
    /// registry is keyed by (token, provider instance, this environment), so that an answer from one environment
    /// (APNs `BadDeviceToken` for a sandbox token sent to production) does not block the token in the other. Pure
    /// and cheap (called once per target at enqueue). Default nil.
    func environment(for target: DeliveryTarget, options: SendOptions) -> PushEnvironment?
}

extension NorqError.Code {
    public static let broadcastUnsupported: Self = "provider/broadcast-unsupported"
}

extension PushProvider {
    public var typeName: String { name }

    public func prepare(_ content: PushContent, forChannel channel: ChannelRecipient,
                        options: SendOptions) throws(NorqError) -> PreparedRequest {
        throw NorqError(.broadcastUnsupported, "provider \(name) does not support broadcast channels")
    }

    public func shutdown() async {}

    public func health() -> ProviderHealth { .ready }

    public func collapseID(of request: PreparedRequest) -> String? { nil }

    public func isInvalidTokenAnswer(_ response: DeliveryResponse) -> Bool {
        response.classification == .tokenInvalid
    }

    public var knownReasons: Set<String> { [] }

    public var messageIDName: String { "message-id" }

    public var supportsValidateOnly: Bool { false }

    public var readsRequestID: Bool { true }

    public func environment(for target: DeliveryTarget, options: SendOptions) -> PushEnvironment? { nil }

    /// `deliver` for a provider whose own path is `startDelivery` (APNs, FCM, Web Push): awaits its completion.
    public func deliverThroughStart(_ request: PreparedRequest,
                                    deadline: ContinuousClock.Instant) async throws(NorqError) -> DeliveryResponse {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<DeliveryResponse, NorqError>, Never>) in
            startDelivery(request, deadline: deadline) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    public func startDelivery(_ request: PreparedRequest, deadline: ContinuousClock.Instant,
                              completion: @escaping @Sendable (Result<DeliveryResponse, NorqError>) -> Void) {
        Task {
            do throws(NorqError) {
                completion(.success(try await deliver(request, deadline: deadline)))
            } catch {
                completion(.failure(error))
            }
        }
    }
}

/// What a provider type needs to parse its `config:` block.
public struct ProviderConfigurationContext: Sendable {
    /// The instance name (`apns-enterprise`).
    public var instanceName: String
    /// Directory of the config file; relative paths (key files) resolve against it.
    public var baseDirectory: String
    /// The config file path, for error locations.
    public var file: String?
    public init(instanceName: String, baseDirectory: String, file: String? = nil) {
        self.instanceName = instanceName
        self.baseDirectory = baseDirectory
        self.file = file
    }
}

/// A provider type's parsed, validated configuration.
public protocol ProviderConfiguration: Sendable {
    /// Key/value lines that are safe to print (`norq validate`): never secrets.
    var summary: [(key: String, value: String)] { get }
}

/// What creating a provider instance receives besides its configuration.
public struct ProviderContext: Sendable {
    public var logger: Logger
    public init(logger: Logger = Logger(label: "norq")) {
        self.logger = logger
    }
}

/// A kind of provider (`apns`, `fcm`, ...): registers its config parser, validation and env prefix,
/// so that `NorqConfig` needs no change for a new provider.
public protocol ProviderType: Sendable {
    /// The `type:` value (`apns`).
    var typeName: String { get }
    /// Prefix of the env-var fallback (`NORQ_APNS_`).
    var environmentPrefix: String { get }
    var platforms: Set<Platform> { get }
    /// The push types (`apns-push-type` values) a template may name for this type's providers: templates are
    /// checked against the union of the registered types' lists (`TemplateRules`). Default: none.
    var pushTypes: Set<String> { get }
    /// The exact payloads this type's providers would send for `content` to tokens of `platforms` (a subset of
    /// `platforms` of the type), each with the provider's limit for it, measured by the provider's own payload
    /// code (the same bytes `prepare` builds; `options.sendTime` nil means now). Templates check `payload_bytes`
    /// and `norq validate` checks sizes with this (`TemplateRules.payloadSizers`). Throws the provider's error
    /// when it cannot build a payload for the content (the error a send would get). Default: none (nothing
    /// limits this type's payload, e.g. `console`).
    func payloadSizes(for content: PushContent, platforms: Set<Platform>,
                      options: SendOptions) throws(NorqError) -> [PayloadSize]

    /// Parses and validates a `config:` block.
    func parseConfiguration(_ node: ConfigNode, context: ProviderConfigurationContext) throws(NorqError) -> any ProviderConfiguration

    /// Builds a configuration from environment variables with this type's prefix, or nil when none is set.
    func configurationFromEnvironment(_ environment: [String: String],
                                      context: ProviderConfigurationContext) throws(NorqError) -> (any ProviderConfiguration)?

    /// What this type's providers call the message id of a delivered outcome (`PushProvider.messageIDName`), for
    /// tools that show stored outcomes without a live provider (`norq status`). Default `message-id`.
    var messageIDName: String { get }

    /// Creates a live provider instance.
    func makeProvider(name: String, configuration: any ProviderConfiguration, policy: DeliveryPolicy,
                      context: ProviderContext) throws(NorqError) -> any PushProvider
}

extension ProviderType {
    public var pushTypes: Set<String> { [] }

    public var messageIDName: String { "message-id" }

    public func payloadSizes(for content: PushContent, platforms: Set<Platform>,
                             options: SendOptions) throws(NorqError) -> [PayloadSize] { [] }
}
