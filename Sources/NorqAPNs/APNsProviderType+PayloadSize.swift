public import NorqCore

extension APNsPayload {
    /// The size of the device payload `APNsProvider.prepare` sends for `content` (push type resolved as it does,
    /// `APNsPayload.encode`) and the push type's limit (4,096 bytes; 5,120 for voip).
    public static func size(of content: PushContent, sendTime: Int64) throws(NorqError) -> PayloadSize {
        let pushType = try APNsPushType.resolve(for: content)
        let bytes = try encode(content, pushType: pushType, sendTime: sendTime).count
        return PayloadSize(provider: "apns", what: "payload (push type \(pushType.rawValue))", bytes: bytes,
                           limit: pushType.payloadLimit)
    }
}

extension APNsProviderType {
    /// The device payload for iOS tokens (`APNsPayload.size(of:sendTime:)`); nothing for other platforms. Throws
    /// `template/invalid-header-value` as `prepare` does for a collapse id that cannot be a header value.
    public func payloadSizes(for content: PushContent, platforms: Set<Platform>,
                             options: SendOptions) throws(NorqError) -> [PayloadSize] {
        guard platforms.contains(.ios) else { return [] }
        // The header values `prepare` checks too, so that `norq validate` reports what a send would.
        try APNsProvider.checkHeaderValue("apns-collapse-id", options.collapseID ?? content.headers.collapseID,
                                          of: content)
        return [try APNsPayload.size(of: content, sendTime: options.sendTime ?? APNsClock.system.epochSeconds())]
    }
}
