public import NorqCore

/// The server-side request forgery guard. A subscription's endpoint comes from the subscriber, so a hostile
/// client can register `https://169.254.169.254/…` or an internal host; by default only https endpoints on
/// globally routable addresses are allowed.
///
/// Two checks, both pure: ``check(_:)`` on the endpoint before anything is sent (scheme, `allowedHosts`, an IP
/// literal host), and ``allows(address:)`` on the *resolved* address of every connection (the transport's address
/// filter; DNS rebinding cannot bypass it). Redirects are never followed (a 3xx is a permanent answer).
public struct WebPushEndpointGuard: Sendable, Hashable {
    /// Host suffixes endpoints must match (`fcm.googleapis.com` allows that host and its subdomains); nil: any.
    public var allowedHosts: [String]?
    /// Allows every address class (tests, self-hosted push servers on private networks).
    public var allowPrivateEndpoints: Bool

    public init(allowedHosts: [String]? = nil, allowPrivateEndpoints: Bool = false) {
        self.allowedHosts = allowedHosts
        self.allowPrivateEndpoints = allowPrivateEndpoints
    }

    /// Refuses (`webpush/endpoint-not-allowed`) an endpoint whose host is not in `allowedHosts`, or whose host
    /// is an IP literal of a non-global class (unless `allowPrivateEndpoints`).
    public func check(_ endpoint: WebPushEndpoint) throws(NorqError) {
        if let allowedHosts, !Self.matches(host: endpoint.host, suffixes: allowedHosts) {
            throw NorqError(.webPushEndpointNotAllowed,
                            "web push endpoint host \(endpoint.host.prefix(80)) is not in allowedHosts")
        }
        if let address = IPAddress(parsing: endpoint.host), let refusal = refusal(for: address) {
            throw NorqError(.webPushEndpointNotAllowed, "web push endpoint host \(endpoint.host) is \(refusal)",
                            hint: "set allowPrivateEndpoints: true for a self-hosted push service on a private network")
        }
    }

    /// Whether a connection may go to `address` (the resolved address, checked by the transport before connecting).
    public func allows(address: IPAddress) -> Bool { refusal(for: address) == nil }

    /// Why `address` is refused (`a loopback address`), or nil when it is allowed.
    public func refusal(for address: IPAddress) -> String? {
        if allowPrivateEndpoints { return nil }
        let kind = address.classification
        return kind == .global ? nil : "a \(kind) address"
    }

    /// `host` equals a suffix or ends with `.` + suffix (label boundary: `evilfcm.googleapis.com.attacker` and
    /// `notfcm.googleapis.com` do not match `fcm.googleapis.com`).
    public static func matches(host: String, suffixes: [String]) -> Bool {
        let host = host.lowercased()
        return suffixes.contains { suffix in host == suffix || host.hasSuffix("." + suffix) }
    }
}
