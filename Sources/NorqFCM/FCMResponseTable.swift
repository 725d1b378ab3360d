public import NorqCore

extension ResponseClass {
    /// The token can never work with these credentials (FCM `SENDER_ID_MISMATCH`: it belongs to another Firebase
    /// project): not retried, and not reported as an invalid token (it may be valid for the right project), so an
    /// application quarantines it instead of deleting it.
    public static let tokenQuarantined = ResponseClass(rawValue: "token-quarantined")
}

/// One FCM error code: the HTTP status it comes with, its class, and its Norq code.
public struct FCMErrorCode: Sendable, Hashable {
    /// The `errorCode` of the `google.firebase.fcm.v1.FcmError` detail, exactly as FCM sends it.
    public var errorCode: String
    /// The HTTP status FCM documents for it.
    public var status: Int
    public var classification: ResponseClass
    /// `fcm/<kebab-case code>`, e.g. `fcm/unregistered`.
    public var code: NorqError.Code
    /// The least delay before a retry (FCM asks for at least a minute after `QUOTA_EXCEEDED`).
    public var minimumRetryDelay: Duration?

    init(_ errorCode: String, _ status: Int, _ classification: ResponseClass, minimumRetryDelay: Duration? = nil) {
        self.errorCode = errorCode
        self.status = status
        self.classification = classification
        self.code = NorqError.Code("fcm/" + errorCode.lowercased().replacingUnderscores())
        self.minimumRetryDelay = minimumRetryDelay
    }
}

extension String {
    fileprivate func replacingUnderscores() -> String { String(map { $0 == "_" ? "-" : $0 }) }
}

/// The single table of FCM's error codes and how each is classified; `classify` reads an answer with it:
/// `details[].errorCode` first, then the canonical `status` (`UNAUTHENTICATED`), then the HTTP status.
public enum FCMResponseTable {
    /// FCM's documented error codes (https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode).
    public static let errorCodes: [FCMErrorCode] = [
        // No detail: transient once (the router's retries decide how often).
        FCMErrorCode("UNSPECIFIED_ERROR", 500, .retryable),
        // Bad request field; an invalid-token event only when the answer names the registration token.
        FCMErrorCode("INVALID_ARGUMENT", 400, .permanent),
        FCMErrorCode("UNREGISTERED", 404, .tokenInvalid),
        FCMErrorCode("SENDER_ID_MISMATCH", 403, .tokenQuarantined),
        FCMErrorCode("QUOTA_EXCEEDED", 429, .retryAfterDelay, minimumRetryDelay: .seconds(60)),
        FCMErrorCode("UNAVAILABLE", 503, .retryable),
        FCMErrorCode("INTERNAL", 500, .retryable),
        // The APNs or Web Push credentials configured in the Firebase project: a provider problem.
        FCMErrorCode("THIRD_PARTY_AUTH_ERROR", 401, .credentials),
        // The spelling before the rename (still matched by the Admin SDKs).
        FCMErrorCode("APNS_AUTH_ERROR", 401, .credentials),
    ]

    /// The canonical (google.rpc) statuses an answer without an FCM error code may carry as its reason.
    public static let canonicalStatuses: Set<String> = [
        "INVALID_ARGUMENT", "UNAUTHENTICATED", "PERMISSION_DENIED", "NOT_FOUND", "RESOURCE_EXHAUSTED", "UNAVAILABLE",
        "INTERNAL", "DEADLINE_EXCEEDED", "FAILED_PRECONDITION", "UNIMPLEMENTED",
    ]

    /// Every reason string the table knows: the error codes and the canonical statuses.
    public static let reasonStrings: Set<String> = Set(errorCodes.map(\.errorCode)).union(canonicalStatuses)

    /// The canonical status of an expired or invalid access token (no FCM error code).
    public static let unauthenticated = "UNAUTHENTICATED"
    /// Code of an `errorCode` FCM sent that is not in the table (the code itself is kept as the reason).
    public static let unknownErrorCode: NorqError.Code = "fcm/unknown-error-code"
    /// Code of an error answer without an FCM `errorCode` (classified by the HTTP status).
    public static let noErrorCode: NorqError.Code = "fcm/no-error-code"

    private static let byCode: [String: FCMErrorCode] = {
        var map: [String: FCMErrorCode] = [:]
        for entry in errorCodes { map[entry.errorCode] = entry }
        return map
    }()

    /// The table entry of an error code, or nil when FCM sent something undocumented.
    public static func entry(for errorCode: String) -> FCMErrorCode? { byCode[errorCode] }

    /// What an error body says: `error.details[].errorCode` (the `FcmError` detail), `error.status`
    /// (canonical), `error.message`, and whether a `BadRequest` field violation or the message names the
    /// registration token (`message.token`).
    public struct ErrorBody: Sendable, Hashable {
        public var errorCode: String?
        public var status: String?
        public var message: String?
        public var namesToken: Bool

        public init(errorCode: String? = nil, status: String? = nil, message: String? = nil, namesToken: Bool = false) {
            self.errorCode = errorCode
            self.status = status
            self.message = message
            self.namesToken = namesToken
        }

        /// Parses `{"error": {"code", "message", "status", "details": [...]}}`; empty when it is not that.
        public init(parsing body: [UInt8]) {
            self.init()
            guard !body.isEmpty, let json = try? JSONValue(parsing: body), case .object(let error)? = json["error"] else {
                return
            }
            status = error["status"]?.stringValue
            message = error["message"]?.stringValue
            if case .array(let details)? = error["details"] {
                for detail in details {
                    if errorCode == nil, let code = detail["errorCode"]?.stringValue { errorCode = code }
                    if case .array(let violations)? = detail["fieldViolations"] {
                        for violation in violations {
                            if let field = violation["field"]?.stringValue, field == "message.token" || field == "token" {
                                namesToken = true
                            }
                        }
                    }
                }
            }
            if let message, message.localizedCaseInsensitiveContainsRegistrationToken() { namesToken = true }
        }
    }

    /// Classifies an answer. 2xx is delivered. A known `errorCode` by the table (`INVALID_ARGUMENT` becomes
    /// token-invalid when the answer names the registration token); an unknown `errorCode` and no `errorCode`
    /// by the canonical status and the HTTP status: 401 credentials, 429 retry-after-delay, 5xx retryable,
    /// anything else permanent (never token-invalid without FCM saying so).
    public static func classify(status: Int, body: ErrorBody) -> ResponseClass {
        if (200..<300).contains(status) { return .delivered }
        if let errorCode = body.errorCode, let entry = byCode[errorCode] {
            if errorCode == "INVALID_ARGUMENT" && body.namesToken { return .tokenInvalid }
            return entry.classification
        }
        switch status {
        case 401: return .credentials
        case 429: return .retryAfterDelay
        case 500...599: return .retryable
        default: return .permanent
        }
    }

    /// The reason kept on the outcome: the FCM `errorCode`, else the canonical status, else nil.
    public static func reason(_ body: ErrorBody) -> String? { body.errorCode ?? body.status }

    /// The error code of a rejected answer (`fcm/<code>`, `fcm/unknown-error-code`, `fcm/no-error-code`).
    public static func code(status: Int, body: ErrorBody) -> NorqError.Code? {
        if (200..<300).contains(status) { return nil }
        guard let errorCode = body.errorCode else { return noErrorCode }
        return byCode[errorCode]?.code ?? unknownErrorCode
    }

    /// The delay before a retry: the server's `Retry-After` (delta-seconds or an HTTP-date, read against
    /// `now`), raised to the error code's minimum (60 s for `QUOTA_EXCEEDED`, with or without `Retry-After`).
    public static func retryDelay(retryAfter header: String?, errorCode: String?, now: Int64) -> Duration? {
        let given = header.flatMap { FCMRetryAfter.parse($0, now: now) }
        let minimum = errorCode.flatMap { byCode[$0]?.minimumRetryDelay }
        switch (given, minimum) {
        case (let given?, let minimum?): return max(given, minimum)
        case (let given?, nil): return given
        case (nil, let minimum?): return minimum
        case (nil, nil): return nil
        }
    }
}

extension String {
    fileprivate func localizedCaseInsensitiveContainsRegistrationToken() -> Bool {
        let lower = lowercased()
        return lower.contains("registration token") || lower.contains("invalid registration")
    }
}

/// `Retry-After` (RFC 9110 §10.2.3): delta-seconds or an HTTP-date.
public enum FCMRetryAfter {
    /// The delay a `Retry-After` value asks for at `now` (epoch seconds); nil when malformed. A date in the past is 0.
    public static func parse(_ text: String, now: Int64) -> Duration? {
        let trimmed = text.trimmingWhitespace()
        if let seconds = Int64(trimmed) { return seconds >= 0 ? .seconds(seconds) : nil }
        guard let date = httpDate(trimmed) else { return nil }
        return .seconds(max(0, date - now))
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT` as epoch seconds.
    public static func httpDate(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT",
              let day = Int64(parts[1]), let monthIndex = months.firstIndex(of: String(parts[2])),
              let year = Int64(parts[3]) else { return nil }
        let time = parts[4].split(separator: ":")
        guard time.count == 3, let hour = Int64(time[0]), let minute = Int64(time[1]), let second = Int64(time[2]),
              (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        // Days from the civil date (Howard Hinnant's algorithm).
        let month = Int64(monthIndex + 1)
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return days * 86_400 + hour * 3600 + minute * 60 + second
    }
}

extension FCMResponseTable {
    /// `"name"`, made once (an array per answer otherwise).
    private static let nameKey = Array(#""name""#.utf8)

    /// The `name` of a success body (`{"name": "projects/<id>/messages/<id>"}`): read by a scan of FCM's one-key
    /// answer when the value has no escapes (every answer FCM sends), else by a full parse. Nil without one.
    static func messageName(in body: [UInt8]) -> String? {
        let key = nameKey
        if body.count <= 4096, let start = body.scan(for: key)?.upperBound {
            var index = start
            while index < body.count, body[index] == 32 || body[index] == 10 || body[index] == 13 || body[index] == 9 {
                index += 1
            }
            if index < body.count, body[index] == UInt8(ascii: ":") {
                index += 1
                while index < body.count, body[index] == 32 || body[index] == 10 || body[index] == 13 || body[index] == 9 {
                    index += 1
                }
                if index < body.count, body[index] == UInt8(ascii: "\""),
                   let end = body[(index + 1)...].firstIndex(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }),
                   body[end] == UInt8(ascii: "\""),
                   body.scan(for: key, in: (end + 1)..<body.count) == nil {
                    return String(decoding: body[(index + 1)..<end], as: UTF8.self)
                }
            }
        }
        return (try? JSONValue(parsing: body))?["name"]?.stringValue
    }
}

private extension Array where Element == UInt8 {
    func scan(for needle: [UInt8], in range: Range<Int>? = nil) -> Range<Int>? {
        let bounds = range ?? 0..<count
        guard !needle.isEmpty, bounds.count >= needle.count else { return nil }
        var start = bounds.lowerBound
        while start + needle.count <= bounds.upperBound {
            if self[start] == needle[0], self[start..<(start + needle.count)].elementsEqual(needle) {
                return start..<(start + needle.count)
            }
            start += 1
        }
        return nil
    }
}
