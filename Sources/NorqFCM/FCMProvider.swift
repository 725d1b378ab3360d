public import NorqCore
public import Logging
import NorqHTTP2
import Synchronization

/// The built-in FCM HTTP v1 provider: builds `POST /v1/projects/<id>/messages:send` requests for registration
/// tokens (Android, iOS and web apps using Firebase), topics and conditions; authenticates with an OAuth2
/// access token minted from a service account (RS256 assertion), cached and renewed early, single-flight;
/// and sends over pooled HTTP/2 connections.
///
/// A 401 `UNAUTHENTICATED` renews the access token once and sends again within the same delivery (FCM did not
/// process the refused request); a second one is returned as a `credentials-problem` answer: a provider-level
/// error, never an invalid token.
public final class FCMProvider: PushProvider {
    public let name: String
    public var typeName: String { "fcm" }
    public let platforms: Set<Platform> = [.ios, .android, .web]
    public let policy: DeliveryPolicy
    public let configuration: FCMConfiguration

    let logger: Logger
    let clock: FCMClock
    let signer: FCMAssertionSigner
    let tokens: FCMAccessTokenCache
    let transport: any FCMTransport
    /// The token endpoint's transport when it is another origin than the API's.
    let tokenTransport: (any FCMTransport)?
    private let redactions: [String: String]
    /// `configuration.endpoint.authority` and `.sendPath`, computed once (not per request).
    private let authority: String
    private let sendPath: String
    private let placeholderHeaders = FCMAccessToken.requestHeaders(authorization: "Bearer <access token fetched at send time>")
    private let lastMessage = Mutex<CachedMessage?>(nil)
    /// The last answer's header block id and the fields made of it: see `headers(of:)`.
    private let lastHeaders = Mutex<(id: UInt64, headers: [HTTPHeader])>((0, []))

    /// The serialized message (without target) of the last content, reused for every token of a send.
    private struct CachedMessage: Sendable {
        var contentID: UInt64
        var blocks: FCMMessage.Blocks
        var options: FCMMessage.Options
        var message: FCMMessage.Encoded
    }

    /// - Parameters:
    ///   - clock: the wall clock for assertions, token expiry and send times (inject one to simulate hours).
    public convenience init(name: String, configuration: FCMConfiguration, policy: DeliveryPolicy = DeliveryPolicy(),
                            logger: Logger = Logger(label: "norq.fcm"), clock: FCMClock = .system) throws(NorqError) {
        let transports = try FCMConnectionTransport.make(configuration: configuration, logger: logger)
        try self.init(name: name, configuration: configuration, policy: policy, logger: logger, clock: clock,
                      transport: transports.api, tokenTransport: transports.token)
    }

    init(name: String, configuration: FCMConfiguration, policy: DeliveryPolicy, logger: Logger, clock: FCMClock,
         transport: any FCMTransport, tokenTransport: (any FCMTransport)?) throws(NorqError) {
        self.name = name
        self.configuration = configuration
        var policy = policy
        // FCM has no idempotency key: a repeated request may deliver twice.
        policy.idempotency.requestIDHeader = nil
        policy.idempotency.serverDeduplicates = false
        self.policy = policy
        var logger = logger
        logger[metadataKey: "provider"] = .string(name)
        self.logger = logger
        self.clock = clock
        self.transport = transport
        self.tokenTransport = tokenTransport
        let signer = try FCMAssertionSigner(serviceAccount: configuration.serviceAccount,
                                            audience: configuration.tokenEndpoint.description)
        self.signer = signer
        self.authority = configuration.endpoint.authority
        self.sendPath = configuration.sendPath
        self.redactions = ["authorization": "Bearer <redacted OAuth2 access token of \(configuration.serviceAccount.clientEmail)>"]
        let endpoint = configuration.tokenEndpoint
        let timeout = configuration.requestTimeout
        let tokenLogger = logger
        self.tokens = FCMAccessTokenCache(clock: clock) { completion in
            Self.fetchToken(signer: signer, endpoint: endpoint, transport: tokenTransport ?? transport, clock: clock,
                            timeout: timeout, logger: tokenLogger) { result in
                switch result {
                case .success: FCMMetrics.tokenRequest(provider: name, result: "ok")
                case .failure(let error):
                    FCMMetrics.tokenRequest(provider: name, result: error.code == .fcmTokenRequestFailed ? "refused" : "transport")
                    tokenLogger.warning("the OAuth token request failed", metadata: ["norq.error": "\(error.code)"])
                }
                completion(result)
            }
        }
    }

    // MARK: prepare

    public func prepare(_ content: PushContent, for token: PushToken, options: SendOptions) throws(NorqError) -> PreparedRequest {
        try prepare(content, target: try FCMTarget.token(token), deliveryTarget: .token(token), options: options)
    }

    /// A channel recipient routed to FCM is a topic (`news`) or a condition (`'a' in topics && 'b' in topics`).
    public func prepare(_ content: PushContent, forChannel channel: ChannelRecipient,
                        options: SendOptions) throws(NorqError) -> PreparedRequest {
        try prepare(content, target: try FCMTarget.channel(channel), deliveryTarget: .channel(channel), options: options)
    }

    /// Throws `template/invalid-header-value` when the collapse id (the template's or the send's) cannot be written
    /// as a header value on HTTP/2 (RFC 9113 §8.2.1, ``HTTP2FieldRules``): FCM passes it on as `apns-collapse-id`.
    /// `prepare` and `norq validate`'s payload pass (`payloadSizes`) call it alike.
    static func checkHeaderValues(of content: PushContent, options: SendOptions) throws(NorqError) {
        guard let collapseID = options.collapseID ?? content.headers.collapseID,
              let problem = HTTP2FieldRules.valueProblem(collapseID) else { return }
        throw NorqError.invalidHeaderValue("apns-collapse-id", template: content.templateName, problem: problem)
    }

    /// The request for `content` to `target` (pure, apart from reading the cached access token for display).
    public func prepare(_ content: PushContent, target: FCMTarget, deliveryTarget: DeliveryTarget,
                        options: SendOptions) throws(NorqError) -> PreparedRequest {
        // FCM passes the collapse id on as a header (APNs `apns-collapse-id`, Web Push `Topic`): refused here as
        // APNs and Web Push providers refuse it, before anything is sent.
        try Self.checkHeaderValues(of: content, options: options)
        let blocks = FCMMessage.Blocks.for(target)
        let messageOptions = FCMMessage.Options(priority: options.priority, expiration: options.expiration,
                                                collapseID: options.collapseID,
                                                sendTime: options.sendTime ?? clock.epochSeconds())
        let message = try encodedMessage(content, blocks: blocks, options: messageOptions, contentID: options.contentID)
        let limit = FCMMessage.payloadLimit(for: target)
        let size = message.bytes.count
        guard size <= limit else {
            let kind = limit == FCMMessage.payloadLimit ? "" : " for a topic or condition message"
            throw NorqError(.fcmPayloadTooLarge,
                            "the FCM message is \(size) bytes, \(size - limit) over FCM's limit of \(limit)\(kind)")
        }
        let body = FCMMessage.requestBody(message, target: target,
                                          validateOnly: configuration.validateOnly || options.validateOnly)
        // The current token's header array, shared by every request prepared with it (no array per request).
        let headers = tokens.currentToken?.requestHeaders ?? placeholderHeaders
        return PreparedRequest(
            method: "POST", authority: authority, path: sendPath, headers: headers, requestBody: body, provider: name,
            target: deliveryTarget, requestID: options.requestID,
            payloadLimit: limit, redactions: redactions)
    }

    /// The serialized message without target, reusing the last one when the content id, blocks and options
    /// are those of the previous call (a send to many tokens encodes once per platform, not once per token).
    func encodedMessage(_ content: PushContent, blocks: FCMMessage.Blocks, options: FCMMessage.Options,
                        contentID: UInt64?) throws(NorqError) -> FCMMessage.Encoded {
        if let contentID {
            let reused = lastMessage.withLock { last -> FCMMessage.Encoded? in
                guard let last, last.contentID == contentID, last.blocks == blocks, last.options == options else { return nil }
                return last.message
            }
            if let reused { return reused }
        }
        let message = FCMMessage.Encoded(
            JSONValue.object(try FCMMessage.object(for: content, blocks: blocks, options: options)).serialized())
        if let contentID {
            lastMessage.withLock { $0 = CachedMessage(contentID: contentID, blocks: blocks, options: options, message: message) }
        }
        return message
    }

    // MARK: deliver

    public func deliver(_ request: PreparedRequest, deadline: ContinuousClock.Instant) async throws(NorqError) -> DeliveryResponse {
        try await deliverThroughStart(request, deadline: deadline)
    }

    /// Sends once (plus one resend after a 401 `UNAUTHENTICATED` with a renewed access token), each request within
    /// its own time (`timeout`, default 15 s) inside the caller's deadline (NorqHTTP2's bridge applies the rule).
    /// `completion` runs exactly once.
    public func startDelivery(_ request: PreparedRequest, deadline: ContinuousClock.Instant,
                              completion: @escaping @Sendable (Result<DeliveryResponse, NorqError>) -> Void) {
        // The wire request carries what the send needs (and a resend after a 401): the closures below capture it,
        // not the whole prepared request.
        let wire = FCMWireRequest(method: request.method, authority: request.authority, path: request.path,
                                  headers: request.headers, body: request.requestBody,
                                  timeout: configuration.requestTimeout)
        attempt(wire, deadline: deadline, now: .now, renewedAfterRefusal: false, completion: completion)
    }

    /// `now`: the caller's clock read (the request's deadline is counted from it).
    private func attempt(_ request: FCMWireRequest, deadline: ContinuousClock.Instant, now: ContinuousClock.Instant,
                         renewedAfterRefusal: Bool,
                         completion: @escaping @Sendable (Result<DeliveryResponse, NorqError>) -> Void) {
        // The usual case, a cached token the policy reuses, goes on without a closure for the token.
        if let token = tokens.reusableToken() {
            send(request, token: token, deadline: deadline, now: now, renewedAfterRefusal: renewedAfterRefusal,
                 completion: completion)
            return
        }
        tokens.withToken { [self] tokenResult in
            switch tokenResult {
            case .success(let token):
                // The token request took time: the clock is read again.
                send(request, token: token, deadline: deadline, now: .now, renewedAfterRefusal: renewedAfterRefusal,
                     completion: completion)
            case .failure(let error):
                completion(.failure(error))
            }
        }
    }

    /// One request with `token`; a 401 `UNAUTHENTICATED` answer renews the token and goes through `attempt` once more.
    private func send(_ request: FCMWireRequest, token: FCMAccessToken, deadline: ContinuousClock.Instant,
                      now: ContinuousClock.Instant, renewedAfterRefusal: Bool,
                      completion: @escaping @Sendable (Result<DeliveryResponse, NorqError>) -> Void) {
        // `prepare` put the current token's header array in already on the hot path: it is then sent as it is.
        var wire = request
        if let index = wire.headers.firstIndex(where: { $0.name == "authorization" }) {
            if wire.headers[index].value != token.headerValue { wire.headers[index].value = token.headerValue }
        } else {
            wire.headers.append(HTTPHeader("authorization", token.headerValue))
        }
        let tokenValue = token.value
        transport.execute(wire, deadline: deadline, now: now) { [self, wire] result in
            switch result {
            case .failure(let error):
                completion(.failure(error))
            case .success(let answer):
                let response = interpret(answer)
                if response.status == 401, response.reason == FCMResponseTable.unauthenticated {
                    tokens.reportRejected(tokenValue)
                    FCMMetrics.unauthenticated(provider: name, repeated: renewedAfterRefusal)
                    if !renewedAfterRefusal {
                        logger.notice("FCM refused the access token (401 UNAUTHENTICATED); renewing it and sending again")
                        attempt(wire, deadline: deadline, now: .now, renewedAfterRefusal: true, completion: completion)
                        return
                    }
                    logger.error("FCM refused a freshly minted access token (401 UNAUTHENTICATED twice): check the service account's project and permissions")
                }
                completion(.success(response))
            }
        }
    }

    /// Turns an answer into a classified `DeliveryResponse`: the message `name` is the message id; errors are
    /// read with `FCMResponseTable` (FCM `errorCode` first, then the canonical status, then the HTTP status).
    func interpret(_ answer: HTTP2Response) -> DeliveryResponse {
        let headers = self.headers(of: answer)
        let bytes = answer.bodyBytes
        if (200..<300).contains(answer.status) {
            let name = FCMResponseTable.messageName(in: bytes)
            return DeliveryResponse(status: answer.status, headers: headers, body: bytes,
                                    messageID: name, classification: .delivered)
        }
        let body = FCMResponseTable.ErrorBody(parsing: bytes)
        let classification = FCMResponseTable.classify(status: answer.status, body: body)
        let retryAfter = FCMResponseTable.retryDelay(retryAfter: answer.header("retry-after"), errorCode: body.errorCode,
                                                     now: clock.epochSeconds())
        return DeliveryResponse(status: answer.status, headers: headers, body: bytes,
                                reason: FCMResponseTable.reason(body), retryAfter: retryAfter,
                                classification: classification)
    }

    /// The regular header fields of `answer`; the last array made when its header block is the last one's
    /// (`fieldsID`: a server repeats one block answer after answer).
    func headers(of answer: HTTP2Response) -> [HTTPHeader] {
        let id = answer.fieldsID
        if id != 0, let cached = lastHeaders.withLock({ $0.id == id ? $0.headers : nil }) { return cached }
        let headers = answer.headers(HTTPHeader.init)
        if id != 0 { lastHeaders.withLock { $0 = (id, headers) } }
        return headers
    }

    public func shutdown() async {
        await transport.shutdown()
        await tokenTransport?.shutdown()
    }

    // MARK: token endpoint

    /// Exchanges a fresh assertion for an access token: `POST <tokenEndpoint>` with a form body. A refusal is
    /// `fcm/token-request-failed`; a transport failure keeps its code. Neither means the push was sent
    /// (`possiblyProcessed` false).
    static func fetchToken(signer: FCMAssertionSigner, endpoint: FCMURL, transport: any FCMTransport, clock: FCMClock,
                           timeout: Duration, logger: Logger,
                           completion: @escaping @Sendable (Result<FCMAccessToken, NorqError>) -> Void) {
        let issuedAt = clock.epochSeconds()
        let assertion: String
        do throws(NorqError) {
            assertion = try signer.sign(issuedAt: issuedAt)
        } catch {
            completion(.failure(error))
            return
        }
        let request = FCMWireRequest(
            method: "POST", authority: endpoint.authority, path: endpoint.path.isEmpty ? "/" : endpoint.path,
            headers: [HTTPHeader("content-type", "application/x-www-form-urlencoded")],
            body: .bytes(FCMAssertionSigner.tokenRequestBody(assertion: assertion)), timeout: timeout)
        let now = ContinuousClock.now
        transport.execute(request, deadline: now + timeout, now: now) { result in
            switch result {
            case .failure(var error):
                error.possiblyProcessed = false
                error.message = "OAuth token request to \(endpoint): " + error.message
                completion(.failure(error))
            case .success(let answer):
                let parsed = parseTokenResponse(answer, now: clock.epochSeconds(), endpoint: endpoint)
                if case .success(let token) = parsed {
                    logger.debug("access token renewed", metadata: ["fcm.token-expires-in": "\(token.expiresAt - token.issuedAt)"])
                }
                completion(parsed)
            }
        }
    }

    /// Reads `{"access_token", "expires_in", "token_type": "Bearer"}`; anything else is `fcm/token-request-failed`
    /// naming the endpoint's `error` / `error_description` (which carry no secret).
    static func parseTokenResponse(_ answer: HTTP2Response, now: Int64,
                                   endpoint: FCMURL) -> Result<FCMAccessToken, NorqError> {
        let json = try? JSONValue(parsing: answer.bodyBytes)
        guard answer.status == 200, let value = json?["access_token"]?.stringValue, !value.isEmpty else {
            let error = json?["error"]?.stringValue ?? "no access_token"
            let description = json?["error_description"]?.stringValue.map { ": \($0.prefix(120))" } ?? ""
            return .failure(NorqError(.fcmTokenRequestFailed,
                                      "the OAuth token endpoint \(endpoint) answered \(answer.status) \(error.prefix(60))\(description)",
                                      hint: "check the service account (is it of this Firebase project, is its key revoked?) and the host clock"))
        }
        var lifetime: Int64 = 3600
        switch json?["expires_in"] {
        case .int(let seconds)?: lifetime = seconds
        case .double(let seconds)?: lifetime = Int64(seconds)
        case .string(let text)?: lifetime = Int64(text) ?? 3600
        default: break
        }
        lifetime = min(max(lifetime, 1), 24 * 3600)
        return .success(FCMAccessToken(value: value, issuedAt: now, expiresAt: now + lifetime))
    }
}

/// What the router and the CLI learn about FCM through `PushProvider`, from the FCM table.
extension FCMProvider {
    /// Every FCM error code and canonical status of `FCMResponseTable`.
    public var knownReasons: Set<String> { FCMResponseTable.reasonStrings }

    /// FCM's message `name` (`FCMProviderType.messageIDName`).
    public var messageIDName: String { FCMProviderType().messageIDName }

    /// FCM validates a `validate_only` message and delivers nothing (a per-send server-side dry run).
    public var supportsValidateOnly: Bool { true }

    /// FCM names the message (`name`): no request id goes on the wire.
    public var readsRequestID: Bool { false }
}

extension FCMProvider {
    /// The collapse id of a prepared FCM message (`android.collapse_key`, else `apns-collapse-id`, else the web
    /// push `Topic`): with one, a duplicate collapses on the device, so the router may re-send the request after
    /// a failure FCM may have processed (`retry.ambiguous: collapsible`). Read from the body only on that path.
    public func collapseID(of request: PreparedRequest) -> String? {
        guard let message = (try? JSONValue(parsing: request.body))?["message"] else { return nil }
        return message["android"]?["collapse_key"]?.stringValue
            ?? message["apns"]?["headers"]?["apns-collapse-id"]?.stringValue
            ?? message["webpush"]?["headers"]?["Topic"]?.stringValue
    }
}

extension FCMProvider {
    /// Ready unless the FCM API's or the token endpoint's last connection attempt failed with no connection left.
    /// (The service account was parsed at load time; a token the endpoint refuses shows up as rejected sends.)
    public func health() -> ProviderHealth {
        if let failure = transport.connectFailure {
            return .notReady("FCM provider \(name) cannot connect to the FCM API: \(failure)")
        }
        if let failure = tokenTransport?.connectFailure {
            return .notReady("FCM provider \(name) cannot connect to the token endpoint: \(failure)")
        }
        return .ready
    }
}
