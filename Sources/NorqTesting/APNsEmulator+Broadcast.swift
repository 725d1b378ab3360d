extension EmulatorConnectionHandler {
    /// `POST /4/broadcasts/apps/<bundleId>`, after path, method, auth, request id, bundle and capability checks.
    /// In order: `apns-topic` (a push-type suffix is 400 `TopicDisallowed`, another bundle 403 `TopicMismatch`),
    /// `apns-channel-id` (`MissingChannelId`, `BadChannelId`, `ChannelNotRegistered`), `apns-push-type`
    /// (`MissingPushType`, `InvalidPushType`: only `liveactivity`), `apns-priority` (`BadPriority`: 1, 5, 10),
    /// `apns-expiration` (`BadExpirationDate`: digits, and 0 on a no-storage channel), payload (`PayloadEmpty`,
    /// 413 `PayloadTooLarge` above 5120 bytes, `BadRequestPayload` unless a JSON object whose `aps` has `event`
    /// and `timestamp`), then the faults keyed by channel id (``APNsEmulator/Faults/failFirstAttempts``,
    /// ``APNsEmulator/Faults/failNextRequests``, the error rate; latency and silence do not apply). Success is 200
    /// with `apns-request-id`.
    func broadcastReply(_ f: EmulatorChannelFields, body: [UInt8], bundleID: String, environment: String,
                        shared: EmulatorShared, requestID: String) -> EmulatorReply {
        func reject(_ status: Int, _ reason: String) -> EmulatorReply { .rejection(status, reason, requestID: requestID) }
        if let topic = f.topic, topic != bundleID {
            if EmulatedPushType.allSuffixes.contains(where: { topic.hasSuffix($0) }) { return reject(400, "TopicDisallowed") }
            return reject(403, "TopicMismatch")
        }
        guard let id = f.channelID, !id.isEmpty else { return reject(400, "MissingChannelId") }
        guard EmulatorChannelStore.isWellFormed(id) else { return reject(400, "BadChannelId") }
        guard let channel = shared.channels.find(environment: environment, bundleID: bundleID, id: id) else {
            return reject(400, "ChannelNotRegistered")
        }
        guard let pushType = f.pushType, !pushType.isEmpty else { return reject(400, "MissingPushType") }
        guard pushType.lowercased() == "liveactivity" else { return reject(400, "InvalidPushType") }
        if let priority = f.priority, priority != "10", priority != "5", priority != "1" {
            return reject(400, "BadPriority")
        }
        if let expiration = f.expiration {
            guard !expiration.isEmpty, expiration.utf8.count <= 18, expiration.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                return reject(400, "BadExpirationDate")
            }
            if channel.storagePolicy == 0, Int64(expiration) != 0 { return reject(400, "BadExpirationDate") }
        }
        if body.isEmpty { return reject(400, "PayloadEmpty") }
        if body.count > 5120 { return reject(413, "PayloadTooLarge") }
        guard JSONSyntax.isObject(body[...]), Self.hasLiveActivityAPS(body) else { return reject(400, "BadRequestPayload") }
        if case .answer(let rejection?, _) = shared.decide(token: Substring(id)) {
            var reply = reject(rejection.status, rejection.reason)
            if let retry = rejection.retryAfterSeconds { reply.headers.append(("retry-after", String(retry))) }
            return reply
        }
        shared.channels.countBroadcast(to: id)
        return EmulatorReply(status: 200, headers: [("apns-request-id", requestID)], body: [], requestID: requestID)
    }

    /// `aps` is an object with `event` and `timestamp`.
    static func hasLiveActivityAPS(_ body: [UInt8]) -> Bool {
        guard let root = EmulatorJSON.flatObject(body), let aps = root["aps"],
              let fields = EmulatorJSON.flatObject(Array(aps.utf8)) else { return false }
        return fields["event"] != nil && fields["timestamp"] != nil
    }
}
