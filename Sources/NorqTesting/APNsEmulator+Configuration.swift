import Foundation

extension APNsEmulator {
    /// How the emulator is set up: where it listens, which credentials it accepts, its limits and faults.
    public struct Configuration: Sendable {
        /// Address to bind (default `127.0.0.1`).
        public var host: String
        /// Port to bind; 0 picks a free port (read it from ``APNsEmulator/port`` after ``APNsEmulator/start()``).
        public var port: Int
        /// Name copied into every ``RecordedRequest`` (e.g. `sandbox`, `production`).
        public var environmentName: String
        /// Team id the JWT's `iss` claim must equal (nil: any team).
        public var teamID: String?
        /// Key id of ``signingPublicKeyPEM`` (the JWT header's `kid` must equal it).
        public var keyID: String?
        /// P-256 public key (PEM) that verifies JWT signatures for ``keyID``.
        public var signingPublicKeyPEM: String?
        /// More accepted keys: key id -> P-256 public key PEM.
        public var signingKeys: [String: String]
        /// Allowed base topics (bundle ids); nil accepts any bundle id (the push-type suffix is still checked).
        public var bundleIDs: Set<String>?
        /// Certificate-auth mode: the TLS handshake requires a client certificate signed by the emulator CA
        /// (see ``APNsEmulator/makeClientCertificate(commonName:)``) and no JWT is required.
        public var requireClientCertificate: Bool
        /// Advertised `SETTINGS_MAX_CONCURRENT_STREAMS`.
        public var maxConcurrentStreams: Int
        /// A connection whose JWT changes sooner than this after the previous one gets 429 `TooManyProviderTokenUpdates`.
        public var tokenUpdateMinInterval: Duration
        /// A JWT whose `iat` is older than this gets 403 `ExpiredProviderToken`.
        public var jwtMaxAge: Duration
        /// Allowed clock skew for an `iat` in the future before 403 `InvalidProviderToken`.
        public var jwtFutureSkew: Duration
        /// The current time in epoch seconds; inject a fake clock to simulate hours.
        public var now: @Sendable () -> Int64
        /// Keep requests in ``APNsEmulator/requests`` (turn off for long benchmarks to save memory): at most
        /// ``recordLimit`` of them, the newest.
        public var recordRequests: Bool
        /// The most requests ``APNsEmulator/requests`` holds (default 10,000: a few MB, whatever the run's length).
        /// When full, the oldest tenth is dropped; ``APNsEmulator/droppedRequestCount`` counts them.
        public var recordLimit = 10_000
        /// Called with every request recorded, on the connection's event loop (it must not block): how
        /// `norq emulator` prints them as they come.
        public var onRequest: (@Sendable (RecordedRequest) -> Void)?
        /// Keep request bodies in records (turn off for benchmarks).
        public var recordBodies: Bool
        /// Injected faults (can be changed at runtime with ``APNsEmulator/setFaults(_:)``).
        public var faults: Faults
        /// The app's broadcast capability: when false every channel and broadcast request gets 400
        /// `FeatureNotEnabled` (see APNsEmulator+Channels.swift).
        public var broadcastEnabled = true
        /// Channels per app and environment before 400 `CannotCreateChannelConfig` (APNs: 10,000).
        public var maxChannelsPerApp = 10_000

        public init(
            host: String = "127.0.0.1",
            port: Int = 0,
            environmentName: String = "sandbox",
            teamID: String? = nil,
            keyID: String? = nil,
            signingPublicKeyPEM: String? = nil,
            signingKeys: [String: String] = [:],
            bundleIDs: Set<String>? = nil,
            requireClientCertificate: Bool = false,
            maxConcurrentStreams: Int = 1000,
            tokenUpdateMinInterval: Duration = .seconds(20 * 60),
            jwtMaxAge: Duration = .seconds(60 * 60),
            jwtFutureSkew: Duration = .seconds(60),
            now: @escaping @Sendable () -> Int64 = Configuration.systemNow,
            recordRequests: Bool = true,
            recordBodies: Bool = true,
            faults: Faults = .init()
        ) {
            self.host = host
            self.port = port
            self.environmentName = environmentName
            self.teamID = teamID
            self.keyID = keyID
            self.signingPublicKeyPEM = signingPublicKeyPEM
            self.signingKeys = signingKeys
            self.bundleIDs = bundleIDs
            self.requireClientCertificate = requireClientCertificate
            self.maxConcurrentStreams = maxConcurrentStreams
            self.tokenUpdateMinInterval = tokenUpdateMinInterval
            self.jwtMaxAge = jwtMaxAge
            self.jwtFutureSkew = jwtFutureSkew
            self.now = now
            self.recordRequests = recordRequests
            self.recordBodies = recordBodies
            self.faults = faults
        }

        /// The system clock in epoch seconds (the default of ``now``).
        public static let systemNow: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }

        /// All accepted keys (``signingKeys`` plus ``keyID``/``signingPublicKeyPEM``).
        var allSigningKeys: [String: String] {
            var keys = signingKeys
            if let keyID, let signingPublicKeyPEM { keys[keyID] = signingPublicKeyPEM }
            return keys
        }
    }

    /// One scripted answer: a status, a reason and optionally a `retry-after` header.
    public struct FaultAnswer: Sendable, Hashable {
        public var status: Int
        public var reason: String
        public var retryAfterSeconds: Int?
        public init(status: Int, reason: String, retryAfterSeconds: Int? = nil) {
            self.status = status
            self.reason = reason
            self.retryAfterSeconds = retryAfterSeconds
        }
        public static let tooManyRequests = FaultAnswer(status: 429, reason: "TooManyRequests")
        public static let internalServerError = FaultAnswer(status: 500, reason: "InternalServerError")
        public static let serviceUnavailable = FaultAnswer(status: 503, reason: "ServiceUnavailable")
        public static let shutdown = FaultAnswer(status: 503, reason: "Shutdown")
    }

    /// Faults injected into answers. Validation (path, auth, headers, payload) runs first; then, for a
    /// valid request, in this order: silent tokens, 410 unregistered tokens, bad tokens, the per-token
    /// plan (``failFirstAttempts``), the global burst (``failNextRequests``), the random error rate.
    public struct Faults: Sendable {
        /// Device token -> 410 `Unregistered` with this timestamp (milliseconds since the epoch).
        public var unregisteredTokens: [String: Int64]
        /// Device tokens answered 400 `BadDeviceToken`.
        public var badTokens: Set<String>
        /// Per device token: the first requests for that token get these answers, in order; later ones succeed.
        public var failFirstAttempts: [String: [FaultAnswer]]
        /// A burst: the next valid requests (any token) get these answers, in order.
        public var failNextRequests: [FaultAnswer]
        /// Probability (0...1) that a valid request is answered ``errorStatus``/``errorReason`` (seeded, deterministic).
        public var errorRate: Double
        public var errorStatus: Int
        public var errorReason: String
        /// Seed of the random generator behind ``errorRate``.
        public var seed: UInt64
        /// Adds `retry-after` to 429 and 503 answers produced by faults.
        public var retryAfterSeconds: Int?
        /// Delay before every answer.
        public var latency: Duration
        /// Device tokens whose streams are never answered (the stream stays open).
        public var silentTokens: Set<String>
        /// After this many streams on a connection, send `GOAWAY` with last-stream-id = that stream; streams
        /// up to it are answered, later ones are not processed (ignored, not recorded: the client re-sends them), and the
        /// connection closes once the answered streams are done.
        public var goAwayAfterStreams: Int?
        /// Close the TCP connection abruptly when this many streams have been received on it; requests not yet
        /// answered get no answer (recorded with status 0).
        public var dropConnectionAfterStreams: Int?

        public init(
            unregisteredTokens: [String: Int64] = [:],
            badTokens: Set<String> = [],
            failFirstAttempts: [String: [FaultAnswer]] = [:],
            failNextRequests: [FaultAnswer] = [],
            errorRate: Double = 0,
            errorStatus: Int = 503,
            errorReason: String = "ServiceUnavailable",
            seed: UInt64 = 0x5EED,
            retryAfterSeconds: Int? = nil,
            latency: Duration = .zero,
            silentTokens: Set<String> = [],
            goAwayAfterStreams: Int? = nil,
            dropConnectionAfterStreams: Int? = nil
        ) {
            self.unregisteredTokens = unregisteredTokens
            self.badTokens = badTokens
            self.failFirstAttempts = failFirstAttempts
            self.failNextRequests = failNextRequests
            self.errorRate = errorRate
            self.errorStatus = errorStatus
            self.errorReason = errorReason
            self.seed = seed
            self.retryAfterSeconds = retryAfterSeconds
            self.latency = latency
            self.silentTokens = silentTokens
            self.goAwayAfterStreams = goAwayAfterStreams
            self.dropConnectionAfterStreams = dropConnectionAfterStreams
        }
    }
}

/// One request the emulator received, with what it answered.
public struct RecordedRequest: Sendable {
    public var method: String
    public var path: String
    public var authority: String
    /// Regular (non-pseudo) headers in received order.
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// 1-based id of the connection (in accept order).
    public var connectionID: Int
    public var streamID: Int
    public var environmentName: String
    /// Status answered, or 0 when none was (silent stream, dropped connection).
    public var status: Int
    /// Reason of an error answer.
    public var reason: String?
    /// `apns-id` answered (the request's, lowercased, or a generated one).
    public var apnsID: String?

    /// The first value of a header (name compared case-insensitively).
    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.name == lower }?.value
    }

    /// The device token from the path (`/3/device/<token>`), if any.
    public var deviceToken: String? {
        let prefix = "/3/device/"
        guard path.hasPrefix(prefix) else { return nil }
        return String(path.dropFirst(prefix.count))
    }
}
