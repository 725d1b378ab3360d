import Metrics

/// swift-metrics instruments of the FCM provider (labels carry the instance name and a bounded result, never a
/// token or a key).
enum FCMMetrics {
    /// OAuth token requests by instance and result (`ok`, `refused`, `transport`).
    static func tokenRequest(provider: String, result: String) {
        Counter(label: "norq_fcm_token_requests_total", dimensions: [("provider", provider), ("result", result)]).increment()
    }

    /// Sends refused with 401 `UNAUTHENTICATED` by instance, and whether the renewed token was refused again.
    static func unauthenticated(provider: String, repeated: Bool) {
        Counter(label: "norq_fcm_unauthenticated_total",
                dimensions: [("provider", provider), ("repeated", repeated ? "true" : "false")]).increment()
    }
}
