public import NorqCore

extension FCMMessage {
    /// The size of the message (without its target) `FCMProvider.prepare` sends for `content` to a token of
    /// `platform` (`FCMMessage.object`, the same blocks), and FCM's limit, 4,096 bytes. Nil when no such message
    /// exists: a native APNs payload (`push.json` with `aps`) only goes to iOS tokens.
    public static func size(of content: PushContent, platform: Platform,
                            options: Options) throws(NorqError) -> PayloadSize? {
        let blocks = Blocks.for(.token("", platform: platform))
        if blocks != .apns, case .object(let native)? = content.nativePayload, native["aps"] != nil { return nil }
        let bytes = JSONValue.object(try object(for: content, blocks: blocks, options: options)).serialized().count
        return PayloadSize(provider: "fcm", platform: platform, what: "message", bytes: bytes, limit: payloadLimit)
    }
}

extension FCMProviderType {
    /// One message per platform of `platforms` FCM serves (iOS: the `apns` block; Android: `notification`,
    /// `data`, `android`; web: `notification`, `data`, `webpush`), measured as `FCMProvider.prepare` builds it.
    /// Topic and condition messages (every block at once, limit 2,048 bytes) are not measured here, since a
    /// template does not say whether it goes to topics; `prepare` checks them before sending.
    public func payloadSizes(for content: PushContent, platforms: Set<Platform>,
                             options: SendOptions) throws(NorqError) -> [PayloadSize] {
        if !platforms.isDisjoint(with: self.platforms) { try FCMProvider.checkHeaderValues(of: content, options: options) }
        let messageOptions = FCMMessage.Options(priority: options.priority, expiration: options.expiration,
                                                collapseID: options.collapseID,
                                                sendTime: options.sendTime ?? FCMClock.system.epochSeconds())
        var sizes: [PayloadSize] = []
        for platform in Platform.known where platforms.contains(platform) && self.platforms.contains(platform) {
            if let size = try FCMMessage.size(of: content, platform: platform, options: messageOptions) {
                sizes.append(size)
            }
        }
        return sizes
    }
}
