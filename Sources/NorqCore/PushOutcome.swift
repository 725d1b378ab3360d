/// The single final outcome of one token (or channel) of a send.
public struct PushOutcome: Sendable, Hashable {
    public struct Delivered: Sendable, Hashable {
        public var status: Int
        /// Provider message id (APNs `apns-id`).
        public var messageID: String?
        /// APNs `apns-unique-id`.
        public var uniqueID: String?
        /// True when the service only accepted the message (a ticket, as Expo's): its final fate comes later, from a
        /// receipt fetched with the message id (``ReceiptFetchingProvider``). The outcome's `kind` is then `accepted`.
        public var accepted: Bool
        public init(status: Int = 200, messageID: String? = nil, uniqueID: String? = nil, accepted: Bool = false) {
            self.status = status
            self.messageID = messageID
            self.uniqueID = uniqueID
            self.accepted = accepted
        }
    }

    public struct Rejected: Sendable, Hashable {
        public var status: Int
        /// The provider's reason string, kept even when unknown.
        public var reason: String?
        public var code: NorqError.Code
        public var classification: ResponseClass
        /// APNs 410 timestamp (milliseconds since the epoch).
        public var invalidSince: Int64?
        public var messageID: String?
        public init(status: Int, reason: String?, code: NorqError.Code, classification: ResponseClass,
                    invalidSince: Int64? = nil, messageID: String? = nil) {
            self.status = status
            self.reason = reason
            self.code = code
            self.classification = classification
            self.invalidSince = invalidSince
            self.messageID = messageID
        }
    }

    public struct Skipped: Sendable, Hashable {
        public var code: NorqError.Code
        public var reason: String
        public init(code: NorqError.Code, reason: String) {
            self.code = code
            self.reason = reason
        }
    }

    /// Only `duplicate` is indirect: with the whole enum indirect, every outcome allocated a box for its result.
    public enum Result: Sendable, Hashable {
        case delivered(Delivered)
        /// The provider answered with an error.
        case rejected(Rejected)
        /// No definitive answer (transport error, deadline) after all attempts, or a local error. When the error's
        /// `possiblyProcessed` is true, the push may have been delivered (`mayHaveBeenDelivered`).
        case failed(NorqError)
        case skipped(Skipped)
        /// A repeat of an already completed (idempotency key, token); carries the first outcome.
        indirect case duplicate(of: Result)

        /// `delivered`, `accepted` (a delivered outcome the service only accepted, ``Delivered/accepted``),
        /// `rejected`, `failed`, `skipped` or `duplicate`.
        public var kind: String {
            switch self {
            case .delivered(let delivered): delivered.accepted ? "accepted" : "delivered"
            case .rejected: "rejected"
            case .failed: "failed"
            case .skipped: "skipped"
            case .duplicate: "duplicate"
            }
        }

        /// True for a `failed` outcome of which an attempt may have been processed by the provider (it was written,
        /// then no definitive answer came, and `retry.ambiguous` did not allow sending it again): the user may have
        /// received the notification. Sending it again may deliver it twice.
        public var mayHaveBeenDelivered: Bool {
            if case .failed(let error) = self { return error.possiblyProcessed }
            return false
        }
    }

    public var target: DeliveryTarget
    public var recipientID: String?
    /// The provider instance chosen by routing, if any.
    public var provider: String?
    /// How many requests were sent for this token (0 when none), re-queues included.
    public var attempts: Int
    /// How many of those `attempts` were re-queues: sent again after an attempt known not to have been processed
    /// by the server (a refused stream, above a GOAWAY's last-stream-id, never written), which do not spend the
    /// provider's `retry.retries`.
    public var requeues: Int
    public var result: Result

    /// True when the outcome is `failed` but the push may have been delivered (see `Result.mayHaveBeenDelivered`).
    public var mayHaveBeenDelivered: Bool { result.mayHaveBeenDelivered }

    public init(target: DeliveryTarget, recipientID: String? = nil, provider: String? = nil, attempts: Int = 0,
                requeues: Int = 0, result: Result) {
        self.target = target
        self.recipientID = recipientID
        self.provider = provider
        self.attempts = attempts
        self.requeues = requeues
        self.result = result
    }
}

/// All outcomes of one send: exactly one per token or channel.
public struct SendReport: Sendable, Hashable {
    public var outcomes: [PushOutcome]
    public init(outcomes: [PushOutcome] = []) { self.outcomes = outcomes }

    public func count(_ kind: String) -> Int { outcomes.count { $0.result.kind == kind } }
    public var delivered: Int { count("delivered") }
    /// Outcomes the service accepted, whose receipts are still to come (``PushOutcome/Delivered/accepted``).
    public var accepted: Int { count("accepted") }
    public var rejected: Int { count("rejected") }
    public var failed: Int { count("failed") }
    public var skipped: Int { count("skipped") }
    public var duplicates: Int { count("duplicate") }
    /// Re-queues of all outcomes (attempts known not to have been processed, sent again free of the retry budget).
    public var requeues: Int { outcomes.reduce(0) { $0 + $1.requeues } }
    /// How many `failed` outcomes may have been delivered all the same.
    public var mayHaveBeenDelivered: Int { outcomes.count { $0.result.mayHaveBeenDelivered } }
    /// True when every outcome is `delivered` or `accepted` (or a duplicate of one).
    public var allDelivered: Bool {
        outcomes.allSatisfy {
            switch $0.result {
            case .delivered, .duplicate(of: .delivered): true
            default: false
            }
        }
    }
}
