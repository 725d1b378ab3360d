/// A provider whose service takes many targets in one request (Expo: up to 100 recipients). The router groups the
/// prepared requests of such a provider (see `NotificationRouter`'s batching) by provider instance and by
/// ``batchKey(for:)``, sends each group with ``startBatchDelivery(_:deadline:completion:)``, and still reports one
/// outcome per target, retrying only the targets whose own result asks for it.
///
/// A provider whose ``maxBatchSize`` is 1 (or that does not conform) is delivered one request per target, on the
/// router's per-token path.
public protocol BatchPushProvider: PushProvider {
    /// The most targets one request may carry (Expo: 100). The router never groups more; 1 turns batching off.
    var maxBatchSize: Int { get }

    /// How long the router may hold a prepared target back to fill a batch (a few milliseconds), never past the
    /// target's deadline.
    var batchLinger: Duration { get }

    /// The key of the group `request` may share a request with (Expo: the token's project when known), or nil for
    /// the default group. Targets of different keys never share a request. Cheap and without I/O.
    func batchKey(for request: PreparedRequest) -> String?

    /// Sends `requests` (each prepared by ``PushProvider/prepare(_:for:options:)`` for one target, at most
    /// ``maxBatchSize``) together, once (the router owns retries), and calls `completion` exactly once with one
    /// result per request, in the order of `requests`, on any thread. A failure of the whole request (transport,
    /// deadline) is that failure for every request; a provider that must split the group (Expo's mixed projects)
    /// does so inside this call.
    func startBatchDelivery(_ requests: [PreparedRequest], deadline: ContinuousClock.Instant,
                            completion: @escaping @Sendable ([Result<DeliveryResponse, NorqError>]) -> Void)
}

extension BatchPushProvider {
    public var batchLinger: Duration { .milliseconds(2) }

    public func batchKey(for request: PreparedRequest) -> String? { nil }

    /// `startBatchDelivery` awaited.
    public func deliverBatch(_ requests: [PreparedRequest],
                             deadline: ContinuousClock.Instant) async -> [Result<DeliveryResponse, NorqError>] {
        await withCheckedContinuation { continuation in
            startBatchDelivery(requests, deadline: deadline) { continuation.resume(returning: $0) }
        }
    }
}

/// Splits `items` into consecutive chunks of at most `size` elements (`size` >= 1). Pure.
public func chunked<Element>(_ items: [Element], size: Int) -> [ArraySlice<Element>] {
    precondition(size >= 1, "chunk size must be at least 1")
    var chunks: [ArraySlice<Element>] = []
    chunks.reserveCapacity((items.count + size - 1) / size)
    var start = 0
    while start < items.count {
        let end = min(start + size, items.count)
        chunks.append(items[start..<end])
        start = end
    }
    return chunks
}
