public import NorqCore

extension APNsProvider {
    /// Largest broadcast payload APNs accepts, in bytes.
    public static let broadcastPayloadLimit = 5120

    /// Priorities a broadcast may carry.
    public static let broadcastPriorities: Set<Int> = [1, 5, 10]

    /// Builds `POST /4/broadcasts/apps/<bundleId>` for one channel: `apns-channel-id`, `apns-push-type:
    /// liveactivity`, `apns-priority`, `apns-expiration` (forced to 0, and any other value refused, on a channel
    /// this provider knows to be no-storage), the plain bundle id (or the per-notification topic, which must
    /// be a plain bundle id too) as `apns-topic` and in the path (never the
    /// `.push-type.liveactivity` suffix), `apns-request-id` (the router's stable id, so a retry is the same
    /// request) and the provider token. The payload is the Live Activity payload, at most 5120 bytes.
    public func prepare(_ content: PushContent, forChannel channel: ChannelRecipient,
                        options: SendOptions) throws(NorqError) -> PreparedRequest {
        try APNsChannelID.validate(channel.channel)
        let pushType = try APNsPushType.resolve(for: content)
        guard pushType == .liveactivity else {
            throw NorqError(.apnsBroadcastRequiresLiveActivity,
                            "a broadcast channel carries Live Activity pushes only; this content is push type \(pushType)")
        }
        let environment = channel.environment ?? options.environment ?? configuration.defaultEnvironment
        let priority = options.priority ?? content.headers.priority ?? pushType.defaultPriority
        guard Self.broadcastPriorities.contains(priority) else {
            throw NorqError(.apnsBadPriority, "priority \(priority) is not allowed for a broadcast; allowed: 1, 5, 10")
        }
        let sendTime = options.sendTime ?? clock.epochSeconds()
        var expiration = (options.expiration ?? content.headers.expiration).map { $0.epochSeconds(sendTime: sendTime) }
        if let value = expiration, value < 0 {
            throw NorqError(.apnsBadExpiration, "apns-expiration must be 0 or an epoch time in seconds, got \(value)")
        }
        if channelPolicies.policy(of: channel.channel, environment: environment) == .noMessageStored {
            if let value = expiration, value != 0 {
                throw NorqError(.apnsBadExpiration,
                                "channel \(String(channel.channel.prefix(8)))… stores no messages; its broadcasts need apns-expiration 0, got \(value)")
            }
            expiration = 0
        }
        let requestID: String
        if let given = options.requestID {
            let lower = given.lowercased()
            guard APNsRequestID.isValid(lower) else {
                throw NorqError(.apnsBadMessageID, "apns-request-id must be a UUID (8-4-4-4-12 hex digits), got \"\(given.prefix(40))\"")
            }
            requestID = lower
        } else {
            requestID = APNsRequestID.random()
        }
        // A per-notification topic names another app of the team; a broadcast uses the plain bundle id.
        var app = configuration.bundleID
        if let topic = options.topic ?? content.headers.topic {
            guard APNsPushType.isTopic(topic),
                  !APNsPushType.all.contains(where: { !$0.topicSuffix.isEmpty && topic.hasSuffix($0.topicSuffix) }) else {
                throw NorqError(.apnsInvalidTopic,
                                "a broadcast's apns-topic must be the app's plain bundle id, got \"\(topic.prefix(80))\"")
            }
            app = topic
        }
        let body = try APNsPayload.encode(content, pushType: .liveactivity, sendTime: sendTime)
        guard body.count <= Self.broadcastPayloadLimit else {
            throw NorqError(.apnsPayloadTooLarge,
                            "broadcast payload is \(body.count) bytes, \(body.count - Self.broadcastPayloadLimit) over the limit of \(Self.broadcastPayloadLimit)")
        }
        var headers: [HTTPHeader] = []
        headers.reserveCapacity(7)
        headers.append(HTTPHeader("apns-channel-id", channel.channel))
        headers.append(HTTPHeader("apns-push-type", APNsPushType.liveactivity.rawValue))
        headers.append(HTTPHeader("apns-topic", app))
        headers.append(HTTPHeader("apns-priority", String(priority)))
        if let expiration { headers.append(HTTPHeader("apns-expiration", String(expiration))) }
        headers.append(HTTPHeader("apns-request-id", requestID))
        var redactions: [String: String] = [:]
        if let token = currentToken(), let display = authorizationDisplay {
            headers.append(HTTPHeader("authorization", token.headerValue))
            redactions["authorization"] = display
        }
        var target = channel
        target.environment = environment
        return PreparedRequest(method: "POST", authority: configuration.broadcastEndpoint(for: environment).authority,
                               path: "/4/broadcasts/apps/" + app, headers: headers, body: body,
                               provider: name, target: .channel(target), environment: environment,
                               requestID: requestID, payloadLimit: Self.broadcastPayloadLimit, redactions: redactions)
    }

    /// How `authorization` is shown in a dry run (never the JWT itself).
    var authorizationDisplay: String? {
        guard case .token(let keyID, let teamID, _, _) = configuration.authentication else { return nil }
        return "bearer <redacted ES256 JWT kid=\(keyID) iss=\(teamID)>"
    }
}
