/// The APNs push types the emulator knows, with their topic suffix.
enum EmulatedPushType {
    /// push type -> required topic suffix ("" = the bare bundle id; nil = topic not checked).
    static let suffixes: [String: String?] = [
        "alert": "",
        "background": "",
        "voip": ".voip",
        "complication": ".complication",
        "fileprovider": ".pushkit.fileprovider",
        "mdm": nil,
        "location": ".location-query",
        "liveactivity": ".push-type.liveactivity",
        "pushtotalk": ".voip-ptt",
        "widgets": ".push-type.widgets",
        "controls": ".push-type.controls",
    ]
    /// Every suffix, longest first (so `.voip-ptt` is matched before `.voip`).
    static let allSuffixes: [String] = suffixes.values.compactMap { $0 }.filter { !$0.isEmpty }
        .sorted { $0.count > $1.count }

    static func payloadLimit(_ pushType: String) -> Int { pushType == "voip" ? 5120 : 4096 }
}

/// An APNs-style rejection.
struct APNsRejection: Error, Equatable {
    var status: Int
    var reason: String
    var timestamp: Int64? = nil
    var retryAfterSeconds: Int? = nil
}

/// The header checks APNs applies to a device push, as a pure function of the request's fields.
/// Authentication is checked separately (it needs per-connection state).
struct APNsRequestRules {
    var bundleIDs: Set<String>?
    var topicRequired: Bool

    /// Checks method and path; returns the device token.
    static func checkPath(method: String, path: String) -> Result<Substring, APNsRejection> {
        let prefix = "/3/device/"
        guard path.hasPrefix(prefix) else { return .failure(.init(status: 404, reason: "BadPath")) }
        guard method == "POST" else { return .failure(.init(status: 405, reason: "MethodNotAllowed")) }
        let token = path.dropFirst(prefix.count)
        if token.isEmpty { return .failure(.init(status: 400, reason: "MissingDeviceToken")) }
        guard token.utf8.count >= 64, token.utf8.allSatisfy({ c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46)
        }) else { return .failure(.init(status: 400, reason: "BadDeviceToken")) }
        return .success(token)
    }

    /// Checks the `apns-*` headers and the payload.
    func checkHeaders(
        apnsID: String?, pushType: String?, topic: String?, priority: String?, expiration: String?,
        collapseID: String?, body: some Collection<UInt8>, bodyIsJSONObject: () -> Bool
    ) -> APNsRejection? {
        if let apnsID, !FastUUIDGenerator.isUUID(apnsID) { return .init(status: 400, reason: "BadMessageId") }
        let type = pushType ?? "alert"
        guard let suffixEntry = EmulatedPushType.suffixes[type] else {
            return .init(status: 400, reason: "InvalidPushType")
        }
        if let topic {
            if let suffix = suffixEntry {
                let base: Substring
                if suffix.isEmpty {
                    if let other = EmulatedPushType.allSuffixes.first(where: { topic.hasSuffix($0) }),
                       bundleIDs?.contains(String(topic.dropLast(other.count))) ?? true {
                        return .init(status: 400, reason: "DeviceTokenNotForTopic")
                    }
                    base = topic[...]
                } else if topic.hasSuffix(suffix) {
                    base = topic.dropLast(suffix.count)
                } else {
                    let other = EmulatedPushType.allSuffixes.first { topic.hasSuffix($0) }
                    let otherBase = other.map { String(topic.dropLast($0.count)) } ?? topic
                    let known = bundleIDs.map { $0.contains(otherBase) } ?? true
                    return .init(status: 400, reason: known ? "DeviceTokenNotForTopic" : "TopicDisallowed")
                }
                if let bundleIDs, !bundleIDs.contains(String(base)) {
                    return .init(status: 400, reason: "TopicDisallowed")
                }
            }
        } else if topicRequired {
            return .init(status: 400, reason: "MissingTopic")
        }
        if let priority {
            guard priority == "10" || priority == "5" || priority == "1" else {
                return .init(status: 400, reason: "BadPriority")
            }
            if type == "background" && priority != "5" { return .init(status: 400, reason: "BadPriority") }
        } else if type == "background" {
            // APNs assumes 10 when absent, which background does not allow.
            return .init(status: 400, reason: "BadPriority")
        }
        if let expiration {
            guard !expiration.isEmpty, expiration.utf8.count <= 18,
                  expiration.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
            else { return .init(status: 400, reason: "BadExpirationDate") }
        }
        if let collapseID, collapseID.utf8.count > 64 { return .init(status: 400, reason: "BadCollapseId") }
        if body.isEmpty { return .init(status: 400, reason: "PayloadEmpty") }
        if body.count > EmulatedPushType.payloadLimit(type) { return .init(status: 413, reason: "PayloadTooLarge") }
        if !bodyIsJSONObject() { return .init(status: 400, reason: "BadPayload") }
        return nil
    }
}
