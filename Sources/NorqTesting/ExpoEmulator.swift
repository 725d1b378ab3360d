import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// An in-process look-alike of Expo's push service: an HTTP/2 + TLS (ALPN `h2`) server on 127.0.0.1 serving
///
/// - `POST /--/api/v2/push/send`: a JSON array of messages (or one object, answered with one ticket object), gzip
///   request bodies accepted (`content-encoding: gzip`). At most 100 recipients (every element of every `to`): else
///   400 `PUSH_TOO_MANY_NOTIFICATIONS`; all of one project (``Configuration/projects``): else 400
///   `PUSH_TOO_MANY_EXPERIENCE_IDS` whose `details` map each project to its tokens. With
///   ``Configuration/accessToken`` set, requests need `Authorization: Bearer <it>` (401 `UNAUTHORIZED`). The
///   answer is `{"data": [tickets]}` in recipient order.
/// - `POST /--/api/v2/push/getReceipts`: `{"ids": [...]}` (at most 1,000: else 400 `PUSH_TOO_MANY_RECEIPTS`),
///   answered `{"data": {id: receipt}}` for the ids whose receipt is ready (``Faults/receiptLatency``).
///
/// Faults (``Faults``, settable at runtime with ``setFaults(_:)``): DeviceNotRegistered tickets and receipts,
/// other ticket and receipt error codes per token, answers for the next requests (429, 5xx, HTML gateway pages),
/// latency, and receipts that stay pending.
public final class ExpoEmulator: Sendable {
    let shared: ExpoEmulatorShared
    private let certificates: EmulatorCertificates
    private let sslContext: NIOSSLContext
    private let group: any EventLoopGroup
    private let lifecycle: Mutex<(channel: (any Channel)?, port: Int)>

    /// How the emulator is set up.
    public struct Configuration: Sendable {
        /// Address to bind (default `127.0.0.1`).
        public var host: String
        /// Port to bind; 0 picks a free port.
        public var port: Int
        /// The access token requests must carry; nil: no authentication (Expo's default).
        public var accessToken: String?
        /// Each token's Expo project (`@owner/slug`); tokens not listed belong to ``defaultProject``.
        public var projects: [String: String]
        public var defaultProject: String
        /// Advertised `SETTINGS_MAX_CONCURRENT_STREAMS`.
        public var maxConcurrentStreams: Int
        /// Keep requests in ``ExpoEmulator/requests``: at most ``recordLimit``, the newest.
        public var recordRequests: Bool
        public var recordLimit = 10_000
        /// The most tickets whose receipts are kept (the oldest forgotten first, as Expo forgets them after a day).
        public var receiptLimit = 100_000
        public var faults: Faults

        public init(host: String = "127.0.0.1", port: Int = 0, accessToken: String? = nil,
                    projects: [String: String] = [:], defaultProject: String = "@norq/emulator",
                    maxConcurrentStreams: Int = 100, recordRequests: Bool = true, faults: Faults = .init()) {
            self.host = host
            self.port = port
            self.accessToken = accessToken
            self.projects = projects
            self.defaultProject = defaultProject
            self.maxConcurrentStreams = maxConcurrentStreams
            self.recordRequests = recordRequests
            self.faults = faults
        }
    }

    /// A request-level answer: HTTP status, and Expo's `errors[0].code` (nil: a gateway's HTML page).
    public struct RequestFault: Sendable, Hashable {
        public var status: Int
        public var code: String?
        public init(status: Int, code: String? = nil) {
            self.status = status
            self.code = code
        }
        /// 429 `TOO_MANY_REQUESTS`.
        public static let tooManyRequests = RequestFault(status: 429, code: "TOO_MANY_REQUESTS")
        /// 500 `INTERNAL_SERVER_ERROR`.
        public static let internalError = RequestFault(status: 500, code: "INTERNAL_SERVER_ERROR")
        /// 504 with nginx's HTML page.
        public static let gatewayTimeout = RequestFault(status: 504, code: nil)
    }

    /// Injected faults.
    public struct Faults: Sendable {
        /// Tokens answered with a `DeviceNotRegistered` error ticket.
        public var unregisteredTokens: Set<String> = []
        /// Tokens whose ticket is an error with this code (`MessageRateExceeded`, `InvalidCredentials`, ...).
        public var ticketErrors: [String: String] = [:]
        /// Tokens whose ticket is ok but whose receipt is an error with this code (`DeviceNotRegistered`, ...).
        public var receiptErrors: [String: String] = [:]
        /// Answers for the next send requests, in order (then normal answers).
        public var failNextRequests: [RequestFault] = []
        /// Per token: answers for its first requests (a partial batch failure when the batch mixes tokens).
        public var failTokenTickets: [String: [String]] = [:]
        /// Tokens whose send request is never answered (the stream stays open until the client gives up).
        public var silentTokens: Set<String> = []
        /// Delay before each send answer.
        public var latency: Duration = .zero
        /// How long after its ticket a receipt becomes available (absent from getReceipts before).
        public var receiptLatency: Duration = .zero
        public init() {}
    }

    /// One request as received (body inflated when it came gzipped).
    public struct RecordedRequest: Sendable {
        public struct Detail: Sendable {
            /// Every recipient of a send, in order.
            public var recipients: [String] = []
            /// Whether the body came gzipped.
            public var gzipped = false
            /// The inflated body.
            public var inflatedBody: [UInt8] = []
            public init() {}
        }
        public var method: String
        public var path: String
        public var headers: [(name: String, value: String)]
        /// The body as sent.
        public var body: [UInt8]
        public var detail: Detail
        public var status: Int
        public var errorCode: String?
        public var connectionID: Int

        public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
    }

    public init(configuration: Configuration = .init()) throws {
        self.shared = ExpoEmulatorShared(configuration: configuration)
        let certificates = try EmulatorCertificates()
        self.certificates = certificates
        self.sslContext = try EmulatorServer.tlsContext(certificates)
        self.group = MultiThreadedEventLoopGroup.singleton
        self.lifecycle = Mutex((nil, configuration.port))
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
        lifecycle.withLock { $0 = (channel, bound) }
    }

    public var port: Int { lifecycle.withLock { $0.port } }

    /// `https://127.0.0.1:PORT`: the `endpoint` of an Expo provider configuration.
    public var endpoint: String {
        let host = shared.configuration.host.contains(":") ? "[\(shared.configuration.host)]" : shared.configuration.host
        return "https://\(host):\(port)"
    }

    /// PEM of the emulator's self-signed CA (trust it with `caPath` / `caPem`).
    public var caCertificatePEM: String { certificates.caCertificatePEM }

    public func writeCACertificate(to path: String) throws {
        try Data(caCertificatePEM.utf8).write(to: URL(fileURLWithPath: path))
    }

    /// Replaces the faults (per-token counters restart).
    public func setFaults(_ faults: Faults) {
        shared.state.withLock {
            $0.faults = faults
            $0.perTokenAttempts = [:]
        }
    }

    /// Sets the project of `token` (a token may move between projects in tests).
    public func setProject(_ project: String, for token: String) {
        shared.state.withLock { $0.projects[token] = project }
    }

    /// Every request received so far, in order of answer.
    public var requests: [RecordedRequest] { shared.state.withLock { $0.records.all } }
    /// The send requests answered 200.
    public var sendRequests: [RecordedRequest] {
        requests.filter { $0.path == ExpoEmulatorRules.sendPath && $0.status == 200 }
    }
    /// Tickets issued with status ok so far.
    public var acceptedCount: Int { shared.state.withLock { $0.acceptedCount } }
    public func resetRecords() { shared.state.withLock { $0.records.removeAll() } }
    public var connectionCount: Int { shared.state.withLock { $0.connectionCount } }

    /// Stops listening and closes every connection.
    public func shutdown() async throws {
        let server = lifecycle.withLock { s -> (any Channel)? in
            defer { s.channel = nil }
            return s.channel
        }
        if let server { try? await server.close().get() }
        let channels = shared.state.withLock { Array($0.channels.values) }
        for channel in channels { try? await channel.close().get() }
    }
}
