package import NIOCore
package import NIOSSL
package import NIOHPACK

// The API of NorqHTTP2, for the providers of this package (APNs, FCM, Web Push). Everything is `package`:
// library users never see it.
//
// A caller builds an ``HTTP2ConnectionPool`` per origin from an ``HTTP2ClientConfiguration`` and sends an
// ``HTTP2Request`` (head, body, its own timeout) within the send's deadline with the one bridge,
// ``HTTP2ConnectionPool/execute(_:deadline:now:completion:)`` (callback, no task per request) or its async form.
// The request's timeout within the send's deadline is applied there, once. Each request ends exactly once, with
// an ``HTTP2Response`` (any status: classifying it is the provider's business) or an ``HTTP2ClientError`` whose
// ``HTTP2ClientError/possiblyProcessed`` says whether the server may have acted on it:
//
// - `false`: the request was never written, or the server said it was not processed (RST_STREAM REFUSED_STREAM,
//   a stream id above a GOAWAY's last-stream-id), or the connection could not be made. Sending it again cannot
//   deliver it twice.
// - `true`: it was written and no final answer came (connection lost, another RST_STREAM code, the deadline
//   passed after the write, a malformed or oversized answer). Sending it again may deliver it twice.
//
// A request whose header fields break RFC 9113 §8.2.1 (``HTTP2FieldRules``: a CR, LF or NUL in a value, whitespace at
// either end, a name that is not a lowercase token) fails with ``HTTP2ClientError/Kind/invalidRequest`` before any
// connection is touched.
//
// Requests above a GOAWAY's last-stream-id are sent again by the pool at most once (requests only queued on a
// connection that closed: at most 3 times; a REFUSED_STREAM never), then handed back as such a failure, marked
// ``HTTP2ClientError/isUnprocessed``: the caller re-queues it (the router: without spending the retry budget, with
// backoff when the same request keeps being refused, until its deadline).

/// How a request header field enters the HPACK dynamic table (RFC 7541 6.2).
package enum HTTP2HeaderIndexing: Sendable, Hashable {
    /// Enters the table: for values repeated on every request (topic, content type, a bearer token).
    case indexed
    /// A literal that leaves the table alone: for values that change per request.
    case notIndexed
    /// A literal that intermediaries must never index either: for secrets and per-request ids.
    case neverIndexed
}

/// One request header field. The name must be lowercase (RFC 9113 8.2.1); it is written as given.
package struct HTTP2HeaderField: Sendable, Hashable {
    package var name: String
    package var value: String
    package var indexing: HTTP2HeaderIndexing

    package init(_ name: String, _ value: String, indexing: HTTP2HeaderIndexing = .indexed) {
        self.name = name
        self.value = value
        self.indexing = indexing
    }
}

/// The header block of one request: the pseudo-header fields, then `fields` in order.
package struct HTTP2RequestHead: Sendable, Hashable {
    package var method: String
    package var scheme: String
    /// `:authority`: the host, with `:port` when it is not the scheme's default.
    package var authority: String
    package var path: String
    package var fields: [HTTP2HeaderField]

    package init(method: String = "POST", scheme: String = "https", authority: String, path: String,
                 fields: [HTTP2HeaderField] = []) {
        self.method = method
        self.scheme = scheme
        self.authority = authority
        self.path = path
        self.fields = fields
    }
}

/// One request as a provider hands it to the bridge (``HTTP2ConnectionPool/execute(_:deadline:now:completion:)``):
/// what is the provider's (authority, path, header fields, body) and how long this one request may take.
package struct HTTP2Request: Sendable {
    package var head: HTTP2RequestHead
    package var body: HTTP2RequestBody
    /// The most this one request may take; the send's deadline still applies (the earlier of the two wins).
    /// Nil: the send's deadline alone.
    package var timeout: Duration?

    package init(head: HTTP2RequestHead, body: HTTP2RequestBody, timeout: Duration? = nil) {
        self.head = head
        self.body = body
        self.timeout = timeout
    }

    /// The one rule for a request's time: its ``timeout`` within the send's `deadline`, whichever ends first, as
    /// the NIO deadline the connection enforces. `now`: a read of `ContinuousClock` the caller has just made.
    /// Used by the bridge, and by a transport outside NorqHTTP2 that sends the same requests another way (Web
    /// Push over HTTP/1.1), so that both count time alike.
    package func deadline(within deadline: ContinuousClock.Instant, now: ContinuousClock.Instant = .now) -> NIODeadline {
        Self.deadline(within: deadline, timeout: timeout, now: now)
    }

    /// ``deadline(within:now:)`` for a timeout without a request.
    package static func deadline(within deadline: ContinuousClock.Instant, timeout: Duration?,
                                 now: ContinuousClock.Instant = .now) -> NIODeadline {
        NIODeadline.now() + time(within: deadline, timeout: timeout, now: now).timeAmount
    }

    /// The time a request has from `now`: `timeout` or what is left of `deadline`, whichever is shorter; zero when
    /// the deadline has passed.
    package static func time(within deadline: ContinuousClock.Instant, timeout: Duration?,
                             now: ContinuousClock.Instant) -> Duration {
        var remaining = now.duration(to: deadline)
        if let timeout, timeout < remaining { remaining = timeout }
        return max(remaining, .zero)
    }
}

/// A final response (1xx interim responses are skipped). Trailers, if any, are appended to its fields.
package struct HTTP2Response: Sendable {
    package var status: Int
    /// The header fields as decoded (pseudo-header fields such as `:status` included), kept as HPACK decoded them:
    /// no copy per response. ``headers`` and ``forEachField(_:)`` skip the pseudo-header fields.
    package var fields: HPACKHeaders
    /// At most ``HTTP2ClientConfiguration/maxResponseBodyBytes``.
    package var body: ByteBuffer
    /// Equal for two responses whose `fields` are the same decoded header block (a server repeating its answer's
    /// headers); never equal for different ones. 0: unknown (made by hand, or trailers appended). What a caller
    /// makes of `fields` (its own header type) may be cached under it.
    package var fieldsID: UInt64 = 0

    package init(status: Int, fields: HPACKHeaders, body: ByteBuffer = ByteBuffer()) {
        self.status = status
        self.fields = fields
        self.body = body
    }

    package init(status: Int, headers: [(name: String, value: String)] = [], body: ByteBuffer = ByteBuffer()) {
        self.init(status: status, fields: HPACKHeaders(headers.map { ($0.name, $0.value) }), body: body)
    }

    /// Regular header fields in the order received (no pseudo-header fields): a new array per call.
    package var headers: [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(fields.count)
        forEachField { headers.append(($0, $1)) }
        return headers
    }

    /// Calls `body` with each regular header field (no pseudo-header fields), in order, without copying them.
    package func forEachField(_ body: (_ name: String, _ value: String) throws -> Void) rethrows {
        // The first byte, not `hasPrefix(":")`: a String comparison per field and answer showed in profiles.
        for field in fields where field.name.utf8.first != UInt8(ascii: ":") { try body(field.name, field.value) }
    }

    /// Regular header fields in the order received, each made by `make` (a provider's own header type): one array,
    /// no intermediate one.
    package func headers<Header>(_ make: (_ name: String, _ value: String) -> Header) -> [Header] {
        var headers: [Header] = []
        headers.reserveCapacity(fields.count)
        forEachField { headers.append(make($0, $1)) }
        return headers
    }

    /// The body's bytes, copied with one memcpy (`Array(readableBytesView)` goes through the generic collection copy).
    package var bodyBytes: [UInt8] {
        body.readableBytes == 0 ? [] : body.getBytes(at: body.readerIndex, length: body.readableBytes) ?? []
    }

    /// The first value of a header field (names are lowercase on the wire).
    package func header(_ name: String) -> String? {
        for field in fields where field.name == name { return field.value }
        return nil
    }
}

/// Why a request failed, and whether the server may have processed it.
package struct HTTP2ClientError: Error, Sendable, CustomStringConvertible {
    /// An open set of failure kinds.
    package struct Kind: Sendable, Hashable, CustomStringConvertible {
        package var name: String
        package init(_ name: String) { self.name = name }
        package var description: String { name }

        /// No connection could be made (DNS, TCP, proxy, TLS, no SETTINGS in time), or
        /// ``HTTP2ClientConfiguration/connectionRetryLimit`` consecutive attempts failed.
        package static let connectFailed = Kind("connect-failed")
        /// The connection closed (or broke the protocol) before the answer.
        package static let connectionLost = Kind("connection-lost")
        /// The server reset the stream (RST_STREAM); REFUSED_STREAM is `possiblyProcessed == false`.
        package static let streamReset = Kind("stream-reset")
        /// The server went away (GOAWAY) without processing the stream.
        package static let goAway = Kind("goaway")
        /// The request's deadline passed.
        package static let deadlineExceeded = Kind("deadline-exceeded")
        /// The pool is shut down.
        package static let shutDown = Kind("shut-down")
        /// The answer broke HTTP/2 (a stream error: no `:status`, a zero WINDOW_UPDATE, a window overflow...).
        package static let protocolError = Kind("protocol-error")
        /// The answer's header list or body exceeded the configured bounds.
        package static let responseTooLarge = Kind("response-too-large")
        /// ``HTTP2ClientConfiguration/addressFilter`` refused the resolved address.
        package static let addressNotAllowed = Kind("address-not-allowed")
        /// A header field of the request breaks RFC 9113 §8.2.1 (``HTTP2FieldRules``): failed before any connection
        /// was touched; sending it again cannot help.
        package static let invalidRequest = Kind("invalid-request")
    }

    package var kind: Kind
    /// False when the server did not process the request (never written, REFUSED_STREAM, above a GOAWAY's
    /// last-stream-id, no connection); true when it was written and no final answer came.
    package var possiblyProcessed: Bool
    /// Log-safe: never a header value.
    package var message: String

    package init(_ kind: Kind, possiblyProcessed: Bool, _ message: String) {
        self.kind = kind
        self.possiblyProcessed = possiblyProcessed
        self.message = message
    }

    package var description: String { "\(kind): \(message)" }

    /// True when the server refused the request or it never left on a connection that was made: RST_STREAM
    /// REFUSED_STREAM, a stream above a GOAWAY's last-stream-id, a request queued on a connection that closed or
    /// went away before writing it. The caller may send it again without spending a retry budget (a re-queue,
    /// bounded by its deadline). Not a connect failure, a deadline, a shutdown or an invalid request: those were
    /// not processed either, but sending them again at once would not help.
    package var isUnprocessed: Bool {
        !possiblyProcessed && (kind == .goAway || kind == .streamReset || kind == .connectionLost)
    }
}

/// An HTTP CONNECT proxy (RFC 9110 9.3.6), with optional basic authentication.
package struct HTTP2Proxy: Sendable, Hashable, CustomStringConvertible {
    package var host: String
    package var port: Int
    package var username: String?
    package var password: String?

    package init(host: String, port: Int, username: String? = nil, password: String? = nil) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
    }

    /// Never prints the password.
    package var description: String {
        "http://\(username.map { "\($0):<redacted>@" } ?? "")\(host):\(port)"
    }
}

/// Hooks for swift-metrics or logs, called on event loops. The names are the provider's to choose.
package protocol HTTP2ClientObserver: Sendable {
    func connectionOpened()
    func connectionClosed()
    /// Counts since the last call, reported at most once per event-loop read or write batch.
    func streams(opened: Int, completed: Int, requeued: Int, cancelled: Int)
}

/// Lets the caller group the completions of one read (e.g. to wake a consumer once per batch).
package struct HTTP2CompletionBatching: Sendable {
    package var begin: @Sendable () -> Void
    package var end: @Sendable () -> Void
    package init(begin: @escaping @Sendable () -> Void, end: @escaping @Sendable () -> Void) {
        self.begin = begin
        self.end = end
    }
}

/// The settings of one pool (one origin). Every bound is documented in providers/http2.md.
package struct HTTP2ClientConfiguration: Sendable {
    package var host: String
    package var port: Int
    /// TLS of the connections; the client sets ALPN `h2` and the server name (SNI) of `host`.
    package var tls: TLSConfiguration
    /// Connections per pool, opened on demand. At least 1.
    package var connections: Int
    /// The most streams this client runs on one connection; the server's SETTINGS_MAX_CONCURRENT_STREAMS applies too.
    package var maxConcurrentStreams: Int
    /// TCP connect + proxy tunnel + TLS handshake + the server's first SETTINGS, exactly (not rounded).
    package var connectTimeout: Duration
    /// A PING after this long without a frame from the server; a PING unanswered for another interval closes
    /// the connection. Nil: no PING.
    package var pingInterval: Duration?
    /// A connection without streams for this long is closed (GOAWAY NO_ERROR). Nil: kept open.
    package var idleTimeout: Duration?
    /// After this many consecutive failed connection attempts, the requests waiting for a connection fail
    /// (`.connectFailed`, not processed) and the pool stops trying until the next request. Nil: requests wait for
    /// a connection until their deadline while attempts go on with backoff. Default 1.
    package var connectionRetryLimit: Int?
    /// An HTTP CONNECT proxy to tunnel through.
    package var proxy: HTTP2Proxy?
    /// Checked on the resolved address of every connection (the proxy's when there is one) before connecting; a
    /// refusal fails the waiting requests with `.addressNotAllowed`, not processed.
    package var addressFilter: (@Sendable (SocketAddress) -> Bool)?
    /// The largest response body kept; a longer one fails its stream with `.responseTooLarge`. Default 64 KiB.
    package var maxResponseBodyBytes: Int
    /// SETTINGS_MAX_HEADER_LIST_SIZE announced to the server (RFC 9113 6.5.2). A larger response header list
    /// fails that one stream (`.responseTooLarge`); a header block (HEADERS + CONTINUATION) beyond 16 times this
    /// closes the connection (ENHANCE_YOUR_CALM). Default 16 KiB.
    package var maxHeaderListSize: Int
    /// Until the first complete answer on a connection, run one stream only, for at most this long (a server
    /// that rejects the credentials closes the connection after its first answer). Nil: no warm-up.
    package var warmUp: Duration?
    package var observer: (any HTTP2ClientObserver)?
    package var completionBatching: HTTP2CompletionBatching?

    package init(host: String, port: Int = 443, tls: TLSConfiguration = .makeClientConfiguration(),
                 connections: Int = 1, maxConcurrentStreams: Int = 1000, connectTimeout: Duration = .seconds(10),
                 pingInterval: Duration? = .seconds(60), idleTimeout: Duration? = nil,
                 connectionRetryLimit: Int? = 1, proxy: HTTP2Proxy? = nil,
                 addressFilter: (@Sendable (SocketAddress) -> Bool)? = nil, maxResponseBodyBytes: Int = 65_536,
                 maxHeaderListSize: Int = 16_384, warmUp: Duration? = nil,
                 observer: (any HTTP2ClientObserver)? = nil, completionBatching: HTTP2CompletionBatching? = nil) {
        self.host = host
        self.port = port
        self.tls = tls
        self.connections = connections
        self.maxConcurrentStreams = maxConcurrentStreams
        self.connectTimeout = connectTimeout
        self.pingInterval = pingInterval
        self.idleTimeout = idleTimeout
        self.connectionRetryLimit = connectionRetryLimit
        self.proxy = proxy
        self.addressFilter = addressFilter
        self.maxResponseBodyBytes = maxResponseBodyBytes
        self.maxHeaderListSize = maxHeaderListSize
        self.warmUp = warmUp
        self.observer = observer
        self.completionBatching = completionBatching
    }

    /// `:authority` for requests to this origin: `host`, with `:port` unless it is 443.
    package var authority: String { port == 443 ? host : "\(host):\(port)" }
}

extension Duration {
    /// As a NIO `TimeAmount`, to the nanosecond.
    package var timeAmount: TimeAmount {
        let (seconds, attoseconds) = components
        let nanos = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if nanos.overflow { return seconds < 0 ? .nanoseconds(.min) : .nanoseconds(.max) }
        return .nanoseconds(nanos.partialValue &+ attoseconds / 1_000_000_000)
    }
}
