import AsyncHTTPClient
package import Logging
package import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
package import NorqCore
package import NorqHTTP2
import Synchronization

/// Web Push to push services that speak HTTP/1.1 only, on AsyncHTTPClient (see providers/webpush.md for why).
///
/// The SSRF guard needs the address actually connected to, which AsyncHTTPClient does not expose; so each origin
/// gets its own client whose `dnsOverride` pins the host to an address this transport resolved and checked
/// (every address the name resolves to must be allowed). After `pinLifetime` the name is resolved and checked
/// again: the same address keeps the client, a new one gets a new client (the old one is retired and shut down once
/// its requests are over), so DNS changes are followed and every address is checked. Redirects are disallowed;
/// response bodies are bounded (64 KiB); at most `maxOrigins` live clients (the least recently used is retired
/// beyond it) and `maxOrigins` retired ones.
package final class WebPushHTTP1Transport: WebPushTransport {
    private let configuration: WebPushConfiguration
    private let endpointGuard: WebPushEndpointGuard
    private let tls: TLSConfiguration
    private let group: any EventLoopGroup
    private let logger: Logger
    private let pinLifetime: Duration
    private let httpVersion: HTTPClient.Configuration.HTTPVersion

    private struct Pinned {
        var client: HTTPClient
        var address: IPAddress
        var pinnedAt: ContinuousClock.Instant
        var lastUsed: UInt64
    }
    private struct State {
        var clients: [String: Pinned] = [:]
        /// Clients replaced (the host's address changed) or evicted, with when. Each is shut down once no request
        /// started on it can still be running (`requestTimeout` + 5 s later), at the latest with the transport;
        /// beyond `maxOrigins` of them the oldest is shut down at once (cancelling what it still runs).
        var retired: [(client: HTTPClient, since: ContinuousClock.Instant)] = []
        var tick: UInt64 = 0
        var shutDown = false
    }
    private let state = Mutex(State())

    package init(configuration: WebPushConfiguration, endpointGuard: WebPushEndpointGuard, logger: Logger,
                 pinLifetime: Duration = .seconds(60), allowHTTP2: Bool = false,
                 group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) throws(NorqError) {
        self.httpVersion = allowHTTP2 ? .automatic : .http1Only
        self.configuration = configuration
        self.endpointGuard = endpointGuard
        self.logger = logger
        self.group = group
        self.pinLifetime = pinLifetime
        self.tls = try WebPushTLS.clientConfiguration(configuration)
    }

    package func start(_ request: WebPushWireRequest, deadline: ContinuousClock.Instant,
                       completion: @escaping @Sendable (Result<HTTP2Response, NorqError>) -> Void) {
        let endpoint = request.endpoint
        let eventLoop = group.next()
        // The same rule as NorqHTTP2's bridge: the request's own timeout within the send's deadline.
        let nioDeadline = HTTP2Request.deadline(within: deadline, timeout: request.timeout)
        if let client = currentClient(for: endpoint) {
            execute(request, client: client, deadline: nioDeadline, completion: completion)
            return
        }
        let guardCopy = endpointGuard
        WebPushResolver.resolve(endpoint.host, on: eventLoop).whenComplete { result in
            guard case .success(let addresses?) = result, let first = addresses.first else {
                completion(.failure(NorqError(.transportFailed, "web push host \(endpoint.host.prefix(80)) does not resolve")))
                return
            }
            if let refused = addresses.first(where: { !guardCopy.allows(address: $0) }) {
                completion(.failure(NorqError(
                    .webPushEndpointNotAllowed,
                    "web push endpoint host \(endpoint.host.prefix(80)) resolves to \(refused), \(guardCopy.refusal(for: refused) ?? "refused")")))
                return
            }
            guard let client = self.pin(endpoint, to: first) else {
                completion(.failure(NorqError(.providerShutDown, "the web push provider is shut down")))
                return
            }
            self.execute(request, client: client, deadline: nioDeadline, completion: completion)
        }
    }

    /// The origin's client while its pin is fresh.
    private func currentClient(for endpoint: WebPushEndpoint) -> HTTPClient? {
        let now = ContinuousClock.now
        return state.withLock { s -> HTTPClient? in
            guard !s.shutDown, let pinned = s.clients[endpoint.origin], pinned.pinnedAt.duration(to: now) < pinLifetime else {
                return nil
            }
            s.tick += 1
            s.clients[endpoint.origin]?.lastUsed = s.tick
            return pinned.client
        }
    }

    /// A client pinned to `address` for the origin (reusing the current one when it is pinned there already).
    private func pin(_ endpoint: WebPushEndpoint, to address: IPAddress) -> HTTPClient? {
        state.withLock { s -> HTTPClient? in
            guard !s.shutDown else { return nil }
            s.tick += 1
            if var pinned = s.clients[endpoint.origin], pinned.address == address {
                pinned.pinnedAt = .now
                pinned.lastUsed = s.tick
                s.clients[endpoint.origin] = pinned
                return pinned.client
            }
            var clientConfiguration = HTTPClient.Configuration(
                tlsConfiguration: tls, redirectConfiguration: .disallow,
                timeout: .init(connect: min(configuration.requestTimeout, .seconds(10)).timeAmount),
                connectionPool: .init(idleTimeout: .seconds(60)), decompression: .disabled)
            clientConfiguration.httpVersion = httpVersion
            clientConfiguration.dnsOverride = [endpoint.host: address.description]
            let client = HTTPClient(eventLoopGroupProvider: .shared(group), configuration: clientConfiguration,
                                    backgroundActivityLogger: logger)
            let now = ContinuousClock.Instant.now
            if let old = s.clients.removeValue(forKey: endpoint.origin) { s.retired.append((old.client, now)) }
            if s.clients.count >= configuration.maxOrigins,
               let oldest = s.clients.min(by: { $0.value.lastUsed < $1.value.lastUsed }) {
                s.clients.removeValue(forKey: oldest.key)
                s.retired.append((oldest.value.client, now))
            }
            // Sweep: shut down (callback form, no task) what can no longer have a request in flight.
            let drained = configuration.requestTimeout + .seconds(5)
            var keep: [(client: HTTPClient, since: ContinuousClock.Instant)] = []
            for entry in s.retired {
                if entry.since.duration(to: now) >= drained { entry.client.shutdown { _ in } } else { keep.append(entry) }
            }
            while keep.count > configuration.maxOrigins { keep.removeFirst().client.shutdown { _ in } }
            s.retired = keep
            s.clients[endpoint.origin] = Pinned(client: client, address: address, pinnedAt: .now, lastUsed: s.tick)
            return client
        }
    }

    private func execute(_ request: WebPushWireRequest, client: HTTPClient, deadline: NIODeadline,
                         completion: @escaping @Sendable (Result<HTTP2Response, NorqError>) -> Void) {
        let endpoint = request.endpoint
        var headers = HTTPHeaders()
        for header in request.headers { headers.add(name: header.name, value: header.value) }
        let httpRequest: HTTPClient.Request
        do {
            httpRequest = try HTTPClient.Request(url: "https://\(endpoint.authority)\(endpoint.path)",
                                                 method: .POST, headers: headers, body: .bytes(request.body))
        } catch {
            completion(.failure(NorqError(.webPushInvalidEndpoint, "web push endpoint \(endpoint.host.prefix(80)) is not a valid URL")))
            return
        }
        client.execute(request: httpRequest, delegate: ResponseAccumulator(request: httpRequest, maxBodySize: 65_536),
                       deadline: deadline).futureResult.whenComplete { result in
            switch result {
            case .success(let response):
                completion(.success(HTTP2Response(status: Int(response.status.code),
                                                  headers: response.headers.map { ($0.name.lowercased(), $0.value) },
                                                  body: response.body ?? ByteBuffer())))
            case .failure(let error):
                completion(.failure(Self.norqError(error, host: endpoint.host)))
            }
        }
    }

    /// Maps AsyncHTTPClient's errors. It does not say whether the request was written, so only failures that
    /// happen before any byte of it can be sent (connecting, TLS handshake, shut down) count as not processed.
    static func norqError(_ error: any Error, host: String) -> NorqError {
        let text = "web push (HTTP/1.1) to \(host.prefix(80)): \(String(describing: error).prefix(200))"
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout:
                return NorqError(.deadlineExceeded, text, possiblyProcessed: true)
            case .alreadyShutdown:
                return NorqError(.providerShutDown, text)
            case .connectTimeout, .tlsHandshakeTimeout, .getConnectionFromPoolTimeout:
                return NorqError(.transportFailed, text, possiblyProcessed: false)
            default:
                return NorqError(.transportFailed, text, possiblyProcessed: true)
            }
        }
        if error is NIOConnectionError || error is NIOSSLError || error is IOError {
            return NorqError(.transportFailed, text, possiblyProcessed: false)
        }
        return NorqError(.transportFailed, text, possiblyProcessed: true)
    }

    /// Origins with a live client, and retired clients not yet shut down (for tests of the bounds).
    package var clientCounts: (live: Int, retired: Int) { state.withLock { ($0.clients.count, $0.retired.count) } }

    package func shutdown() async {
        let clients = state.withLock { s -> [HTTPClient] in
            s.shutDown = true
            defer { s.clients.removeAll(); s.retired.removeAll() }
            return s.clients.values.map(\.client) + s.retired.map(\.client)
        }
        for client in clients { try? await client.shutdown() }
    }
}
