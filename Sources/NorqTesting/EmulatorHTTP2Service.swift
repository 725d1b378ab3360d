public import NIOCore

/// One complete request received on a stream of an emulator's HTTP/2 connection, as
/// ``EmulatorHTTP2Handler`` hands it to its ``EmulatorHTTP2Service``.
public struct EmulatorHTTP2Request: Sendable {
    public var method: String
    public var path: String
    /// The regular headers in the order received (no pseudo-headers).
    public var headers: [(name: String, value: String)]
    /// The body as received (not inflated), empty when the request had none.
    public var body: ByteBuffer

    public init(method: String, path: String, headers: [(name: String, value: String)], body: ByteBuffer) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
    }

    /// The first value of the header `name` (lowercase, as HTTP/2 sends names).
    public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }

    /// The body copied into an array.
    public var bodyBytes: [UInt8] { Array(body.readableBytesView) }
}

/// What an emulator's answer is made of on the wire: a status, headers and a body (the service's answer type may
/// carry more, for its records).
public protocol EmulatorHTTP2Answer: Sendable {
    var status: Int { get }
    var headers: [(String, String)] { get }
    var body: [UInt8] { get }
}

/// A service's decision about one complete request.
public enum EmulatorHTTP2Decision<Answer: EmulatorHTTP2Answer>: Sendable {
    /// Answer after `latency` (zero: at once, flushed at the end of the read batch).
    case answer(Answer, latency: Duration)
    /// Never answer: the stream stays open until the client resets it or the connection closes.
    case silent
}

/// The per-stream fault switches an emulator reads when a stream opens.
public struct EmulatorStreamFaults: Sendable {
    /// Sends GOAWAY (last-stream-id: that stream) when the connection opens its Nth stream.
    public var goAwayAfterStreams: Int?
    /// Drops the connection (no GOAWAY) when it opens its Nth stream.
    public var dropConnectionAfterStreams: Int?

    public init(goAwayAfterStreams: Int? = nil, dropConnectionAfterStreams: Int? = nil) {
        self.goAwayAfterStreams = goAwayAfterStreams
        self.dropConnectionAfterStreams = dropConnectionAfterStreams
    }
}

/// The request/answer half of an emulator served by ``EmulatorHTTP2Handler``, which owns the HTTP/2 half
/// (streams, the connection window, GOAWAY and drop faults, latency). Called on the connection's event loop, from
/// several connections at once: a service locks its own state.
public protocol EmulatorHTTP2Service: Sendable {
    associatedtype Answer: EmulatorHTTP2Answer

    /// Fault switches for the stream being opened (read once per stream).
    var streamFaults: EmulatorStreamFaults { get }

    /// The largest request body kept per stream; a larger one is answered with ``payloadTooLarge()``.
    var maxRequestBodyBytes: Int { get }

    /// The answer to a request whose body passed ``maxRequestBodyBytes``.
    func payloadTooLarge() -> Answer

    /// Decides about one complete request.
    func handle(_ request: EmulatorHTTP2Request) -> EmulatorHTTP2Decision<Answer>

    /// A connection opened: its id for ``record(_:answer:answered:connectionID:)``.
    func connectionOpened(_ channel: any Channel) -> Int

    /// The connection of `id` closed.
    func connectionClosed(_ id: Int)

    /// Whether ``record(_:answer:answered:connectionID:)`` wants the requests (false: they are not built for it).
    var recordsRequests: Bool { get }

    /// One request is done with: answered (`answered`), or ended unanswered (reset by the client, the connection
    /// closed, a delayed answer the connection did not live to send; `answer` is then the one decided, if any).
    func record(_ request: EmulatorHTTP2Request, answer: Answer?, answered: Bool, connectionID: Int)
}

extension EmulatorHTTP2Service {
    public var streamFaults: EmulatorStreamFaults { EmulatorStreamFaults() }
    /// 64 KiB: APNs and FCM bodies are a few KiB.
    public var maxRequestBodyBytes: Int { 64 * 1024 }
    public func connectionOpened(_ channel: any Channel) -> Int { 0 }
    public func connectionClosed(_ id: Int) {}
    public var recordsRequests: Bool { false }
    public func record(_ request: EmulatorHTTP2Request, answer: Answer?, answered: Bool, connectionID: Int) {}
}
