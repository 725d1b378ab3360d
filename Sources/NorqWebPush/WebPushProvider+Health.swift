public import NorqCore

extension WebPushProvider {
    /// Not ready when every push-service origin tried lately could not be reached at its last attempt (no
    /// connection over HTTP/2 nor HTTP/1.1: this process looks cut off); ready as soon as any origin answers, and
    /// before anything was sent. One dead origin among working ones (a subscription naming a service that is gone)
    /// does not make it not ready: see ``WebPushOriginHealth``. The VAPID key pair is checked when the
    /// configuration loads (a provider with a bad key never starts).
    public func health() -> ProviderHealth {
        if let down = transport.unreachableOrigins {
            let tried = down.origins == 1 ? "the only push service tried" : "all \(down.origins) push services tried"
            return .notReady("Web Push provider \(name) cannot connect to \(tried); last \(down.lastOrigin): \(down.reason)")
        }
        return .ready
    }
}
