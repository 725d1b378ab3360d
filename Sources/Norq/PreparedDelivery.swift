public import NorqCore

/// One token (or channel) of a dry run: the exact request that would be sent, or why none would be.
public struct PreparedDelivery: Sendable, Hashable {
    public enum Plan: Sendable, Hashable {
        /// The request the provider would send.
        case request(PreparedRequest)
        /// No request: the outcome the send would report (skipped, rejected by routing, failed to prepare).
        case noRequest(PushOutcome.Result)
    }

    public var target: DeliveryTarget
    public var recipientID: String?
    /// The provider instance routing chose, if any.
    public var provider: String?
    /// How routing decided, in words (`token.provider`, `routing push.ios`, `routing push`, `the only ios provider`).
    public var routing: String
    public var plan: Plan

    public init(target: DeliveryTarget, recipientID: String?, provider: String?, routing: String, plan: Plan) {
        self.target = target
        self.recipientID = recipientID
        self.provider = provider
        self.routing = routing
        self.plan = plan
    }

    /// The request, when there is one.
    public var request: PreparedRequest? {
        if case .request(let request) = plan { return request }
        return nil
    }
}
