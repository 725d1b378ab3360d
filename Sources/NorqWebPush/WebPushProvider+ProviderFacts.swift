public import NorqCore

/// What the router and the CLI ask of a provider (one table per fact, owned here).
extension WebPushProvider {
    /// `location` (`WebPushProviderType.messageIDName`).
    public var messageIDName: String { WebPushProviderType().messageIDName }

    /// The push service names the message (`Location`): no request id goes on the wire.
    public var readsRequestID: Bool { false }

    /// The reasons the router keeps as metric labels: the two subscription-gone reasons; a service's own words
    /// for other answers count as `other`, so labels stay bounded.
    public var knownReasons: Set<String> { ["NotFound", "Gone"] }

    /// A push with an RFC 8030 `Topic` replaces an undelivered one with the same topic at the push service, so a
    /// duplicate after an ambiguous failure is harmless (`retry.ambiguous: collapsible`).
    public func collapseID(of request: PreparedRequest) -> String? { request.header("topic") }
}

extension WebPushProviderType {
    /// `location`: a delivered push's id is the push service's message URL (the `Location` answer header).
    public var messageIDName: String { "location" }
}
