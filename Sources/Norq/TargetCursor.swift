import NorqCore
import Synchronization

/// Every target of one recipient list routed once, before any is delivered: which provider delivers it, or the
/// outcome routing decided. The pumps (one per provider) and the report of unrouted targets read it; none routes
/// again (each pump called `route` for every target whose token named its provider: 1 + k calls per target with
/// k providers).
struct RoutedTargets: Sendable {
    /// Per target position: the index in `NotificationRouter.providerNames` of the provider that delivers it, or
    /// ``unrouted`` when routing decided its outcome.
    let providerIndex: [Int32]
    /// The targets routing did not send anywhere, in position order, with their outcomes (few: unknown providers,
    /// platforms no provider serves).
    let unrouted: [(position: Int, target: DeliveryTarget, recipientID: String?, result: PushOutcome.Result,
                    provider: String?)]

    static let unrouted: Int32 = -1

    init(_ router: NotificationRouter, _ recipients: [Recipient]) {
        var indexOf: [String: Int32] = [:]
        for (index, name) in router.providerNames.enumerated() { indexOf[name] = Int32(index) }
        // A token without a provider of its own goes by its platform's route, worked out at the router's init.
        let implicit: [(platform: Platform, index: Int32)] = router.implicitRoutes.map { entry in
            guard case .provider(let chosen, _) = entry.route else { return (entry.platform, Self.unrouted) }
            return (entry.platform, indexOf[chosen.name] ?? Self.unrouted)
        }
        var providerIndex: [Int32] = []
        providerIndex.reserveCapacity(NotificationRouter.targetCount(recipients))
        var unrouted: [(position: Int, target: DeliveryTarget, recipientID: String?, result: PushOutcome.Result,
                        provider: String?)] = []
        func add(_ target: DeliveryTarget, _ recipientID: String?) {
            if case .token(let token) = target, token.provider == nil,
               let entry = implicit.first(where: { $0.platform == token.platform }), entry.index != Self.unrouted {
                providerIndex.append(entry.index)
                return
            }
            switch router.route(target) {
            case .provider(let provider, _):
                providerIndex.append(indexOf[provider.name] ?? Self.unrouted)
            case .outcome(let result, let provider, _):
                unrouted.append((providerIndex.count, target, recipientID, result, provider))
                providerIndex.append(Self.unrouted)
            }
        }
        for recipient in recipients {
            for token in recipient.tokens { add(.token(token), recipient.id) }
            for channel in recipient.channels { add(.channel(channel), recipient.id) }
        }
        self.providerIndex = providerIndex
        self.unrouted = unrouted
    }
}

/// A shared, thread-safe walk over the targets of a recipient list in `forEachTarget` order (each recipient's
/// tokens, then its channels) that one provider delivers, handing each target with its position to exactly one
/// caller.
final class TargetCursor: Sendable {
    private struct Position {
        var recipient = 0
        var index = 0
        var position = 0
    }

    private let recipients: [Recipient]
    private let routes: [Int32]
    private let providerIndex: Int32
    private let state = Mutex(Position())

    /// The targets of `recipients` that `routes` gives to the provider at `providerIndex`.
    init(_ recipients: [Recipient], routes: RoutedTargets, providerIndex: Int) {
        self.recipients = recipients
        self.routes = routes.providerIndex
        self.providerIndex = Int32(providerIndex)
    }

    /// The next target of this provider, its position and its recipient's id; nil once every one was handed out.
    func next() -> (Int, DeliveryTarget, String?)? {
        state.withLock { s in
            // The recipient is read in place (a copy of it retained its arrays and id per target).
            while s.recipient < recipients.count {
                let tokens = recipients[s.recipient].tokens.count
                let all = tokens + recipients[s.recipient].channels.count
                // Targets of other providers are skipped by their route, without being read.
                while s.index < all, routes[s.position] != providerIndex {
                    s.index += 1
                    s.position += 1
                }
                if s.index < all {
                    let target: DeliveryTarget = s.index < tokens
                        ? .token(recipients[s.recipient].tokens[s.index])
                        : .channel(recipients[s.recipient].channels[s.index - tokens])
                    let position = s.position
                    let id = recipients[s.recipient].id
                    s.index += 1
                    s.position += 1
                    return (position, target, id)
                }
                s.recipient += 1
                s.index = 0
            }
            return nil
        }
    }
}
