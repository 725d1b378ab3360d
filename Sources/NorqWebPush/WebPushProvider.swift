public import NorqCore
public import Logging
import NorqHTTP2
import Synchronization

/// The built-in Web Push provider (RFC 8030 delivery, RFC 8291 encryption, RFC 8292 VAPID): encrypts the
/// rendered payload for each subscription, signs with a VAPID token cached per push-service origin, and sends
/// through one client per push-service origin (see ``makeTransport``), behind the server-side request forgery
/// guard.
public final class WebPushProvider: PushProvider {
    public let name: String
    public var typeName: String { "webpush" }
    public let platforms: Set<Platform> = [.web]
    public let policy: DeliveryPolicy
    public let configuration: WebPushConfiguration

    let logger: Logger
    let clock: WebPushClock
    let endpointGuard: WebPushEndpointGuard
    let tokens: VAPIDTokenCache
    let transport: any WebPushTransport
    private let lastPayload = Mutex<(contentID: UInt64?, content: PushContent, bytes: [UInt8])?>(nil)

    /// - Parameter clock: the wall clock for VAPID `exp` and absolute expirations (inject one to simulate hours).
    public convenience init(name: String, configuration: WebPushConfiguration, policy: DeliveryPolicy = DeliveryPolicy(),
                            logger: Logger = Logger(label: "norq.webpush"), clock: WebPushClock = .system) throws(NorqError) {
        let endpointGuard = WebPushEndpointGuard(allowedHosts: configuration.allowedHosts,
                                                 allowPrivateEndpoints: configuration.allowPrivateEndpoints)
        let transport = try Self.makeTransport(configuration: configuration, endpointGuard: endpointGuard, logger: logger)
        self.init(name: name, configuration: configuration, policy: policy, logger: logger, clock: clock,
                  transport: transport)
    }

    package init(name: String, configuration: WebPushConfiguration, policy: DeliveryPolicy, logger: Logger,
                 clock: WebPushClock, transport: any WebPushTransport) {
        self.name = name
        self.configuration = configuration
        var policy = policy
        policy.idempotency.requestIDHeader = nil
        policy.idempotency.serverDeduplicates = false
        self.policy = policy
        var logger = logger
        logger[metadataKey: "provider"] = .string(name)
        self.logger = logger
        self.clock = clock
        self.endpointGuard = WebPushEndpointGuard(allowedHosts: configuration.allowedHosts,
                                                  allowPrivateEndpoints: configuration.allowPrivateEndpoints)
        self.tokens = VAPIDTokenCache(signer: VAPIDSigner(keys: configuration.vapidKeys, subject: configuration.subject),
                                      policy: configuration.vapidRenewal, capacity: max(64, configuration.maxOrigins * 4))
        self.transport = transport
    }

    // MARK: prepare

    /// Builds the encrypted `POST <endpoint>` for one subscription. Checks, before anything is sent: keys present
    /// (`provider/missing-vapid-keys`), an absolute https endpoint (`webpush/invalid-endpoint`) the guard allows
    /// (`webpush/endpoint-not-allowed`), valid keys (`webpush/invalid-p256dh`, `webpush/invalid-auth-secret`), the
    /// TTL (`webpush/invalid-ttl`) and the size (`webpush/payload-too-large`).
    /// Throws `template/invalid-header-value` when the collapse id (the template's or the send's) cannot be written
    /// as a header value on HTTP/2 (RFC 9113 §8.2.1, ``HTTP2FieldRules``). `prepare` and `norq validate`'s payload
    /// pass (`payloadSizes`) call it alike.
    static func checkHeaderValues(of content: PushContent, options: SendOptions) throws(NorqError) {
        guard let collapseID = options.collapseID ?? content.headers.collapseID,
              let problem = HTTP2FieldRules.valueProblem(collapseID) else { return }
        throw NorqError.invalidHeaderValue("apns-collapse-id", template: content.templateName, problem: problem)
    }

    public func prepare(_ content: PushContent, for token: PushToken, options: SendOptions) throws(NorqError) -> PreparedRequest {
        guard let keys = token.keys else {
            throw NorqError(.missingVAPIDKeys, "web push subscription \(token.redacted) needs keys.p256dh and keys.auth")
        }
        let subscribed = try WebPushEndpoint(parsing: token.token)
        try endpointGuard.check(subscribed)
        let endpoint = configuration.originOverride.map(subscribed.moved(to:)) ?? subscribed
        let subscription = try WebPushSubscriptionKeys(keys)
        let now = clock.epochSeconds()
        let sendTime = options.sendTime ?? now
        let ttl = try WebPushHeaders.ttl(expiration: options.expiration ?? content.headers.expiration,
                                         sendTime: sendTime, defaultTTL: configuration.defaultTTL)
        let plaintext = payload(content, contentID: options.contentID)
        var padding = 0
        if configuration.paddingBlock > 0 {
            let block = configuration.paddingBlock
            padding = (block - plaintext.count % block) % block
        }
        let body = try WebPushEncryption.encrypt(plaintext, keys: subscription, paddingBytes: padding)

        var headers: [HTTPHeader] = []
        headers.reserveCapacity(7)
        headers.append(HTTPHeader("ttl", String(ttl)))
        if let urgency = WebPushHeaders.urgency(priority: options.priority ?? content.headers.priority) {
            headers.append(HTTPHeader("urgency", urgency))
        }
        if let collapseID = options.collapseID ?? content.headers.collapseID {
            // The Topic made from it is always a valid value; the collapse id is still refused as the APNs and FCM
            // providers refuse it, so that a template fails the same way whichever provider a token goes to.
            try Self.checkHeaderValues(of: content, options: options)
            headers.append(HTTPHeader("topic", WebPushHeaders.topic(collapseID: collapseID)))
        }
        headers.append(HTTPHeader("content-encoding", "aes128gcm"))
        headers.append(HTTPHeader("content-type", "application/octet-stream"))
        let vapid = tokens.token(forOrigin: endpoint.origin, now: now)
        headers.append(HTTPHeader("authorization", vapid.headerValue))
        return PreparedRequest(
            method: "POST", authority: endpoint.authority, path: endpoint.path, headers: headers, body: body,
            provider: name, target: .token(token), payloadLimit: WebPushEncryption.maxBodyBytes,
            redactions: ["authorization": vapid.redactedHeaderValue])
    }

    /// The plaintext JSON, encoded once per send (the same `contentID`, or equal content, reuses it).
    func payload(_ content: PushContent, contentID: UInt64?) -> [UInt8] {
        let reused: [UInt8]? = lastPayload.withLock { last in
            guard let entry = last else { return nil }
            if let contentID, entry.contentID == contentID { return entry.bytes }
            guard entry.content == content else { return nil }
            last?.contentID = contentID
            return entry.bytes
        }
        if let reused { return reused }
        let bytes = WebPushPayload.encode(content)
        lastPayload.withLock { $0 = (contentID, content, bytes) }
        return bytes
    }

    // MARK: deliver

    public func deliver(_ request: PreparedRequest, deadline: ContinuousClock.Instant) async throws(NorqError) -> DeliveryResponse {
        try await deliverThroughStart(request, deadline: deadline)
    }

    /// Sends once. The endpoint is checked by the guard again (a request prepared elsewhere), the VAPID token is
    /// renewed when due (a retry hours later), and the transport checks the resolved address before connecting.
    public func startDelivery(_ request: PreparedRequest, deadline: ContinuousClock.Instant,
                              completion: @escaping @Sendable (Result<DeliveryResponse, NorqError>) -> Void) {
        let endpoint: WebPushEndpoint
        do throws(NorqError) {
            endpoint = try WebPushEndpoint(parsing: "https://" + request.authority + request.path)
            try endpointGuard.check(endpoint)
        } catch {
            completion(.failure(error))
            return
        }
        var headers = request.headers
        let now = clock.epochSeconds()
        let vapid = tokens.token(forOrigin: endpoint.origin, now: now)
        if let index = headers.firstIndex(where: { $0.name == "authorization" }) {
            headers[index].value = vapid.headerValue
        } else {
            headers.append(HTTPHeader("authorization", vapid.headerValue))
        }
        // The transport applies the request's own timeout within the send's deadline (NorqHTTP2's one rule).
        let wire = WebPushWireRequest(endpoint: endpoint, method: request.method, headers: headers, body: request.body,
                                      timeout: configuration.requestTimeout)
        let clock = self.clock
        transport.start(wire, deadline: deadline) { result in
            completion(result.map { response in
                // Names lowercased: an HTTP/1.1 service may send them in any case.
                WebPushResponseTable.interpret(status: response.status,
                                               headers: response.headers({ HTTPHeader($0.lowercased(), $1) }),
                                               body: response.bodyBytes, now: clock.epochSeconds())
            })
        }
    }

    public func shutdown() async {
        await transport.shutdown()
    }
}
