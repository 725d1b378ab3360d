public import NorqCore

extension CompiledTemplate {
    /// `push/implausible-expiration` when the rendered `content`'s `apns-expiration` is an epoch in the past at
    /// `sendTime` (nil: now), as the old "3600 means one hour" reading gives, located at the template's
    /// `apns-expiration` line; nil otherwise. What `norq render` and `norq send` warn about (an error with
    /// `--strict`): APNs does not store such a notification.
    public func expirationWarning(for content: PushContent, sendTime: Int64? = nil) -> NorqError? {
        guard let expiration = content.headers.expiration else { return nil }
        let location = file.flatMap { TemplateSourceLocator.locate(keys: ["apns-expiration"], in: $0) }
            ?? SourceLocation(file: file)
        return Conv.expirationWarning(expiration, now: sendTime ?? WallClock.epochSeconds(), at: location)
    }
}
