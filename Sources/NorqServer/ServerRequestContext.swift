public import Hummingbird
import NIOCore

/// The request context of `norq serve`: Hummingbird's core storage plus the API key the request was
/// authenticated with (set by `NorqServer.authorize`).
public struct ServerRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The caller's key name (nil before authentication, or with `--no-auth`).
    package var keyName: String?
    /// The client's address (for limiting failed authentications per address).
    let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        keyName = nil
        remoteAddress = source.channel.remoteAddress
    }
}
