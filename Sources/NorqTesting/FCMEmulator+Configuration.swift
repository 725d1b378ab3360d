import Foundation
import _CryptoExtras

extension FCMEmulator {
    /// How the FCM emulator is set up: where it listens, which service accounts it trusts, its limits and faults.
    public struct Configuration: Sendable {
        /// Address to bind (default `127.0.0.1`).
        public var host: String
        /// Port to bind; 0 picks a free port (read ``FCMEmulator/port`` after ``FCMEmulator/start()``).
        public var port: Int
        /// The project id `messages:send` accepts; nil accepts any (a wrong one gets 404 `NOT_FOUND`).
        public var projectID: String?
        /// Trusted service accounts: `client_email` -> RSA public key PEM (verifies the RS256 assertions).
        public var serviceAccounts: [String: String]
        /// Lifetime of the access tokens the token endpoint issues (`expires_in`). Default one hour.
        public var accessTokenLifetime: Duration
        /// Allowed clock skew for an assertion `iat` in the future.
        public var assertionFutureSkew: Duration
        /// Advertised `SETTINGS_MAX_CONCURRENT_STREAMS`.
        public var maxConcurrentStreams: Int
        /// The current time in epoch seconds; inject a fake clock to simulate hours.
        public var now: @Sendable () -> Int64
        /// Keep requests in ``FCMEmulator/requests`` (turn off for long benchmarks to save memory): at most
        /// ``recordLimit`` of them, the newest.
        public var recordRequests: Bool
        /// The most requests ``FCMEmulator/requests`` holds (default 10,000). When full, the oldest tenth is
        /// dropped; ``FCMEmulator/droppedRequestCount`` counts them.
        public var recordLimit = 10_000
        /// Injected faults (change them at runtime with ``FCMEmulator/setFaults(_:)``).
        public var faults: Faults

        public init(host: String = "127.0.0.1", port: Int = 0, projectID: String? = nil,
                    serviceAccounts: [String: String] = [:], accessTokenLifetime: Duration = .seconds(3600),
                    assertionFutureSkew: Duration = .seconds(60), maxConcurrentStreams: Int = 1000,
                    now: @escaping @Sendable () -> Int64 = APNsEmulator.Configuration.systemNow,
                    recordRequests: Bool = true, faults: Faults = .init()) {
            self.host = host
            self.port = port
            self.projectID = projectID
            self.serviceAccounts = serviceAccounts
            self.accessTokenLifetime = accessTokenLifetime
            self.assertionFutureSkew = assertionFutureSkew
            self.maxConcurrentStreams = maxConcurrentStreams
            self.now = now
            self.recordRequests = recordRequests
            self.faults = faults
        }

        /// Trusts the service account of a JSON key file's text (its public key is derived from `private_key`).
        /// Returns its `client_email`.
        @discardableResult
        public mutating func trust(serviceAccountJSON: String) throws -> String {
            guard let object = try JSONSerialization.jsonObject(with: Data(serviceAccountJSON.utf8)) as? [String: Any],
                  let email = object["client_email"] as? String, let pem = object["private_key"] as? String else {
                throw FCMEmulatorError("not a service-account JSON key (client_email, private_key)")
            }
            let key = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
            serviceAccounts[email] = key.publicKey.pemRepresentation
            return email
        }
    }

    /// A scripted error answer: an FCM `errorCode` (or none), its HTTP status, and an optional `Retry-After`.
    public struct FaultAnswer: Sendable, Hashable {
        public var status: Int
        /// `UNAVAILABLE`, `QUOTA_EXCEEDED`, ...; nil answers with the canonical status only.
        public var errorCode: String?
        public var retryAfterSeconds: Int?

        public init(status: Int, errorCode: String?, retryAfterSeconds: Int? = nil) {
            self.status = status
            self.errorCode = errorCode
            self.retryAfterSeconds = retryAfterSeconds
        }

        public static func code(_ errorCode: String, retryAfterSeconds: Int? = nil) -> FaultAnswer {
            FaultAnswer(status: FCMEmulator.status(of: errorCode), errorCode: errorCode, retryAfterSeconds: retryAfterSeconds)
        }
    }

    /// Fault switches, applied to requests that passed validation.
    public struct Faults: Sendable {
        /// 404 `UNREGISTERED`.
        public var unregisteredTokens: Set<String>
        /// 403 `SENDER_ID_MISMATCH`.
        public var senderIDMismatchTokens: Set<String>
        /// 401 `THIRD_PARTY_AUTH_ERROR` (the APNs / Web Push credentials of the Firebase project).
        public var thirdPartyAuthErrorTokens: Set<String>
        /// 400 `INVALID_ARGUMENT` naming `message.token`.
        public var invalidTokens: Set<String>
        /// Never answered (the client's deadline must fire).
        public var silentTokens: Set<String>
        /// The first N requests for a token get the scripted answers (e.g. 503, then success).
        public var failFirstAttempts: [String: [FaultAnswer]]
        /// The next N valid requests of any token get the scripted answers.
        public var failNextRequests: [FaultAnswer]
        /// A seeded (deterministic) share of valid requests fails with ``errorAnswer``.
        public var errorRate: Double
        public var errorAnswer: FaultAnswer
        public var seed: UInt64
        /// Delay before each answer.
        public var latency: Duration
        /// Every access token issued so far is refused with 401 `UNAUTHENTICATED` (as if expired or revoked);
        /// tokens issued after the switch is set work.
        public var refuseTokensIssuedBefore: Int64?
        /// The next N token requests are refused with 400 `invalid_grant`.
        public var failTokenRequests: Int
        /// `GOAWAY` after N streams on a connection (later streams are not processed).
        public var goAwayAfterStreams: Int?
        /// Close a connection when its Nth stream opens.
        public var dropConnectionAfterStreams: Int?

        public init(unregisteredTokens: Set<String> = [], senderIDMismatchTokens: Set<String> = [],
                    thirdPartyAuthErrorTokens: Set<String> = [], invalidTokens: Set<String> = [],
                    silentTokens: Set<String> = [], failFirstAttempts: [String: [FaultAnswer]] = [:],
                    failNextRequests: [FaultAnswer] = [], errorRate: Double = 0,
                    errorAnswer: FaultAnswer = .code("UNAVAILABLE"), seed: UInt64 = 1, latency: Duration = .zero,
                    refuseTokensIssuedBefore: Int64? = nil, failTokenRequests: Int = 0,
                    goAwayAfterStreams: Int? = nil, dropConnectionAfterStreams: Int? = nil) {
            self.unregisteredTokens = unregisteredTokens
            self.senderIDMismatchTokens = senderIDMismatchTokens
            self.thirdPartyAuthErrorTokens = thirdPartyAuthErrorTokens
            self.invalidTokens = invalidTokens
            self.silentTokens = silentTokens
            self.failFirstAttempts = failFirstAttempts
            self.failNextRequests = failNextRequests
            self.errorRate = errorRate
            self.errorAnswer = errorAnswer
            self.seed = seed
            self.latency = latency
            self.refuseTokensIssuedBefore = refuseTokensIssuedBefore
            self.failTokenRequests = failTokenRequests
            self.goAwayAfterStreams = goAwayAfterStreams
            self.dropConnectionAfterStreams = dropConnectionAfterStreams
        }
    }

    /// One request the emulator received (`messages:send` or the token endpoint) and what it answered.
    public struct RecordedRequest: Sendable {
        public var method: String
        public var path: String
        public var headers: [(name: String, value: String)]
        public var body: [UInt8]
        /// `token`, `topic` or `condition` and its value, for `messages:send`.
        public var target: (kind: String, value: String)?
        /// The platform blocks the message carried (`android`, `apns`, `webpush`).
        public var blocks: [String]
        /// 0 when never answered (the connection closed first).
        public var status: Int
        /// The FCM `errorCode` (or canonical status, or OAuth `error`) answered, if any.
        public var errorCode: String?
        /// The message name answered (`projects/<id>/messages/<n>`).
        public var messageName: String?
        public var connectionID: Int

        /// The request body as JSON (nil when it is not).
        public var json: [String: Any]? {
            (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
        }

        /// `message` of the request body.
        public var message: [String: Any]? { json?["message"] as? [String: Any] }

        public func header(_ name: String) -> String? { headers.first(where: { $0.name == name })?.value }
    }

    /// The HTTP status FCM answers with an error code.
    public static func status(of errorCode: String) -> Int {
        switch errorCode {
        case "UNREGISTERED": 404
        case "SENDER_ID_MISMATCH": 403
        case "QUOTA_EXCEEDED": 429
        case "UNAVAILABLE": 503
        case "INTERNAL", "UNSPECIFIED_ERROR": 500
        case "THIRD_PARTY_AUTH_ERROR": 401
        default: 400
        }
    }

    /// The canonical (google.rpc) status name of an HTTP status.
    static func canonical(_ status: Int) -> String {
        switch status {
        case 400: "INVALID_ARGUMENT"
        case 401: "UNAUTHENTICATED"
        case 403: "PERMISSION_DENIED"
        case 404: "NOT_FOUND"
        case 429: "RESOURCE_EXHAUSTED"
        case 503: "UNAVAILABLE"
        default: "INTERNAL"
        }
    }
}

/// A setup error of the emulator.
public struct FCMEmulatorError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
