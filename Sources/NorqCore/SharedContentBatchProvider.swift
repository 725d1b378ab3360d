/// What the targets of one send share in a batch request, prepared once per send and platform by a
/// ``SharedContentBatchProvider`` (Expo: the message without its `to`). Opaque to the router: only the provider that
/// made it reads `bytes`.
public struct SharedBatchContent: Sendable {
    /// The platform of the tokens it is for (the content's encoding may differ per platform).
    public let platform: Platform
    /// The provider's encoding of the shared part of the request.
    public let bytes: [UInt8]

    public init(platform: Platform, bytes: [UInt8]) {
        self.platform = platform
        self.bytes = bytes
    }
}

/// One target of a batch request on the shared-content path: its token and the content it shares with the others.
public struct SharedBatchTarget: Sendable {
    public let token: PushToken
    public let content: SharedBatchContent

    public init(token: PushToken, content: SharedBatchContent) {
        self.token = token
        self.content = content
    }
}

/// A ``BatchPushProvider`` that can prepare what the targets of one send share once, and write a request for up to
/// ``BatchPushProvider/maxBatchSize`` tokens from it (the per-batch path): the router then makes no
/// ``PreparedRequest`` per target on the first attempt. A target whose first attempt is not delivered gets its own
/// request from ``PushProvider/prepare(_:for:options:)`` and continues on the per-token path (its retries, its
/// outcome), so the two paths must send the same thing for a token. A provider whose requests carry a per-token
/// request id (``PushProvider/readsRequestID``) keeps the per-token path: a shared content has no room for it.
public protocol SharedContentBatchProvider: BatchPushProvider {
    /// The part of every request for `content` to tokens of `platform` that is the same for all of them, or nil when
    /// this content has no shared form (the router prepares each target alone). Throws what
    /// ``PushProvider/prepare(_:for:options:)`` would throw for any token of that platform (the router then takes
    /// the per-token path, where each target gets that error as its outcome). `options.requestID` is nil.
    func prepareShared(_ content: PushContent, platform: Platform,
                       options: SendOptions) throws(NorqError) -> SharedBatchContent?

    /// Whether `token` can be sent with `content` on the per-batch path (Expo: it is an Expo push token). False sends
    /// it the per-token way, where ``PushProvider/prepare(_:for:options:)`` says why it cannot be sent. Cheap.
    func accepts(_ token: PushToken, for content: SharedBatchContent) -> Bool

    /// ``BatchPushProvider/batchKey(for:)`` of the request the provider would prepare for `token`: targets of
    /// different keys never share a request. Cheap and without I/O.
    func batchKey(forToken token: PushToken) -> String?

    /// Sends `targets` (at most ``BatchPushProvider/maxBatchSize``, each accepted by ``accepts(_:for:)``) together,
    /// once, and calls `completion` exactly once with one result per target, in order, on any thread: as
    /// ``BatchPushProvider/startBatchDelivery(_:deadline:completion:)`` does for prepared requests.
    func startSharedBatchDelivery(_ targets: [SharedBatchTarget], deadline: ContinuousClock.Instant,
                            completion: @escaping @Sendable ([Result<DeliveryResponse, NorqError>]) -> Void)
}
