import Logging
import NorqCore

extension WebPushProvider {
    /// The transport a provider made from configuration uses: HTTP/2 on NorqHTTP2, falling back to HTTP/1.1
    /// (AsyncHTTPClient) for services that do not speak HTTP/2.
    static func makeTransport(configuration: WebPushConfiguration, endpointGuard: WebPushEndpointGuard,
                              logger: Logger) throws(NorqError) -> any WebPushTransport {
        WebPushFallbackTransport(
            http2: try WebPushHTTP2Transport(configuration: configuration, endpointGuard: endpointGuard, logger: logger),
            http1: try WebPushHTTP1Transport(configuration: configuration, endpointGuard: endpointGuard, logger: logger),
            maxOrigins: configuration.maxOrigins)
    }
}
