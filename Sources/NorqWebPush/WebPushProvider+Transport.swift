import Logging
import NorqCore

extension WebPushProvider {
    /// The transport a provider made from configuration uses.
    /// Interim until NorqHTTP2 (issue 14) is merged: AsyncHTTPClient negotiating h2 or HTTP/1.1 by ALPN.
    static func makeTransport(configuration: WebPushConfiguration, endpointGuard: WebPushEndpointGuard,
                              logger: Logger) throws(NorqError) -> any WebPushTransport {
        try WebPushHTTP1Transport(configuration: configuration, endpointGuard: endpointGuard, logger: logger,
                                  allowHTTP2: true)
    }
}
