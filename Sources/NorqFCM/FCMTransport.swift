import NorqCore
import NorqHTTP2

/// One request as the FCM transport sends it.
struct FCMWireRequest: Sendable {
    var method: String
    /// `host` or `host:port`.
    var authority: String
    var path: String
    /// Regular header fields in send order (lowercase names); `authorization` is sent never-indexed.
    var headers: [HTTPHeader]
    var body: RequestBody
    /// This request's own time, within the send's deadline (NorqHTTP2's bridge applies the rule).
    var timeout: Duration?
}

extension FCMWireRequest {
    init(method: String, authority: String, path: String, headers: [HTTPHeader], body: [UInt8], timeout: Duration? = nil) {
        self.init(method: method, authority: authority, path: path, headers: headers, body: .bytes(body), timeout: timeout)
    }
}

/// The small internal interface between the provider and HTTP/2 (one origin per transport). Answers are NorqHTTP2's
/// own `HTTP2Response` (status, header fields, body), read by the provider.
protocol FCMTransport: Sendable {
    /// Sends once, within `deadline` and the request's own `timeout`, and calls `completion` exactly once, on any
    /// thread. Fails with `provider/transport-failed`, `provider/deadline-exceeded` or `provider/shut-down`, with
    /// `possiblyProcessed` set as the transport knows it. `now`: a read of the clock the caller has just made (the
    /// request's deadline is counted from it, without another clock read per request).
    func execute(_ request: FCMWireRequest, deadline: ContinuousClock.Instant, now: ContinuousClock.Instant,
                 completion: @escaping @Sendable (Result<HTTP2Response, NorqError>) -> Void)
    /// Stops taking requests, waits for those in flight, closes the connections.
    func shutdown() async
    /// Why the last connection attempt failed while no connection is ready, or nil (healthy, or not tried yet).
    var connectFailure: String? { get }
}

extension FCMTransport {
    var connectFailure: String? { nil }
}
