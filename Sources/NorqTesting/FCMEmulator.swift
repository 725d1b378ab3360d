import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization
import _CryptoExtras

/// An in-process FCM HTTP v1 look-alike: an HTTP/2 + TLS (ALPN `h2`) server on 127.0.0.1 serving
///
/// - `POST /token`: Google's OAuth token endpoint for the JWT-bearer grant. The RS256 assertion must be signed
///   by a trusted service account (``Configuration/serviceAccounts``), name the firebase.messaging (or
///   cloud-platform) scope and an `aud` ending in `/token`, and have sane `iat`/`exp`; the answer is
///   `{"access_token", "expires_in", "token_type": "Bearer"}`, else 400 `invalid_grant` as Google answers.
/// - `POST /v1/projects/<id>/messages:send`: checks the bearer token (401 `UNAUTHENTICATED` when missing,
///   unknown or expired), the project (404 `NOT_FOUND`), then the message like FCM (one target; `data` strings
///   only, no reserved keys; `android.priority` and `ttl` formats; 4,096 bytes: 400 `INVALID_ARGUMENT`), and
///   answers `{"name": "projects/<id>/messages/<n>"}` or FCM's error body with its `FcmError` `errorCode`.
///
/// Faults (``Faults``, settable at runtime with ``setFaults(_:)``) cover unregistered tokens, sender-id
/// mismatch, third-party auth errors, 429/503 with `Retry-After`, refused (expired) access tokens, refused token
/// requests, latency, silence, GOAWAY and dropped connections.
public final class FCMEmulator: Sendable {
    let shared: FCMEmulatorShared
    private let certificates: EmulatorCertificates
    private let sslContext: NIOSSLContext
    private let group: any EventLoopGroup

    private struct Lifecycle {
        var serverChannel: (any Channel)?
        var port: Int
    }
    private let lifecycle: Mutex<Lifecycle>

    /// Creates the emulator and its certificates (nothing is bound until ``start()``).
    public init(configuration: Configuration = .init()) throws {
        self.shared = try FCMEmulatorShared(configuration: configuration)
        let certificates = try EmulatorCertificates()
        self.certificates = certificates
        self.sslContext = try EmulatorServer.tlsContext(certificates)
        self.group = MultiThreadedEventLoopGroup.singleton
        self.lifecycle = Mutex(Lifecycle(serverChannel: nil, port: configuration.port))
    }

    public var configuration: Configuration { shared.configuration }

    /// Binds and starts accepting connections; afterwards ``port`` is the bound port.
    public func start() async throws {
        let port = lifecycle.withLock { $0.port }
        let shared = self.shared
        let maxConcurrentStreams = shared.configuration.maxConcurrentStreams
        let channel = try await EmulatorServer.bind(
            group: group, host: shared.configuration.host, port: port, sslContext: sslContext, coalesceWrites: false,
            maxConcurrentStreams: { maxConcurrentStreams },
            addConnectionHandler: { try $0.addHandler(EmulatorHTTP2Handler(service: shared)) })
        let bound = channel.localAddress?.port ?? port
        lifecycle.withLock {
            $0.serverChannel = channel
            $0.port = bound
        }
    }

    /// The bound port (the configured one before ``start()``).
    public var port: Int { lifecycle.withLock { $0.port } }

    /// `https://127.0.0.1:PORT`: the `endpoint` of an FCM provider configuration.
    public var endpoint: String {
        let host = shared.configuration.host.contains(":") ? "[\(shared.configuration.host)]" : shared.configuration.host
        return "https://\(host):\(port)"
    }

    /// `https://127.0.0.1:PORT/token`: the `tokenEndpoint` of an FCM provider configuration.
    public var tokenEndpoint: String { endpoint + "/token" }

    /// PEM of the emulator's self-signed CA (trust it with `caPath`).
    public var caCertificatePEM: String { certificates.caCertificatePEM }

    /// Writes ``caCertificatePEM`` to `path`.
    public func writeCACertificate(to path: String) throws {
        try Data(caCertificatePEM.utf8).write(to: URL(fileURLWithPath: path))
    }

    /// Replaces the faults (per-token attempt counters and the burst position restart).
    public func setFaults(_ faults: Faults) {
        shared.state.withLock {
            $0.faults = faults
            $0.rng = FastUUIDGenerator(seed: faults.seed)
            $0.perTokenAttempts = [:]
            $0.burstIndex = 0
        }
    }

    /// Refuses every access token issued so far with 401 `UNAUTHENTICATED` (as if they had expired).
    public func expireAccessTokens() {
        shared.state.withLock { $0.faults.refuseTokensIssuedBefore = $0.issuedTokenCount }
    }

    /// Every request received so far (messages and token requests), in order of answer.
    public var requests: [RecordedRequest] { shared.state.withLock { $0.records.all } }
    /// Requests dropped from ``requests`` to stay within ``Configuration/recordLimit``.
    public var droppedRequestCount: Int { shared.state.withLock { $0.records.dropped } }

    /// The `messages:send` requests answered with 200.
    public var deliveredMessages: [RecordedRequest] { requests.filter { $0.path.hasSuffix("messages:send") && $0.status == 200 } }

    /// Access tokens issued so far.
    public var issuedTokenCount: Int { Int(shared.state.withLock { $0.issuedTokenCount }) }

    /// Forgets the recorded requests.
    public func resetRecords() { shared.state.withLock { $0.records.removeAll() } }

    /// Connections accepted so far.
    public var connectionCount: Int { shared.state.withLock { $0.connectionCount } }

    /// Stops listening and closes every connection.
    public func shutdown() async throws {
        let server = lifecycle.withLock { s -> (any Channel)? in
            defer { s.serverChannel = nil }
            return s.serverChannel
        }
        if let server { try? await server.close().get() }
        let channels = shared.state.withLock { Array($0.channels.values) }
        for channel in channels { try? await channel.close().get() }
    }
}

/// State shared by the FCM emulator and its connections, behind one lock.
final class FCMEmulatorShared: Sendable {
    let configuration: FCMEmulator.Configuration
    let keys: [String: _RSA.Signing.PublicKey]

    struct State {
        var faults: FCMEmulator.Faults
        var rng: FastUUIDGenerator
        var records: EmulatorRecords<FCMEmulator.RecordedRequest>
        var connectionCount = 0
        var channels: [Int: any Channel] = [:]
        var perTokenAttempts: [String: Int] = [:]
        var burstIndex = 0
        /// Issued access tokens: value -> (serial, expiry epoch seconds). Bounded: tokens are dropped once expired.
        var tokens: [String: (serial: Int64, expiresAt: Int64)] = [:]
        var issuedTokenCount: Int64 = 0
        var messageCount = 0
    }
    let state: Mutex<State>

    init(configuration: FCMEmulator.Configuration) throws {
        self.configuration = configuration
        var keys: [String: _RSA.Signing.PublicKey] = [:]
        for (email, pem) in configuration.serviceAccounts {
            keys[email] = try _RSA.Signing.PublicKey(pemRepresentation: pem)
        }
        self.keys = keys
        self.state = Mutex(State(faults: configuration.faults, rng: FastUUIDGenerator(seed: configuration.faults.seed),
                                 records: EmulatorRecords(limit: configuration.recordLimit)))
    }

    /// Per-connection fault knobs read when a stream opens.
    var streamFaults: EmulatorStreamFaults {
        state.withLock { EmulatorStreamFaults(goAwayAfterStreams: $0.faults.goAwayAfterStreams,
                                      dropConnectionAfterStreams: $0.faults.dropConnectionAfterStreams) }
    }

    typealias Decision = EmulatorHTTP2Decision<FCMEmulatorAnswer>

    /// Answers one complete request.
    func handle(method: String, path: String, authorization: String?, body: [UInt8]) -> (Decision, FCMEmulatorRules.ValidMessage?) {
        let now = configuration.now()
        if path == "/token" {
            return (.answer(tokenAnswer(method: method, body: body, now: now), latency: .zero), nil)
        }
        guard method == "POST", path.hasPrefix("/v1/projects/"), path.hasSuffix("/messages:send") else {
            return (.answer(FCMEmulatorRules.error(404, errorCode: nil, message: "Not found: \(path)"), latency: .zero), nil)
        }
        let project = path.dropFirst("/v1/projects/".count).dropLast("/messages:send".count)
        if let authFailure = checkAccessToken(authorization, now: now) { return (.answer(authFailure, latency: .zero), nil) }
        if let expected = configuration.projectID, project != expected {
            return (.answer(FCMEmulatorRules.error(404, errorCode: nil, message: "Requested entity was not found."),
                            latency: .zero), nil)
        }
        let valid: FCMEmulatorRules.ValidMessage
        switch FCMEmulatorRules.validate(body: body) {
        case .failure(let answer): return (.answer(answer, latency: .zero), nil)
        case .success(let message): valid = message
        }
        return (decide(valid, project: String(project)), valid)
    }

    private func tokenAnswer(method: String, body: [UInt8], now: Int64) -> FCMEmulatorAnswer {
        guard method == "POST" else { return FCMEmulatorRules.grantError("POST only", error: "invalid_request") }
        let refused = state.withLock { s -> Bool in
            guard s.faults.failTokenRequests > 0 else { return false }
            s.faults.failTokenRequests -= 1
            return true
        }
        if refused { return FCMEmulatorRules.grantError("Invalid JWT Signature.") }
        switch FCMEmulatorRules.verifyTokenRequest(body: body, keys: keys, now: now,
                                                   futureSkew: configuration.assertionFutureSkew.components.seconds) {
        case .failure(let answer): return answer
        case .success:
            let lifetime = max(1, configuration.accessTokenLifetime.components.seconds)
            let value = state.withLock { s -> String in
                s.issuedTokenCount += 1
                let value = "ya29.emulator-\(s.issuedTokenCount)-\(s.rng.uuidString().prefix(8))"
                s.tokens = s.tokens.filter { $0.value.expiresAt > now }
                s.tokens[value] = (s.issuedTokenCount, now + lifetime)
                return value
            }
            let body = FCMEmulatorRules.json(["access_token": value, "expires_in": lifetime, "token_type": "Bearer"])
            return FCMEmulatorAnswer(status: 200, headers: [("content-type", "application/json; charset=utf-8")],
                                     body: body)
        }
    }

    private func checkAccessToken(_ authorization: String?, now: Int64) -> FCMEmulatorAnswer? {
        let unauthenticated = FCMEmulatorRules.error(
            401, errorCode: nil,
            message: "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
        guard let authorization, authorization.hasPrefix("Bearer ") else { return unauthenticated }
        let value = String(authorization.dropFirst(7))
        let ok = state.withLock { s -> Bool in
            guard let token = s.tokens[value], token.expiresAt > now else { return false }
            if let before = s.faults.refuseTokensIssuedBefore, token.serial <= before { return false }
            return true
        }
        return ok ? nil : unauthenticated
    }

    private func decide(_ message: FCMEmulatorRules.ValidMessage, project: String) -> Decision {
        state.withLock { s -> Decision in
            let f = s.faults
            let token = message.targetKind == "token" ? message.target : nil
            func fault(_ a: FCMEmulator.FaultAnswer) -> Decision {
                .answer(FCMEmulatorRules.error(a.status, errorCode: a.errorCode, message: a.errorCode ?? "error",
                                               retryAfter: a.retryAfterSeconds), latency: f.latency)
            }
            if let token {
                if f.silentTokens.contains(token) { return .silent }
                if f.unregisteredTokens.contains(token) {
                    return .answer(FCMEmulatorRules.error(404, errorCode: "UNREGISTERED", message: "Requested entity was not found."),
                                   latency: f.latency)
                }
                if f.senderIDMismatchTokens.contains(token) {
                    return .answer(FCMEmulatorRules.error(403, errorCode: "SENDER_ID_MISMATCH", message: "SenderId mismatch"),
                                   latency: f.latency)
                }
                if f.thirdPartyAuthErrorTokens.contains(token) {
                    return .answer(FCMEmulatorRules.error(401, errorCode: "THIRD_PARTY_AUTH_ERROR", message: "Auth error from APNS or Web Push Service"),
                                   latency: f.latency)
                }
                if f.invalidTokens.contains(token) {
                    return .answer(FCMEmulatorRules.error(400, errorCode: "INVALID_ARGUMENT",
                                                          message: "The registration token is not a valid FCM registration token",
                                                          field: "message.token"), latency: f.latency)
                }
                if let plan = f.failFirstAttempts[token] {
                    let n = s.perTokenAttempts[token, default: 0]
                    s.perTokenAttempts[token] = n + 1
                    if n < plan.count { return fault(plan[n]) }
                }
            }
            if s.burstIndex < f.failNextRequests.count {
                let answer = f.failNextRequests[s.burstIndex]
                s.burstIndex += 1
                return fault(answer)
            }
            if f.errorRate > 0, s.rng.nextUnit() < f.errorRate { return fault(f.errorAnswer) }
            s.messageCount += 1
            let name = message.validateOnly
                ? "projects/\(project)/messages/fake_message_id"
                : "projects/\(project)/messages/0:\(1_700_000_000_000 + s.messageCount)%emulator"
            return .answer(FCMEmulatorAnswer(status: 200, headers: [("content-type", "application/json; charset=UTF-8")],
                                             body: FCMEmulatorRules.json(["name": name]), messageName: name),
                           latency: f.latency)
        }
    }

    func record(_ r: FCMEmulator.RecordedRequest) {
        guard configuration.recordRequests else { return }
        state.withLock { $0.records.append(r) }
    }
}

/// The FCM emulator as a service of the generic HTTP/2 handler.
extension FCMEmulatorShared: EmulatorHTTP2Service {
    func payloadTooLarge() -> FCMEmulatorAnswer {
        FCMEmulatorRules.error(413, errorCode: nil, message: "Request entity too large")
    }

    func handle(_ request: EmulatorHTTP2Request) -> Decision {
        let (decision, message) = handle(method: request.method, path: request.path,
                                         authorization: request.header("authorization"), body: request.bodyBytes)
        guard case .answer(var answer, let latency) = decision else { return decision }
        answer.message = message
        return .answer(answer, latency: latency)
    }

    func connectionOpened(_ channel: any Channel) -> Int {
        state.withLock { s in
            s.connectionCount += 1
            s.channels[s.connectionCount] = channel
            return s.connectionCount
        }
    }

    func connectionClosed(_ id: Int) {
        _ = state.withLock { $0.channels.removeValue(forKey: id) }
    }

    var recordsRequests: Bool { configuration.recordRequests }

    func record(_ request: EmulatorHTTP2Request, answer: FCMEmulatorAnswer?, answered: Bool, connectionID: Int) {
        let sent = answered ? answer : nil
        let message = answer?.message
        record(FCMEmulator.RecordedRequest(
            method: request.method, path: request.path, headers: request.headers, body: request.bodyBytes,
            target: message.map { ($0.targetKind, $0.target) }, blocks: message?.blocks ?? [],
            status: sent?.status ?? 0, errorCode: sent?.errorCode, messageName: sent?.messageName,
            connectionID: connectionID))
    }
}
