/// The final answer of a message the service first only accepted (``ResponseClass/accepted``), as a receipt
/// says it, or that no receipt has come yet.
public enum ReceiptState: Sendable, Hashable {
    /// No receipt yet: ask again later (Expo leaves such ids out of its answer).
    case pending
    /// The receipt: a `DeliveryResponse` classified by the provider's table (`delivered`, `token-invalid`,
    /// `permanent`, `retryable`, ...), with the message id it answers.
    case final(DeliveryResponse)
}

/// A provider whose service answers twice: a ticket when it takes a message (the outcome `accepted`, with the
/// ticket id as message id), then a receipt fetched later by that id (Expo's `getReceipts`).
///
/// The call is stateless, ids in and receipt states out, so that any caller can drive it: `norq send
/// --wait-receipts` (``ReceiptPolling``), or a durable worker that stored the ids of its accepted outcomes and
/// fetches their receipts after ``receiptDelay``, giving up as unknown after ``receiptRetention``.
public protocol ReceiptFetchingProvider: PushProvider {
    /// The most ids one receipt request may carry (Expo: 1,000). Callers chunk by it.
    var maxReceiptIDsPerRequest: Int { get }
    /// When receipts are normally ready after the ticket (Expo recommends 15 minutes).
    var receiptDelay: Duration { get }
    /// How long the service keeps receipts (Expo: 24 hours); an id without a receipt after this is unknown.
    var receiptRetention: Duration { get }

    /// Fetches the receipts of `ids` (at most ``maxReceiptIDsPerRequest``), once. Every id of `ids` is in the
    /// answer: `.pending` when the service has no receipt for it yet. Throws a `NorqError` when the request failed
    /// as a whole (transport, deadline, an error answer): the caller may ask again later.
    func fetchReceipts(_ ids: [String], deadline: ContinuousClock.Instant) async throws(NorqError) -> [String: ReceiptState]
}
