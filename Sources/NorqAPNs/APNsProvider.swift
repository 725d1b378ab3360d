public import NorqCore
public import Logging
import Synchronization
import NIOCore
import NorqHTTP2

/// The built-in APNs provider: validates and builds `POST /3/device/<token>` requests, signs them with the
/// shared provider token (or uses the client certificate), and sends them over pooled HTTP/2 connections.
public final class APNsProvider: PushProvider {
    public let name: String
    public var typeName: String { "apns" }
    public let platforms: Set<Platform> = [.ios]
    public let policy: DeliveryPolicy
    public let configuration: APNsConfiguration

    let logger: Logger
    let clock: APNsClock
    let signer: APNsJWTSigner?
    let tokenCache: APNsTokenCache
    /// This provider's entry in `tokenCache` (token auth), looked up once.
    let tokenSlot: APNsTokenCache.Slot?
    let refreshPolicy: JWTRefreshPolicy
    let transport: APNsTransport
    /// Storage policies of broadcast channels this provider created or read (see `prepare(_:forChannel:options:)`).
    public let channelPolicies = APNsChannelPolicyCache()
    /// The `apns-topic` of each documented push type, by its `apns-push-type` value: searched in order (eleven
    /// short names compare in a few instructions; a dictionary hashed the name per request).
    private let topics: [(pushType: String, topic: String)]
    /// The `:authority` of the sandbox and production endpoints, made once (not per request).
    private let sandboxAuthority: String
    private let productionAuthority: String
    /// `["authorization": <redacted JWT description>]`, made once (token auth).
    private let tokenRedactions: [String: String]?
    private let lastPayload = Mutex<EncodedPayload?>(nil)

    struct EncodedPayload: Sendable {
        var contentID: UInt64?
        var content: PushContent
        var pushType: APNsPushType
        var sendTime: Int64
        var body: [UInt8]
        /// `body` as the transport sends it, shared by every request that carries this `body` array.
        var buffer: ByteBuffer
    }

    /// - Parameters:
    ///   - clock: the wall clock for JWT `iat` and send times (inject one to simulate hours in tests).
    ///   - tokenCache: where provider tokens are shared; the process-wide cache by default.
    public init(name: String, configuration: APNsConfiguration, policy: DeliveryPolicy = DeliveryPolicy(),
                logger: Logger = Logger(label: "norq.apns"), clock: APNsClock = .system,
                tokenCache: APNsTokenCache = .shared) throws(NorqError) {
        self.name = name
        self.configuration = configuration
        var policy = policy
        policy.idempotency.requestIDHeader = "apns-id"
        policy.idempotency.serverDeduplicates = false
        self.policy = policy
        var logger = logger
        logger[metadataKey: "provider"] = .string(name)
        self.logger = logger
        self.clock = clock
        self.tokenCache = tokenCache
        self.refreshPolicy = JWTRefreshPolicy(refreshInterval: configuration.tokenRefreshInterval)
        switch configuration.authentication {
        case .token(let keyID, let teamID, let pem, _):
            let signer = try APNsJWTSigner(keyID: keyID, teamID: teamID, privateKeyPEM: pem)
            self.signer = signer
            self.tokenSlot = tokenCache.slot(for: signer)
            self.tokenRedactions = ["authorization": "bearer <redacted ES256 JWT kid=\(keyID) iss=\(teamID)>"]
        case .certificate:
            self.signer = nil
            self.tokenSlot = nil
            self.tokenRedactions = nil
        }
        self.topics = APNsPushType.all.map { ($0.rawValue, $0.topic(bundleID: configuration.bundleID)) }
        self.sandboxAuthority = configuration.sandboxEndpoint.authority
        self.productionAuthority = configuration.productionEndpoint.authority
        self.transport = try APNsTransport(configuration: configuration, logger: logger)
    }

    /// The endpoint requests for an environment go to.
    public func endpoint(for environment: PushEnvironment) -> APNsEndpoint {
        environment == .production ? configuration.productionEndpoint : configuration.sandboxEndpoint
    }

    /// `endpoint(for: environment).authority`, made once.
    func authority(for environment: PushEnvironment) -> String {
        environment == .production ? productionAuthority : sandboxAuthority
    }

    /// The current `authorization` value (token auth), minting or renewing the shared JWT when due.
    func currentToken() -> APNsProviderToken? {
        guard let signer, let tokenSlot else { return nil }
        return tokenSlot.token(signer: signer, policy: refreshPolicy, now: clock.epochSeconds())
    }

    // MARK: prepare

    public func prepare(_ content: PushContent, for token: PushToken, options: SendOptions) throws(NorqError) -> PreparedRequest {
        try Self.validateTokenFormat(token.token)
        let pushType = try APNsPushType.resolve(for: content)
        switch pushType.authConstraint {
        case .certificateOnly where configuration.authentication.isToken:
            throw NorqError(.apnsRequiresCertificate, "push type \(pushType) needs certificate auth; provider \(name) uses a token key")
        case .tokenOnly where !configuration.authentication.isToken:
            throw NorqError(.apnsRequiresToken, "push type \(pushType) needs token (JWT) auth; provider \(name) uses a certificate")
        default: break
        }
        let environment = token.environment ?? options.environment ?? (configuration.production ? .production : .sandbox)
        let priority = options.priority ?? content.headers.priority ?? pushType.defaultPriority
        // Scanned, not hashed: at most three priorities.
        guard pushType.allowedPriorities.contains(where: { $0 == priority }) else {
            throw NorqError(.apnsBadPriority,
                            "priority \(priority) is not allowed for push type \(pushType); allowed: \(pushType.allowedPriorities.sorted().map(String.init).joined(separator: ", "))")
        }
        let sendTime = options.sendTime ?? clock.epochSeconds()
        var expiration = (options.expiration ?? content.headers.expiration).map { $0.epochSeconds(sendTime: sendTime) }
        if let value = expiration, value < 0 {
            throw NorqError(.apnsBadExpiration, "apns-expiration must be 0 or an epoch time in seconds, got \(value)")
        }
        if pushType.requiresZeroExpiration {
            if let value = expiration, value != 0 {
                throw NorqError(.apnsBadExpiration, "push type \(pushType) requires apns-expiration 0, got \(value)")
            }
            expiration = 0
        }
        let collapseID = options.collapseID ?? content.headers.collapseID
        try Self.checkHeaderValue("apns-collapse-id", collapseID, of: content)
        if let collapseID, collapseID.utf8.count > 64 {
            throw NorqError(.apnsBadCollapseID, "apns-collapse-id is \(collapseID.utf8.count) bytes; at most 64 are allowed")
        }
        let requestID: String
        if let given = options.requestID {
            if APNsRequestID.isValid(given) {
                requestID = given  // the router's ids are lowercase already: no lowercased copy
            } else {
                let lower = given.lowercased()
                guard APNsRequestID.isValid(lower) else {
                    throw NorqError(.apnsBadMessageID, "apns-id must be a UUID (8-4-4-4-12 hex digits), got \"\(given.prefix(40))\"")
                }
                requestID = lower
            }
        } else {
            requestID = APNsRequestID.random()
        }
        let body = try encodedPayload(content, pushType: pushType, sendTime: sendTime, contentID: options.contentID)
        guard body.count <= pushType.payloadLimit else {
            throw NorqError(.apnsPayloadTooLarge,
                            "payload is \(body.count) bytes, \(body.count - pushType.payloadLimit) over the limit of push type \(pushType), \(pushType.payloadLimit)")
        }

        var headers: [HTTPHeader] = []
        headers.reserveCapacity(7)
        if let topic = options.topic ?? content.headers.topic {
            headers.append(HTTPHeader("apns-topic", try pushType.topic(given: topic)))
        } else {
            headers.append(HTTPHeader("apns-topic", topic(of: pushType)))
        }
        headers.append(HTTPHeader("apns-push-type", pushType.rawValue))
        headers.append(HTTPHeader("apns-priority", priority == 10 ? "10" : priority == 5 ? "5" : String(priority)))
        if let expiration { headers.append(HTTPHeader("apns-expiration", String(expiration))) }
        if let collapseID { headers.append(HTTPHeader("apns-collapse-id", collapseID)) }
        headers.append(HTTPHeader("apns-id", requestID))
        var redactions: [String: String] = [:]
        if let token = currentToken(), let tokenRedactions {
            headers.append(HTTPHeader("authorization", token.headerValue))
            redactions = tokenRedactions  // shared storage: no dictionary built per request
        }
        return PreparedRequest(method: "POST", authority: authority(for: environment), path: "/3/device/" + token.token,
                               headers: headers, body: body, provider: name, target: .token(token),
                               environment: environment, requestID: requestID, payloadLimit: pushType.payloadLimit,
                               redactions: redactions)
    }

    /// Throws `template/invalid-header-value` when `value` (made from the template's data or the send's options)
    /// cannot be written as the value of `header` on HTTP/2 (RFC 9113 §8.2.1, ``HTTP2FieldRules``): nothing is sent.
    /// `prepare` and `norq validate`'s payload pass (`payloadSizes`) call it alike.
    static func checkHeaderValue(_ header: String, _ value: String?, of content: PushContent) throws(NorqError) {
        guard let value, let problem = HTTP2FieldRules.valueProblem(value) else { return }
        throw NorqError.invalidHeaderValue(header, template: content.templateName, problem: problem)
    }

    /// The payload bytes, reusing the last encoding when the content, push type and send time (seconds) are
    /// those of the previous call: a send to many tokens renders once and encodes once, not once per token.
    /// The same `contentID` (see ``SendOptions/contentID``) vouches for the same content without comparing it.
    func encodedPayload(_ content: PushContent, pushType: APNsPushType, sendTime: Int64,
                        contentID: UInt64? = nil) throws(NorqError) -> [UInt8] {
        let reused: [UInt8]? = lastPayload.withLock { last in
            // Read in place (a copy of the entry retained the whole content per token).
            guard last?.sendTime == sendTime, last?.pushType == pushType else { return nil }
            if let contentID, last?.contentID == contentID { return last?.body }
            guard last?.content == content else { return nil }
            // The same content under a new id (the next send of the same content): remember the id, or every
            // token of that send would compare the whole content again.
            last?.contentID = contentID
            return last?.body
        }
        if let reused { return reused }
        let body = try APNsPayload.encode(content, pushType: pushType, sendTime: sendTime)
        lastPayload.withLock {
            $0 = EncodedPayload(contentID: contentID, content: content, pushType: pushType, sendTime: sendTime, body: body,
                                buffer: ByteBuffer(bytes: body))
        }
        return body
    }

    /// The `apns-topic` of `pushType` for the configured bundle id.
    private func topic(of pushType: APNsPushType) -> String {
        for index in topics.indices where topics[index].pushType == pushType.rawValue { return topics[index].topic }
        return pushType.topic(bundleID: configuration.bundleID)
    }

    /// Hex digits only, an even number of them (Apple says not to assume 64).
    static func validateTokenFormat(_ token: String) throws(NorqError) {
        var token = token
        let valid = token.withUTF8 { bytes in
            !bytes.isEmpty && bytes.count % 2 == 0 && bytes.count <= 200 && bytes.allSatisfy { c in
                (c >= 48 && c <= 57) || (c >= 97 && c <= 102) || (c >= 65 && c <= 70)
            }
        }
        guard valid else {
            throw NorqError(.apnsInvalidTokenFormat,
                            "APNs device token \(PushToken(token: token, platform: .ios).redacted) is not a hex string of an even length")
        }
    }

    // MARK: deliver

    public func deliver(_ request: PreparedRequest, deadline: ContinuousClock.Instant) async throws(NorqError) -> DeliveryResponse {
        try await deliverThroughStart(request, deadline: deadline)
    }

    /// `deliver` without a suspended task: the answer is classified on the connection's event loop and handed
    /// to `completion` there. The request goes where `prepare` addressed it (its `:authority`, path and headers as
    /// prepared; only a renewed provider token is stamped in), through NorqHTTP2's bridge, which gives every request
    /// its own deadline (`timeout`, default 10 s) inside the caller's: a stream that never answers is cancelled and
    /// reported as `provider/deadline-exceeded`, which the router retries with the same apns-id while its send
    /// deadline allows.
    public func startDelivery(_ request: PreparedRequest, deadline: ContinuousClock.Instant,
                              completion: @escaping @Sendable (Result<DeliveryResponse, NorqError>) -> Void) {
        let (head, usedJWT) = requestHead(for: request)
        let target = request.target
        // One closure per request: the transport hands over the HTTP/2 result, mapped and classified here.
        transport.execute(head: head, body: bodyBuffer(for: request.body), deadline: deadline) { result in
            switch result {
            case .success(let response): completion(.success(self.received(response, usedJWT: usedJWT)))
            case .failure(let error): completion(.failure(APNsTransport.norqError(error, logID: target.redacted)))
            }
        }
    }

    /// The payload as a `ByteBuffer`: the buffer made with the last encoded payload when `body` holds the same
    /// bytes (every token of a send carries that payload: `==` on arrays that share storage answers without
    /// reading them, and compares the bytes otherwise), else a copy.
    func bodyBuffer(for body: [UInt8]) -> ByteBuffer {
        let cached = lastPayload.withLock { last -> ByteBuffer? in
            // Read in place: `guard let` copied the whole entry (content included) per request.
            guard last?.body == body else { return nil }
            return last?.buffer
        }
        return cached ?? ByteBuffer(bytes: body)
    }

    /// The header fields of `request` with the current provider token stamped in (a prepared request whose token
    /// was renewed since, or reported expired, gets the new one), and the JWT used, if any.
    func requestHead(for request: PreparedRequest) -> (HTTP2RequestHead, usedJWT: String?) {
        var fields: [HTTP2HeaderField] = []
        fields.reserveCapacity(request.headers.count + 1)
        let current = currentToken()
        var stamped = false
        for header in request.headers {
            if header.name == "authorization", let current {
                fields.append(HTTP2HeaderField("authorization", current.headerValue, indexing: .indexed))
                stamped = true
            } else {
                fields.append(HTTP2HeaderField(header.name, header.value, indexing: Self.indexing(of: header.name)))
            }
        }
        if let current, !stamped {
            fields.append(HTTP2HeaderField("authorization", current.headerValue, indexing: .indexed))
        }
        return (HTTP2RequestHead(method: request.method, scheme: "https", authority: request.authority, path: request.path,
                                 fields: fields), current?.jwt)
    }

    /// How APNs request fields enter the HPACK table: ids are never indexed (each is new, and a request id is the
    /// caller's), per-request values are not indexed, everything else (topic, push type, priority, the JWT,
    /// which stays one table entry for its 20-55 minutes) is.
    static func indexing(of name: String) -> HTTP2HeaderIndexing {
        // By length first: most names match none, and a string comparison per case and header showed in profiles.
        switch name.utf8.count {
        case 7: name == "apns-id" ? .neverIndexed : .indexed
        case 15:
            switch name {
            case "apns-request-id", "apns-channel-id": .neverIndexed
            case "apns-expiration": .notIndexed
            default: .indexed
            }
        case 16: name == "apns-collapse-id" ? .notIndexed : .indexed
        default: .indexed
        }
    }

    /// Classifies an answer; an `ExpiredProviderToken` marks the token used for renewal before the retry.
    @inline(never)
    func received(_ response: HTTP2Response, usedJWT: String?) -> DeliveryResponse {
        let result = Self.interpret(response)
        if result.reason == "ExpiredProviderToken", let tokenSlot, let usedJWT {
            tokenSlot.reportExpired(usedJWT)
            logger.notice("APNs reported ExpiredProviderToken; the provider token is renewed for the retry")
        }
        return result
    }

    /// Turns an answer into a classified `DeliveryResponse`.
    static func interpret(_ answer: HTTP2Response) -> DeliveryResponse {
        let response = (status: answer.status, headers: answer.headers(HTTPHeader.init), body: answer.bodyBytes)
        var reason: String?
        var timestamp: Int64?
        if response.status != 200, !response.body.isEmpty, let json = try? JSONValue(parsing: response.body) {
            reason = json["reason"]?.stringValue
            switch json["timestamp"] {
            case .int(let value)?: timestamp = value
            case .double(let value)?: timestamp = Int64(value)
            default: break
            }
        }
        // One pass over the header fields, by name length first (three searches compared every name with four
        // strings per answer).
        var retryAfter: Duration?
        var retryAfterSeen = false
        var messageID: String?
        var uniqueID: String?
        for header in response.headers {
            switch header.name.utf8.count {
            case 11 where !retryAfterSeen && header.name == "retry-after":
                retryAfterSeen = true
                if let seconds = Int64(header.value) { retryAfter = .seconds(seconds) }
            case 7 where messageID == nil && header.name == "apns-id",
                 15 where messageID == nil && header.name == "apns-request-id":
                messageID = header.value
            case 14 where uniqueID == nil && header.name == "apns-unique-id":
                uniqueID = header.value
            default:
                break
            }
        }
        var result = DeliveryResponse(
            status: response.status, headers: response.headers, body: response.body,
            messageID: messageID, uniqueID: uniqueID,
            reason: reason, invalidSince: response.status == 410 ? timestamp : nil, retryAfter: retryAfter,
            classification: APNsResponseTable.classify(status: response.status, reason: reason))
        if response.status != 200 { result.code = APNsResponseTable.code(status: response.status, reason: reason) }
        return result
    }

    public func shutdown() async {
        await transport.shutdown()
    }
}
