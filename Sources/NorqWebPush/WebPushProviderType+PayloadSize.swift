public import NorqCore

extension WebPushPayload {
    /// The size of the plaintext `WebPushProvider.prepare` encrypts for `content` (`WebPushPayload.encode`) and its
    /// limit, 3,993 bytes: what fits the 4,096-byte encrypted body push services must accept (RFC 8291/8188 one
    /// record: 86-byte header, 1-byte delimiter, 16-byte tag; padding shrinks to fit, so it never counts).
    public static func size(of content: PushContent) -> PayloadSize {
        PayloadSize(provider: "webpush", what: "plaintext (before encryption)", bytes: encode(content).count,
                    limit: WebPushEncryption.maxPlaintextBytes)
    }
}

extension WebPushProviderType {
    /// The plaintext for web tokens (`WebPushPayload.size(of:)`); nothing for other platforms.
    public func payloadSizes(for content: PushContent, platforms: Set<Platform>,
                             options: SendOptions) throws(NorqError) -> [PayloadSize] {
        guard platforms.contains(.web) else { return [] }
        try WebPushProvider.checkHeaderValues(of: content, options: options)
        return [WebPushPayload.size(of: content)]
    }
}
