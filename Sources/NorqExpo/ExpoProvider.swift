public import NorqCore
public import Logging
import Synchronization
import NorqZlib
import NorqHTTP2
import NIOCore
import NIOPosix

/// The built-in Expo provider: sends to Expo push tokens through Expo's push service
/// (`POST /--/api/v2/push/send`, a JSON array of messages, at most 100 recipients of one Expo project per request),
/// and fetches receipts (`POST /--/api/v2/push/getReceipts`, at most 1,000 ids).
///
/// - An `ok` ticket is an `accepted` answer whose message id is the ticket id; an error ticket is classified by
///   ``ExpoResponseTable`` (`DeviceNotRegistered` is token-invalid).
/// - As a ``SharedContentBatchProvider`` it takes up to 100 tokens per request, prepared one by one or (the router's
///   per-batch path) as tokens sharing one prepared message; a `PUSH_TOO_MANY_EXPERIENCE_IDS`
///   answer splits the request by project (each group sent again at once: Expo processed none of it), and the
///   projects are remembered so later batches do not mix them (``batchKey(for:)``).
/// - Bodies over 1 KiB are gzipped; at most `maxConcurrentRequests` requests are in flight; notifications are held
///   to `rateLimit` per second per project.
public final class ExpoProvider: SharedContentBatchProvider, ReceiptFetchingProvider {
    public let name: String
    public var typeName: String { "expo" }
    public let platforms: Set<Platform> = [.ios, .android]
    public let policy: DeliveryPolicy
    public let configuration: ExpoConfiguration

    let logger: Logger
    private let transport: ExpoTransport
    private let baseHeaders: [HTTPHeader]
    private let redactions: [String: String]
    private let authority: String
    private let limiter: Mutex<ExpoRateLimiter>
    private let projects = Mutex(ExpoProjectMemory())
    /// Set once a `PUSH_TOO_MANY_EXPERIENCE_IDS` answer taught a project: until then ``batchKey(for:)`` answers nil
    /// without the lock and the token's hash (once per target).
    private let knowsProjects = Atomic<Bool>(false)
    private let lastMessage = Mutex<CachedMessage?>(nil)

    /// The serialized message without `to` of the last content, reused for every token of a send.
    private struct CachedMessage: Sendable {
        var contentID: UInt64
        var platform: Platform
        var options: SendOptions
        var tail: [UInt8]
        var size: Int
    }

    public init(name: String, configuration: ExpoConfiguration, policy: DeliveryPolicy = DeliveryPolicy(),
                logger: Logger = Logger(label: "norq.expo")) throws(NorqError) {
        self.name = name
        self.configuration = configuration
        var policy = policy
        // Expo has no idempotency key: a repeated request may deliver twice.
        policy.idempotency.requestIDHeader = nil
        policy.idempotency.serverDeduplicates = false
        self.policy = policy
        var logger = logger
        logger[metadataKey: "provider"] = .string(name)
        self.logger = logger
        self.transport = try ExpoTransport(configuration: configuration, logger: logger)
        self.authority = configuration.endpoint.authority
        var headers = [HTTPHeader("accept", "application/json"), HTTPHeader("accept-encoding", "gzip, deflate"),
                       HTTPHeader("content-type", "application/json")]
        if let token = configuration.accessToken { headers.append(HTTPHeader("authorization", "Bearer \(token)")) }
        self.baseHeaders = headers
        self.redactions = configuration.accessToken == nil ? [:]
            : ["authorization": "Bearer <redacted Expo access token from \(configuration.accessTokenSource ?? "code")>"]
        self.limiter = Mutex(ExpoRateLimiter(rate: configuration.rateLimit))
    }

    // MARK: prepare

    /// The request for one token: `[{"to": token, ...}]` (always an array: one ticket back). Throws
    /// `expo/invalid-token`, `expo/payload-too-large` or `expo/invalid-message`, before anything is sent.
    public func prepare(_ content: PushContent, for token: PushToken, options: SendOptions) throws(NorqError) -> PreparedRequest {
        try ExpoToken.check(token)
        let (tail, size) = try encodedTail(content, platform: token.platform, options: options)
        guard size <= ExpoMessage.payloadLimit else {
            throw NorqError(.expoPayloadTooLarge,
                            "the Expo message is \(size) bytes, \(size - ExpoMessage.payloadLimit) over Expo's limit of \(ExpoMessage.payloadLimit)")
        }
        // `[{"to":"` + token + tail; the token has no character JSON escapes (checked above).
        return PreparedRequest(method: "POST", authority: authority, path: ExpoConfiguration.sendPath, headers: baseHeaders,
                               requestBody: .spliced(head: Self.bodyHead, middle: token.token, tail: tail),
                               provider: name, target: .token(token), requestID: options.requestID,
                               payloadLimit: ExpoMessage.payloadLimit, redactions: redactions)
    }

    static let bodyHead = Array(#"[{"to":""#.utf8)

    /// `"` + the message's other fields + `}]`, and the size of the message without `to`, reused while the content
    /// id, platform and options are those of the previous call.
    private func encodedTail(_ content: PushContent, platform: Platform,
                             options: SendOptions) throws(NorqError) -> ([UInt8], Int) {
        if let contentID = options.contentID,
           let cached = lastMessage.withLock({ last -> CachedMessage? in
               guard let last, last.contentID == contentID, last.platform == platform, last.options == options else { return nil }
               return last
           }) {
            return (cached.tail, cached.size)
        }
        let object = try ExpoMessage.object(for: content, platform: platform, options: options)
        let serialized = JSONValue.object(object).serialized()  // `{...}`
        var tail: [UInt8] = [34]  // "
        if serialized.count > 2 {
            tail.append(44)  // ,
            tail.append(contentsOf: serialized.dropFirst())
        } else {
            tail.append(125)  // }
        }
        tail.append(93)  // ]
        if let contentID = options.contentID {
            lastMessage.withLock {
                $0 = CachedMessage(contentID: contentID, platform: platform, options: options, tail: tail, size: serialized.count)
            }
        }
        return (tail, serialized.count)
    }

    /// The per-batch path's shared content: the tail ``prepare(_:for:options:)`` splices after the token (`"` + the
    /// message's other fields + `}]`), checked against Expo's payload limit once.
    public func prepareShared(_ content: PushContent, platform: Platform,
                              options: SendOptions) throws(NorqError) -> SharedBatchContent? {
        let (tail, size) = try encodedTail(content, platform: platform, options: options)
        guard size <= ExpoMessage.payloadLimit else {
            throw NorqError(.expoPayloadTooLarge,
                            "the Expo message is \(size) bytes, \(size - ExpoMessage.payloadLimit) over Expo's limit of \(ExpoMessage.payloadLimit)")
        }
        return SharedBatchContent(platform: platform, bytes: tail)
    }

    /// An Expo push token of the content's platform (anything else fails on the per-token path with `expo/invalid-token`).
    public func accepts(_ token: PushToken, for content: SharedBatchContent) -> Bool {
        token.platform == content.platform && ExpoToken.isValid(token.token)
    }

    // MARK: batching

    /// Expo takes 100 recipients per request.
    public var maxBatchSize: Int { ExpoMessage.maxRecipientsPerRequest }

    /// The token's Expo project when a `PUSH_TOO_MANY_EXPERIENCE_IDS` answer taught it, else nil (one group).
    public func batchKey(for request: PreparedRequest) -> String? {
        guard case .token(let token) = request.target else { return nil }
        return batchKey(forToken: token)
    }

    /// The token's Expo project when a `PUSH_TOO_MANY_EXPERIENCE_IDS` answer taught it, else nil (one group).
    public func batchKey(forToken token: PushToken) -> String? {
        projectKey(of: token.token)
    }

    private func projectKey(of token: String) -> String? {
        guard knowsProjects.load(ordering: .acquiring) else { return nil }
        return projects.withLock { $0.project(of: token) }
    }

    /// The project a token was learnt to belong to (nil when unknown).
    public func project(of token: String) -> String? { projects.withLock { $0.project(of: token) } }

    public func deliver(_ request: PreparedRequest, deadline: ContinuousClock.Instant) async throws(NorqError) -> DeliveryResponse {
        try await deliverThroughStart(request, deadline: deadline)
    }

    public func startDelivery(_ request: PreparedRequest, deadline: ContinuousClock.Instant,
                              completion: @escaping @Sendable (Result<DeliveryResponse, NorqError>) -> Void) {
        startBatchDelivery([request], deadline: deadline) { completion($0[0]) }
    }

    public func startBatchDelivery(_ requests: [PreparedRequest], deadline: ContinuousClock.Instant,
                                   completion: @escaping @Sendable ([Result<DeliveryResponse, NorqError>]) -> Void) {
        start(requests.map(ExpoRecipient.init), deadline: deadline, completion: completion)
    }

    /// The per-batch path: one message per run of targets sharing a content, `to` the array of their tokens.
    public func startSharedBatchDelivery(_ targets: [SharedBatchTarget], deadline: ContinuousClock.Instant,
                                         completion: @escaping @Sendable ([Result<DeliveryResponse, NorqError>]) -> Void) {
        start(targets.map { .token($0.token.token, tail: $0.content.bytes) }, deadline: deadline, completion: completion)
    }

    /// Requests of at most 100 recipients for `recipients`, one result per recipient in order.
    private func start(_ recipients: [ExpoRecipient], deadline: ContinuousClock.Instant,
                       completion: @escaping @Sendable ([Result<DeliveryResponse, NorqError>]) -> Void) {
        guard !recipients.isEmpty else { return completion([]) }
        if recipients.count > maxBatchSize {
            let chunks = chunked(recipients, size: maxBatchSize).map(Array.init)
            let gather = ExpoGather(count: recipients.count, completion: completion)
            var offset = 0
            for chunk in chunks {
                let start = offset
                offset += chunk.count
                send(chunk, deadline: deadline, splitAllowed: true) { gather.fill(from: start, $0) }
            }
            return
        }
        send(recipients, deadline: deadline, splitAllowed: true, completion: completion)
    }

    /// One request for `requests` (at most 100, rate-limited by the first token's project), its answer read.
    private func send(_ requests: [ExpoRecipient], deadline: ContinuousClock.Instant, splitAllowed: Bool,
                      completion: @escaping @Sendable ([Result<DeliveryResponse, NorqError>]) -> Void) {
        let now = ContinuousClock.now
        let project = requests.first?.token.flatMap(projectKey(of:)) ?? ""
        let wait = limiter.withLock { $0.reserve(requests.count, project: project, now: now) }
        if wait > .zero {
            guard now + wait < deadline else {
                let error = NorqError(.deadlineExceeded,
                                      "Expo: the rate limit (\(configuration.rateLimit)/s per project) would hold the request past its deadline",
                                      notProcessed: true)
                return completion(Array(repeating: .failure(error), count: requests.count))
            }
            // An event-loop timer, not an unowned task: the write runs on the loop when the wait is over (after a
            // shutdown the transport fails it, so `completion` still runs once).
            let nanoseconds = wait.components.seconds * 1_000_000_000 + wait.components.attoseconds / 1_000_000_000
            MultiThreadedEventLoopGroup.singleton.next().scheduleTask(in: .nanoseconds(nanoseconds)) {
                self.write(requests, project: project, deadline: deadline, splitAllowed: splitAllowed,
                           completion: completion)
            }
            return
        }
        write(requests, project: project, deadline: deadline, splitAllowed: splitAllowed, completion: completion)
    }

    /// Writes one request; `project` is the rate limiter's key its notifications were booked under.
    private func write(_ requests: [ExpoRecipient], project: String, deadline: ContinuousClock.Instant,
                       splitAllowed: Bool,
                       completion: @escaping @Sendable ([Result<DeliveryResponse, NorqError>]) -> Void) {
        var (headers, body) = (baseHeaders, Self.batchBody(requests))
        if let threshold = configuration.gzipThreshold, body.count > threshold, let gzipped = Gzip.compress(body) {
            body = gzipped
            headers.append(HTTPHeader("content-encoding", "gzip"))
        }
        transport.start(path: ExpoConfiguration.sendPath, headers: headers, body: body, deadline: deadline) { [self] result in
            switch result {
            case .failure(let error):
                completion(Array(repeating: .failure(error), count: requests.count))
            case .success(let answer):
                switch ExpoResponseTable.sendAnswer(answer, recipients: requests.count) {
                case .tickets(let tickets):
                    completion(tickets.map { .success($0) })
                case .requestFailed(let response, _):
                    completion(Array(repeating: .success(response), count: requests.count))
                case .ambiguous(let error):
                    completion(Array(repeating: .failure(error), count: requests.count))
                case .mixedProjects(let groups):
                    split(requests, bookedUnder: project, groups: groups, answer: answer, deadline: deadline,
                          splitAllowed: splitAllowed, completion: completion)
                }
            }
        }
    }

    /// After `PUSH_TOO_MANY_EXPERIENCE_IDS`: remembers each token's project and sends one request per project (Expo
    /// processed none of the refused request). A second refusal of a split group is reported as it is. The refused
    /// request's booking in the rate limiter (`bookedUnder`) is given back first: each group books its own, under
    /// its own project, so the notifications are counted once.
    private func split(_ requests: [ExpoRecipient], bookedUnder booked: String, groups: [String: [String]],
                       answer: HTTP2Response, deadline: ContinuousClock.Instant, splitAllowed: Bool,
                       completion: @escaping @Sendable ([Result<DeliveryResponse, NorqError>]) -> Void) {
        var projectOf: [String: String] = [:]
        for (project, tokens) in groups { for token in tokens { projectOf[token] = project } }
        projects.withLock { memory in
            for (token, project) in projectOf { memory.remember(token, project: project) }
        }
        knowsProjects.store(true, ordering: .releasing)
        guard splitAllowed else {
            var response = DeliveryResponse(status: answer.status, body: Array(answer.bodyBytes.prefix(2048)),
                                            reason: "PUSH_TOO_MANY_EXPERIENCE_IDS", classification: .permanent)
            response.code = .expoTooManyExperienceIDs
            return completion(Array(repeating: .success(response), count: requests.count))
        }
        logger.debug("Expo refused a request mixing \(groups.count) projects; sending one request per project")
        let now = ContinuousClock.now
        limiter.withLock { $0.release(requests.count, project: booked, now: now) }
        // Indexes of `requests` per project, in order; tokens the answer did not name form their own group.
        var order: [String] = []
        var members: [String: [Int]] = [:]
        for (index, request) in requests.enumerated() {
            var key = "\u{0}unnamed"
            if let token = request.token, let project = projectOf[token] { key = project }
            if members[key] == nil { order.append(key) }
            members[key, default: []].append(index)
        }
        let gather = ExpoGather(count: requests.count, completion: completion)
        for key in order {
            let indexes = members[key]!
            send(indexes.map { requests[$0] }, deadline: deadline, splitAllowed: false) { results in
                gather.fill(indexes: indexes, results)
            }
        }
    }

    /// The body of one request for `requests`: `[` + messages + `]`. Consecutive requests whose messages differ only
    /// in `to` (the same tail: a send's tokens of one platform, which share the content and options) become one message
    /// whose `to` is the array of their tokens, `{"to":["a","b",...],...}`: the shared fields are written once per
    /// run, not once per token. Expo counts every element of `to` as a recipient and answers one ticket per
    /// recipient, in order, so the tickets still map one to one onto `requests`. A single request keeps its own body.
    public static func batchBody(_ requests: [PreparedRequest]) -> [UInt8] {
        batchBody(requests.map(ExpoRecipient.init))
    }

    /// ``batchBody(_:)-([PreparedRequest])`` of recipients.
    static func batchBody(_ requests: [ExpoRecipient]) -> [UInt8] {
        if requests.count == 1 {
            switch requests[0] {
            case .request(let request): return request.body
            case .token(let token, let tail): return bodyHead + Array(token.utf8) + tail
            }
        }
        var body: [UInt8] = [91]  // [
        // The tail of the message being written, whose `to` array is still open.
        var openTail: [UInt8]?
        func closeMessage() {
            guard let tail = openTail else { return }
            body.append(93)  // ] of `to`
            body.append(contentsOf: tail[1..<(tail.count - 1)])  // the fields after `to`, and `}`
            openTail = nil
        }
        for recipient in requests {
            let request: PreparedRequest
            switch recipient {
            case .token(let token, let tail):
                if let open = openTail, Self.sameBytes(open, tail) {
                    body.append(contentsOf: #",""#.utf8)
                } else {
                    closeMessage()
                    if body.count > 1 { body.append(44) }  // ,
                    body.append(contentsOf: #"{"to":[""#.utf8)
                    openTail = tail
                }
                body.append(contentsOf: token.utf8)
                body.append(34)  // "
                continue
            case .request(let prepared):
                request = prepared
            }
            switch request.requestBody {
            case .spliced(let head, let middle, let tail):
                closeMessage()
                if body.count > 1 { body.append(44) }
                body.append(contentsOf: head.dropFirst())
                body.append(contentsOf: middle.utf8)
                body.append(contentsOf: tail.dropLast())
            case .bytes(let bytes):
                closeMessage()
                if body.count > 1 { body.append(44) }
                body.append(contentsOf: bytes[1..<(bytes.count - 1)])
            }
        }
        closeMessage()
        body.append(93)  // ]
        return body
    }

    /// Equal bytes; the tails of one send's requests share their storage (``encodedTail``'s cache), so that is
    /// checked first.
    private static func sameBytes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        let shared = a.withUnsafeBufferPointer { a in b.withUnsafeBufferPointer { b in a.baseAddress == b.baseAddress } }
        return shared || a == b
    }

    // MARK: receipts

    public var maxReceiptIDsPerRequest: Int { ExpoMessage.maxReceiptIDsPerRequest }
    public var receiptDelay: Duration { configuration.receiptDelay }
    public var receiptRetention: Duration { .seconds(24 * 3600) }

    /// `POST /--/api/v2/push/getReceipts {"ids": [...]}`, chunked by 1,000 ids; ids without a receipt are `.pending`.
    public func fetchReceipts(_ ids: [String], deadline: ContinuousClock.Instant) async throws(NorqError) -> [String: ReceiptState] {
        var states: [String: ReceiptState] = [:]
        for chunk in chunked(ids, size: maxReceiptIDsPerRequest) {
            let body = JSONValue.object(["ids": .array(chunk.map { .string($0) })]).serialized()
            var headers = baseHeaders
            var sent = body
            if let threshold = configuration.gzipThreshold, body.count > threshold, let gzipped = Gzip.compress(body) {
                sent = gzipped
                headers.append(HTTPHeader("content-encoding", "gzip"))
            }
            let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<HTTP2Response, NorqError>, Never>) in
                transport.start(path: ExpoConfiguration.receiptsPath, headers: headers, body: sent,
                                deadline: deadline) { continuation.resume(returning: $0) }
            }
            let answer = try result.get()
            let part = try ExpoResponseTable.receipts(status: answer.status, body: answer.bodyBytes, ids: Array(chunk))
            states.merge(part) { _, new in new }
        }
        return states
    }

    public func shutdown() async {
        await transport.shutdown()
    }
}

extension ExpoProvider {
    /// Every code of ``ExpoResponseTable``.
    public var knownReasons: Set<String> { ExpoResponseTable.reasonStrings }

    /// `expo-ticket` (``ExpoProviderType/messageIDName``).
    public var messageIDName: String { "expo-ticket" }

    /// Expo names the message (the ticket id): no request id goes on the wire.
    public var readsRequestID: Bool { false }

    /// The message's `collapseId`: with one, a duplicate after an ambiguous failure collapses on the device.
    public func collapseID(of request: PreparedRequest) -> String? {
        guard case .array(let messages)? = try? JSONValue(parsing: request.body) else { return nil }
        return messages.first?["collapseId"]?.stringValue
    }

    /// Ready unless the last connection attempt failed with no connection left.
    public func health() -> ProviderHealth {
        if let failure = transport.connectFailure {
            return .notReady("Expo provider \(name) cannot connect to \(configuration.endpoint): \(failure)")
        }
        return .ready
    }
}

/// Collects the results of the parts of a split batch and completes once with all of them, in order.
final class ExpoGather: Sendable {
    private let state: Mutex<(results: [Result<DeliveryResponse, NorqError>?], missing: Int)>
    private let completion: @Sendable ([Result<DeliveryResponse, NorqError>]) -> Void

    init(count: Int, completion: @escaping @Sendable ([Result<DeliveryResponse, NorqError>]) -> Void) {
        self.state = Mutex((Array(repeating: nil, count: count), count))
        self.completion = completion
    }

    func fill(from start: Int, _ results: [Result<DeliveryResponse, NorqError>]) {
        fill(indexes: Array(start..<(start + results.count)), results)
    }

    func fill(indexes: [Int], _ results: [Result<DeliveryResponse, NorqError>]) {
        let done = state.withLock { s -> [Result<DeliveryResponse, NorqError>]? in
            for (index, result) in zip(indexes, results) where s.results[index] == nil {
                s.results[index] = result
                s.missing -= 1
            }
            return s.missing == 0 ? s.results.map { $0! } : nil
        }
        if let done { completion(done) }
    }
}

/// One recipient of a request as the provider writes it: a token and the tail of its message (`"` + the message's
/// other fields + `}]`, as ``ExpoProvider/prepare(_:for:options:)`` splices it after the token: consecutive ones with
/// the same tail share one message), or a request of another shape, written as its own message(s).
enum ExpoRecipient: Sendable {
    case token(String, tail: [UInt8])
    case request(PreparedRequest)

    /// A request `prepare` made becomes its token and tail.
    init(_ request: PreparedRequest) {
        if case .spliced(let head, let middle, let tail) = request.requestBody, head == ExpoProvider.bodyHead,
           tail.count >= 3 {
            self = .token(middle, tail: tail)
        } else {
            self = .request(request)
        }
    }

    /// The Expo token it is sent to (its project's key), when known.
    var token: String? {
        switch self {
        case .token(let token, _): return token
        case .request(let request):
            guard case .token(let token) = request.target else { return nil }
            return token.token
        }
    }
}
