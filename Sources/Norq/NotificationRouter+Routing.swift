import NorqCore

/// Where routing sent one target.
enum RouteDecision: Sendable {
    /// Deliver through this provider; `how` says which routing step chose it.
    case provider(any PushProvider, how: String)
    /// No delivery: the outcome is final.
    case outcome(PushOutcome.Result, provider: String?, how: String)

    var providerName: String? {
        switch self {
        case .provider(let provider, _): provider.name
        case .outcome(_, let provider, _): provider
        }
    }
}

extension NotificationRouter {
    /// Routes one target, first match wins: the target's own `provider`, `routing push.<platform>`,
    /// `routing push` (when it serves the platform), the only provider serving the platform; else skipped.
    func route(_ target: DeliveryTarget) -> RouteDecision {
        let platform: Platform
        let explicit: String?
        switch target {
        case .token(let token):
            platform = token.platform
            explicit = token.provider
        case .channel(let channel):
            // A channel's platform is the channel's own fact (`platform`); without one, `routing push` or the
            // only provider takes it (which provider serves broadcast channels or topics is the provider's
            // fact: `prepare(forChannel:)` refuses with `provider/broadcast-unsupported` otherwise).
            guard let channelPlatform = channel.platform else { return channelRoute(channel) }
            platform = channelPlatform
            explicit = channel.provider
        }
        if let explicit {
            guard let provider = providers[explicit] else {
                let rejected = PushOutcome.Rejected(status: 0, reason: "unknown provider \"\(explicit)\"",
                                                    code: .unknownProvider, classification: .permanent)
                return .outcome(.rejected(rejected), provider: nil, how: "token.provider \(explicit) (unknown)")
            }
            guard provider.platforms.contains(platform) else {
                let rejected = PushOutcome.Rejected(
                    status: 0, reason: "provider \"\(explicit)\" does not serve \(platform)",
                    code: .platformNotSupported, classification: .permanent)
                return .outcome(.rejected(rejected), provider: explicit,
                                how: "token.provider \(explicit) (does not serve \(platform))")
            }
            return .provider(provider, how: "token.provider")
        }
        for index in implicitRoutes.indices where implicitRoutes[index].platform == platform {
            return implicitRoutes[index].route
        }
        return Self.implicitRoute(for: platform, providers: providers, providerNames: providerNames,
                                  defaultProvider: defaultProvider, byPlatform: byPlatform)
    }

    /// The route of a channel that names no platform: its `provider`, else `routing push`, else the only provider.
    func channelRoute(_ channel: ChannelRecipient) -> RouteDecision {
        if let explicit = channel.provider {
            guard let provider = providers[explicit] else {
                let rejected = PushOutcome.Rejected(status: 0, reason: "unknown provider \"\(explicit)\"",
                                                    code: .unknownProvider, classification: .permanent)
                return .outcome(.rejected(rejected), provider: nil, how: "channel.provider \(explicit) (unknown)")
            }
            return .provider(provider, how: "channel.provider")
        }
        if let name = defaultProvider, let provider = providers[name] { return .provider(provider, how: "routing push") }
        if providerNames.count == 1, let provider = providers[providerNames[0]] {
            return .provider(provider, how: "the only provider")
        }
        let skipped = PushOutcome.Skipped(
            code: .noProvider,
            reason: "a channel without provider or platform, and no routing push: name its provider or platform")
        return .outcome(.skipped(skipped), provider: nil, how: "no route")
    }

    /// The route of a token without `provider`: by its platform only, so the router works it out once per platform
    /// at init (`implicitRoutes`) instead of per token (two dictionary reads and a description string each).
    static func implicitRoute(for platform: Platform, providers: [String: any PushProvider], providerNames: [String],
                              defaultProvider: String?, byPlatform: [Platform: String]) -> RouteDecision {
        if let name = byPlatform[platform], let provider = providers[name] {
            return .provider(provider, how: "routing push.\(platform)")
        }
        if let name = defaultProvider, let provider = providers[name], provider.platforms.contains(platform) {
            return .provider(provider, how: "routing push")
        }
        let serving = providerNames.filter { providers[$0]?.platforms.contains(platform) == true }
        if serving.count == 1, let provider = providers[serving[0]] {
            return .provider(provider, how: "the only \(platform) provider")
        }
        let reason = serving.isEmpty
            ? "no provider serves \(platform)"
            : "\(serving.count) providers serve \(platform) (\(serving.joined(separator: ", "))) and routing names none"
        return .outcome(.skipped(PushOutcome.Skipped(code: .noProvider, reason: reason)), provider: nil,
                        how: "no route")
    }

    /// Calls `body` for every target of `recipients` in order (tokens, then channels, per recipient) with its
    /// position in that order.
    static func forEachTarget(_ recipients: [Recipient],
                              _ body: (Int, DeliveryTarget, String?) async -> Void) async {
        var position = 0
        for recipient in recipients {
            for token in recipient.tokens {
                await body(position, .token(token), recipient.id)
                position += 1
            }
            for channel in recipient.channels {
                await body(position, .channel(channel), recipient.id)
                position += 1
            }
        }
    }

    static func targetCount(_ recipients: [Recipient]) -> Int {
        recipients.reduce(0) { $0 + $1.tokens.count + $1.channels.count }
    }
}

extension DeliveryTarget {
    /// The whole token or channel id (for request ids and dedup keys; never logged).
    var identity: String {
        switch self {
        case .token(let token): token.token
        case .channel(let channel): "channel:" + channel.channel
        }
    }
}

extension NotificationRouter {
    /// The provider instance routing would choose for `target` (nil when none would): what an API server checks
    /// against a caller's allowed providers before it enqueues.
    public func routedProviderName(for target: DeliveryTarget) -> String? {
        route(target).providerName
    }
}
