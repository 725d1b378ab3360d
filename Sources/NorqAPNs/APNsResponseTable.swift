public import NorqCore

/// One documented APNs reason: the status it comes with, how it is classified and its error code.
public struct APNsReason: Sendable, Hashable {
    /// The `reason` string exactly as APNs sends it.
    public var reason: String
    /// The HTTP status APNs documents for it.
    public var status: Int
    public var classification: ResponseClass
    /// `apns/<kebab-case reason>`, e.g. `apns/bad-device-token`.
    public var code: NorqError.Code
    /// True for reasons only the broadcast / channel API returns.
    public var broadcastOnly: Bool

    init(_ reason: String, _ status: Int, _ classification: ResponseClass, broadcastOnly: Bool = false) {
        self.reason = reason
        self.status = status
        self.classification = classification
        self.code = NorqError.Code("apns/" + APNsReason.kebab(reason))
        self.broadcastOnly = broadcastOnly
    }

    /// `BadDeviceToken` -> `bad-device-token`.
    static func kebab(_ reason: String) -> String {
        var out = ""
        var previousLower = false
        for ch in reason {
            if ch.isUppercase {
                if previousLower { out.append("-") }
                out.append(contentsOf: ch.lowercased())
                previousLower = false
            } else {
                out.append(ch)
                previousLower = true
            }
        }
        return out
    }
}

/// The single table of every documented APNs reason (device and broadcast) and its classification.
public enum APNsResponseTable {
    /// Every documented reason.
    public static let reasons: [APNsReason] = [
        // 400
        APNsReason("BadCollapseId", 400, .permanent),
        // Also what APNs answers for a token of the other environment; classified as an invalid token.
        APNsReason("BadDeviceToken", 400, .tokenInvalid),
        APNsReason("BadExpirationDate", 400, .permanent),
        APNsReason("BadMessageId", 400, .permanent),
        APNsReason("BadPriority", 400, .permanent),
        APNsReason("BadTopic", 400, .permanent),
        APNsReason("DeviceTokenNotForTopic", 400, .tokenInvalid),
        APNsReason("DuplicateHeaders", 400, .permanent),
        APNsReason("IdleTimeout", 400, .retryable),
        APNsReason("InvalidPushType", 400, .permanent),
        APNsReason("MissingDeviceToken", 400, .permanent),
        APNsReason("MissingTopic", 400, .permanent),
        APNsReason("PayloadEmpty", 400, .permanent),
        APNsReason("TopicDisallowed", 400, .permanent),
        // 400, broadcast and channel management
        APNsReason("FeatureNotEnabled", 400, .permanent, broadcastOnly: true),
        APNsReason("MissingChannelId", 400, .permanent, broadcastOnly: true),
        APNsReason("BadChannelId", 400, .permanent, broadcastOnly: true),
        APNsReason("ChannelNotRegistered", 400, .permanent, broadcastOnly: true),
        APNsReason("BadRequestParams", 400, .permanent, broadcastOnly: true),
        APNsReason("BadRequestPayload", 400, .permanent, broadcastOnly: true),
        APNsReason("MissingPushType", 400, .permanent, broadcastOnly: true),
        APNsReason("CannotCreateChannelConfig", 400, .permanent, broadcastOnly: true),
        APNsReason("MissingChannelQueueSize", 400, .permanent, broadcastOnly: true),
        // 403
        APNsReason("BadCertificate", 403, .credentials),
        APNsReason("BadCertificateEnvironment", 403, .credentials),
        // Retryable: the provider renews the JWT at once, so the router's retry carries a fresh token.
        APNsReason("ExpiredProviderToken", 403, .retryable),
        APNsReason("Forbidden", 403, .credentials),
        APNsReason("InvalidProviderToken", 403, .credentials),
        APNsReason("MissingProviderToken", 403, .credentials),
        APNsReason("UnrelatedKeyIdInToken", 403, .credentials),
        APNsReason("BadEnvironmentKeyIdInToken", 403, .credentials),
        APNsReason("BadEnvironmentKeyInToken", 403, .credentials),
        APNsReason("TopicMismatch", 403, .credentials, broadcastOnly: true),
        // 404, 405
        APNsReason("BadPath", 404, .permanent),
        APNsReason("MethodNotAllowed", 405, .permanent),
        // 410
        APNsReason("Unregistered", 410, .tokenInvalid),
        APNsReason("ExpiredToken", 410, .tokenInvalid),
        // 413
        APNsReason("PayloadTooLarge", 413, .permanent),
        // 429
        APNsReason("TooManyProviderTokenUpdates", 429, .retryAfterDelay),
        APNsReason("TooManyRequests", 429, .retryAfterDelay),
        // 5xx
        APNsReason("InternalServerError", 500, .retryable),
        APNsReason("ServiceUnavailable", 503, .retryable),
        APNsReason("Shutdown", 503, .retryable),
    ]

    private static let byReason: [String: APNsReason] = {
        var map: [String: APNsReason] = [:]
        for entry in reasons { map[entry.reason] = entry }
        return map
    }()

    /// Code of a reason string APNs sent that is not in the table.
    public static let unknownReasonCode: NorqError.Code = "apns/unknown-reason"

    /// Code of an error response without a JSON `reason` (a proxy or gateway answered, say).
    public static let noReasonCode: NorqError.Code = "apns/no-reason"

    /// The table entry of a reason, or nil when APNs sent something undocumented.
    public static func entry(for reason: String) -> APNsReason? { byReason[reason] }

    /// Classifies a response: 200 is delivered; a known reason by the table; an unknown reason is permanent;
    /// no reason at all by status (429 after a delay, 5xx retryable, anything else permanent).
    public static func classify(status: Int, reason: String?) -> ResponseClass {
        if status == 200 { return .delivered }
        if let reason {
            return byReason[reason]?.classification ?? .permanent
        }
        switch status {
        case 429: return .retryAfterDelay
        case 500...599: return .retryable
        default: return .permanent
        }
    }

    /// The error code for a rejected response (`apns/<reason>`, `apns/unknown-reason`), nil when delivered.
    public static func code(status: Int, reason: String?) -> NorqError.Code? {
        if status == 200 { return nil }
        guard let reason else { return noReasonCode }
        return byReason[reason]?.code ?? unknownReasonCode
    }
}
