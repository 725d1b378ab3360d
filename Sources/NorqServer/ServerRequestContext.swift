public import Hummingbird

/// The request context of `norq serve`: Hummingbird's core storage plus the API key the request was
/// authenticated with (set by `NorqServer.authorize`).
public struct ServerRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The caller's key name (nil before authentication, or with `--no-auth`).
    package var keyName: String?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        keyName = nil
    }
}
