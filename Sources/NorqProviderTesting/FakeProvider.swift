public import NorqCore
public import Synchronization

/// A scripted provider for router tests (and third-party code that needs a provider without a network): `deliver` answers what the script says for (request, attempt number of that
/// token) and records every request.
public final class FakeProvider: PushProvider {
    public typealias Script = @Sendable (PreparedRequest, Int) async throws(NorqError) -> DeliveryResponse

    public struct State: Sendable {
        public var requests: [PreparedRequest] = []
        public var attemptsByToken: [String: Int] = [:]
        public var inFlight = 0
        public var maxInFlight = 0
        public var shutdownCalls = 0
        public var channelPrepares = 0
    }

    public let name: String
    public let typeName: String
    public let platforms: Set<Platform>
    public let policy: DeliveryPolicy
    public let supportsChannels: Bool
    /// The reasons this fake's answers use, kept as metric labels (`PushProvider.knownReasons`).
    public let knownReasons: Set<String>
    public let script: Script
    public let state = Mutex(State())

    public init(name: String, platforms: Set<Platform> = [.ios], retry: RetryPolicy = FakeProvider.fastRetry,
         maxInFlight: Int = 1000, supportsChannels: Bool = false,
         knownReasons: Set<String> = ["Unregistered", "ExpiredToken", "BadDeviceToken", "ServiceUnavailable",
                                      "TooManyRequests", "InternalServerError"],
         script: @escaping Script = { _, _ throws(NorqError) in FakeProvider.ok() }) {
        self.name = name
        self.typeName = "fake"
        self.platforms = platforms
        self.policy = DeliveryPolicy(retry: retry, idempotency: IdempotencyPolicy(requestIDHeader: "x-request-id"),
                                     maxInFlight: maxInFlight)
        self.supportsChannels = supportsChannels
        self.knownReasons = knownReasons
        self.script = script
    }

    public static let fastRetry = RetryPolicy(retries: 2, backoff: .milliseconds(1), maxBackoff: .milliseconds(4))

    public static func ok(_ id: String? = nil) -> DeliveryResponse {
        DeliveryResponse(status: 200, messageID: id, classification: .delivered)
    }

    public static func fail(_ status: Int, _ reason: String, _ classification: ResponseClass,
                     retryAfter: Duration? = nil, invalidSince: Int64? = nil) -> DeliveryResponse {
        DeliveryResponse(status: status, reason: reason, invalidSince: invalidSince, retryAfter: retryAfter,
                         classification: classification)
    }

    public func prepare(_ content: PushContent, for token: PushToken, options: SendOptions) throws(NorqError) -> PreparedRequest {
        if content.title == "too-large" { throw NorqError("apns/payload-too-large", "payload too large") }
        var headers = [HTTPHeader("x-request-id", options.requestID ?? "")]
        if let collapse = options.collapseID ?? content.headers.collapseID { headers.append(HTTPHeader("x-collapse", collapse)) }
        return PreparedRequest(method: "POST", authority: "fake.invalid", path: "/push/\(token.token)", headers: headers,
                               body: Array((content.title + "|" + content.body).utf8), provider: name,
                               target: .token(token), environment: environment(for: .token(token), options: options),
                               requestID: options.requestID)
    }

    /// As APNs: the token's own environment, else the options', else sandbox (channels: the options', else sandbox).
    public func environment(for target: DeliveryTarget, options: SendOptions) -> PushEnvironment? {
        if case .token(let token) = target, let environment = token.environment { return environment }
        return options.environment ?? .sandbox
    }

    public func prepare(_ content: PushContent, forChannel channel: ChannelRecipient,
                 options: SendOptions) throws(NorqError) -> PreparedRequest {
        guard supportsChannels else {
            throw NorqError(.broadcastUnsupported, "provider \(name) does not support broadcast channels")
        }
        state.withLock { $0.channelPrepares += 1 }
        return PreparedRequest(method: "POST", authority: "fake.invalid", path: "/channel/\(channel.channel)",
                               headers: [HTTPHeader("x-request-id", options.requestID ?? "")], body: [],
                               provider: name, target: .channel(channel), requestID: options.requestID)
    }

    public func deliver(_ request: PreparedRequest, deadline: ContinuousClock.Instant) async throws(NorqError) -> DeliveryResponse {
        let attempt = state.withLock { state in
            state.requests.append(request)
            state.inFlight += 1
            state.maxInFlight = max(state.maxInFlight, state.inFlight)
            let key = request.path
            state.attemptsByToken[key, default: 0] += 1
            return state.attemptsByToken[key] ?? 1
        }
        defer { state.withLock { $0.inFlight -= 1 } }
        return try await script(request, attempt)
    }

    public func shutdown() async {
        state.withLock { $0.shutdownCalls += 1 }
    }

    /// The collapse id the fake's requests carry (`x-collapse`), for the router's `retry.ambiguous: collapsible`.
    public func collapseID(of request: PreparedRequest) -> String? { request.header("x-collapse") }

    public var requests: [PreparedRequest] { state.withLock { $0.requests } }
    public var requestCount: Int { state.withLock { $0.requests.count } }
    public var peakInFlight: Int { state.withLock { $0.maxInFlight } }
    public var shutdownCalls: Int { state.withLock { $0.shutdownCalls } }
}

