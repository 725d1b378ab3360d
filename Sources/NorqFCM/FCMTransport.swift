import NorqCore

/// One request as the FCM transport sends it.
struct FCMWireRequest: Sendable {
    var method: String
    /// `host` or `host:port`.
    var authority: String
    var path: String
    /// Regular header fields in send order (lowercase names); `authorization` is sent never-indexed.
    var headers: [HTTPHeader]
    var body: RequestBody
}

extension FCMWireRequest {
    init(method: String, authority: String, path: String, headers: [HTTPHeader], body: [UInt8]) {
        self.init(method: method, authority: authority, path: path, headers: headers, body: .bytes(body))
    }
}

/// One answer as received.
struct FCMWireResponse: Sendable {
    var status: Int
    var headers: [HTTPHeader]
    var body: [UInt8]

    func header(_ name: String) -> String? { headers.first(where: { $0.name == name })?.value }
}

/// The small internal interface between the provider and HTTP/2 (one origin per transport).
protocol FCMTransport: Sendable {
    /// Sends once and calls `completion` exactly once, on any thread. Fails with `provider/transport-failed`,
    /// `provider/deadline-exceeded` or `provider/shut-down`, with `possiblyProcessed` set as the transport knows it.
    /// `now`: a read of the clock the caller has just made (the transport's deadline is counted from it, without
    /// another clock read per request).
    func start(_ request: FCMWireRequest, deadline: ContinuousClock.Instant, now: ContinuousClock.Instant,
               completion: @escaping @Sendable (Result<FCMWireResponse, NorqError>) -> Void)
    /// Stops taking requests, waits for those in flight, closes the connections.
    func shutdown() async
    /// Why the last connection attempt failed while no connection is ready, or nil (healthy, or not tried yet).
    var connectFailure: String? { get }
}

extension FCMTransport {
    var connectFailure: String? { nil }
}
