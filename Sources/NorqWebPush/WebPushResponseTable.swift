public import NorqCore
import Foundation

/// How a push service's answer is classified (RFC 8030 §5, Mozilla autopush, Apple, FCM web endpoints): the one
/// table of Web Push answers.
///
/// | status | class | |
/// |---|---|---|
/// | 201, 202 (any 2xx) | delivered | message id = `Location` |
/// | 404, 410 | token-invalid | invalid-token event: drop the subscription |
/// | 413 | permanent | the payload is too large for this service |
/// | 429 | retry-after-delay | `Retry-After` honoured |
/// | 5xx | retryable | `Retry-After` honoured |
/// | 401, 403 | credentials-problem | VAPID missing, invalid or not the key the subscription is bound to: a provider problem, never a deletion |
/// | 3xx | permanent | redirects are never followed (SSRF guard) |
/// | other 4xx (400 …) | permanent | the service's reason is kept |
public enum WebPushResponseTable {
    public static func classify(status: Int) -> ResponseClass {
        switch status {
        case 200...299: return .delivered
        case 404, 410: return .tokenInvalid
        case 401, 403: return .credentials
        case 429: return .retryAfterDelay
        case 500...599: return .retryable
        default: return .permanent
        }
    }

    /// The reason recorded for an answer: `NotFound` / `Gone` for 404 / 410 (the invalid-token event's reason);
    /// otherwise the service's own words: JSON `reason` (Apple), `message` or `error` (Mozilla autopush), else the
    /// start of a text body, else the HTTP reason phrase.
    public static func reason(status: Int, body: [UInt8]) -> String? {
        if (200...299).contains(status) { return nil }
        if status == 404 { return "NotFound" }
        if status == 410 { return "Gone" }
        if !body.isEmpty {
            if let json = try? JSONValue(parsing: body) {
                for key in ["reason", "message", "error"] {
                    if let text = json[key]?.stringValue, !text.isEmpty { return String(text.prefix(200)) }
                }
            } else if body.count <= 4096, let text = String(validating: body, as: UTF8.self) {
                let trimmed = text.trimmingWhitespace()
                if !trimmed.isEmpty { return String(trimmed.prefix(200)) }
            }
        }
        return phrase(status)
    }

    static func phrase(_ status: Int) -> String {
        switch status {
        case 300...399: return "Redirect (not followed)"
        case 400: return "BadRequest"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 413: return "PayloadTooLarge"
        case 429: return "TooManyRequests"
        case 500: return "InternalServerError"
        case 502: return "BadGateway"
        case 503: return "ServiceUnavailable"
        case 504: return "GatewayTimeout"
        default: return "HTTP \(status)"
        }
    }

    /// `Retry-After` as delta seconds or an HTTP-date (relative to `now`, epoch seconds); nil when absent or
    /// unreadable. Capped at one hour.
    public static func retryAfter(_ value: String?, now: Int64) -> Duration? {
        guard let value = value?.trimmingWhitespace(), !value.isEmpty else { return nil }
        if let seconds = Int64(value) { return .seconds(min(max(seconds, 0), 3600)) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: value) else { return nil }
        let delta = Int64(date.timeIntervalSince1970) - now
        return .seconds(min(max(delta, 0), 3600))
    }

    /// A classified `DeliveryResponse` for a push service's answer.
    public static func interpret(status: Int, headers: [HTTPHeader], body: [UInt8], now: Int64) -> DeliveryResponse {
        let retryAfter = (status == 429 || status >= 500)
            ? retryAfter(headers.first(where: { $0.name == "retry-after" })?.value, now: now) : nil
        return DeliveryResponse(
            status: status, headers: headers, body: body,
            messageID: (200...299).contains(status) ? headers.first(where: { $0.name == "location" })?.value : nil,
            reason: reason(status: status, body: body), retryAfter: retryAfter,
            classification: classify(status: status))
    }
}
