import Crypto
import Foundation

extension WebPushEmulator {
    /// Which HTTP version the emulator speaks (ALPN offers only that one).
    public enum HTTPVersion: String, Sendable, Hashable {
        case http2 = "h2"
        /// A push service that speaks HTTP/1.1 only (some self-hosted and UnifiedPush servers).
        case http1 = "http/1.1"
    }

    /// A scripted answer.
    public struct FaultAnswer: Sendable, Hashable {
        public var status: Int
        public var retryAfterSeconds: Int?
        /// The body (a push service's reason), JSON or text.
        public var body: String
        public init(status: Int, retryAfterSeconds: Int? = nil, body: String = "") {
            self.status = status
            self.retryAfterSeconds = retryAfterSeconds
            self.body = body
        }
    }

    /// Faults applied to requests that passed every check.
    public struct Faults: Sendable {
        /// The first N requests to a subscription (by id) get these answers, then normal service.
        public var failFirstAttempts: [String: [FaultAnswer]]
        /// The next N valid requests of any subscription get these answers.
        public var failNextRequests: [FaultAnswer]
        /// Never answered (the client's deadline must fire).
        public var silentSubscriptions: Set<String>
        /// Delay before every answer.
        public var latency: Duration
        /// HTTP/2: `GOAWAY` (last-stream-id = the Nth stream) after N streams on a connection; later streams are
        /// reset unprocessed.
        public var goAwayAfterStreams: Int?
        /// The connection is closed when its Nth request (stream) opens; unanswered requests never are.
        public var dropConnectionAfterStreams: Int?

        public init(failFirstAttempts: [String: [FaultAnswer]] = [:], failNextRequests: [FaultAnswer] = [],
                    silentSubscriptions: Set<String> = [], latency: Duration = .zero, goAwayAfterStreams: Int? = nil,
                    dropConnectionAfterStreams: Int? = nil) {
            self.failFirstAttempts = failFirstAttempts
            self.failNextRequests = failNextRequests
            self.silentSubscriptions = silentSubscriptions
            self.latency = latency
            self.goAwayAfterStreams = goAwayAfterStreams
            self.dropConnectionAfterStreams = dropConnectionAfterStreams
        }
    }

    public struct Configuration: Sendable {
        /// The system wall clock in epoch seconds.
        public static let wallClock: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
        public var host: String
        public var port: Int
        /// The host written into subscription endpoints (`127.0.0.1`, or `localhost` to exercise name resolution).
        public var endpointHost: String
        public var httpVersion: HTTPVersion
        /// VAPID public keys (base64url) accepted from any subscription; nil accepts any key whose signature
        /// verifies (a subscription made with an `applicationServerKey` still accepts only that key).
        public var acceptedVAPIDKeys: Set<String>?
        /// Requests without VAPID are answered 401 (Apple and FCM require it).
        public var requireVAPID: Bool
        /// Wall clock for `exp` checks (epoch seconds).
        public var now: @Sendable () -> Int64
        /// Advertised `SETTINGS_MAX_CONCURRENT_STREAMS` (HTTP/2).
        public var maxConcurrentStreams: Int
        /// Keep decrypted messages (and each request's answer) for inspection: at most ``recordLimit``, the newest.
        public var recordMessages: Bool
        /// The most messages ``WebPushEmulator/messages`` holds (default 10,000). When full, the oldest tenth is
        /// dropped; ``WebPushEmulator/droppedMessageCount`` counts them.
        public var recordLimit = 10_000
        /// Accept messages to a path no subscription claims (a subscription the emulator never saw, as one given to
        /// `norq serve --emulator` through its API): each is checked like a subscription adopted without its keys
        /// (VAPID, headers, size; not decrypted) and recorded under its path, and nothing is kept of it beyond the
        /// bounded ``WebPushEmulator/messages``. Off by default: such a message gets 404.
        public var acceptUnknownSubscriptions = false
        public var faults: Faults

        public init(host: String = "127.0.0.1", port: Int = 0, endpointHost: String = "127.0.0.1",
                    httpVersion: HTTPVersion = .http2, acceptedVAPIDKeys: Set<String>? = nil, requireVAPID: Bool = true,
                    now: @escaping @Sendable () -> Int64 = Configuration.wallClock,
                    maxConcurrentStreams: Int = 1000, recordMessages: Bool = true, faults: Faults = Faults()) {
            self.host = host
            self.port = port
            self.endpointHost = endpointHost
            self.httpVersion = httpVersion
            self.acceptedVAPIDKeys = acceptedVAPIDKeys
            self.requireVAPID = requireVAPID
            self.now = now
            self.maxConcurrentStreams = maxConcurrentStreams
            self.recordMessages = recordMessages
            self.faults = faults
        }
    }

    /// A browser subscription the emulator issued: what `PushSubscription.toJSON()` gives. The emulator keeps
    /// the matching private key and decrypts every message sent to it.
    public struct Subscription: Sendable, Hashable {
        public var id: String
        public var endpoint: String
        /// base64url of the user agent's 65-byte public key.
        public var p256dh: String
        /// base64url of the 16-byte auth secret.
        public var auth: String
        /// The `applicationServerKey` it was made with, if any (then only that VAPID key is accepted).
        public var applicationServerKey: String?
    }

    /// One request the emulator answered (or gave up on), with the decrypted payload when it got that far.
    public struct Message: Sendable, Hashable {
        public var subscriptionID: String?
        public var path: String
        public var httpVersion: String
        public var headers: [String: String]
        /// The decrypted plaintext (nil when the request was refused before or during decryption).
        public var plaintext: [UInt8]?
        public var ttl: Int?
        public var urgency: String?
        public var topic: String?
        public var vapidSubject: String?
        public var vapidAudience: String?
        public var bodyBytes: Int
        /// The answer's status (0: never answered).
        public var status: Int
        /// Why it was refused, when it was.
        public var reason: String?
        /// The encrypted body as received (at most 4,096 bytes are kept: a longer one is refused with 413 and
        /// only its size, `bodyBytes`, is recorded).
        public var body: [UInt8] = []

        public var plaintextString: String? { plaintext.map { String(decoding: $0, as: UTF8.self) } }
    }
}
