public import NorqCore

extension NorqError.Code {
    /// No `Authorization: Bearer <key>` header, or a key that is not configured (401).
    public static let serverUnauthorized: Self = "server/unauthorized"
    /// The API key may not use this template or provider (403).
    public static let serverForbidden: Self = "server/forbidden"
    /// The API key sent more requests than its rate allows (429, with `Retry-After`).
    public static let serverRateLimited: Self = "server/rate-limited"
    /// The request body is larger than `server.limits.bodyBytes` (413).
    public static let serverBodyTooLarge: Self = "server/body-too-large"
    /// A send names more targets than `server.limits.recipients` (413).
    public static let serverTooManyRecipients: Self = "server/too-many-recipients"
    /// The body is not the JSON the route takes: malformed, a missing or unknown field, a wrong type (400).
    public static let serverInvalidRequest: Self = "server/invalid-request"
    /// The body is not `application/json` (415).
    public static let serverUnsupportedMediaType: Self = "server/unsupported-media-type"
    /// No route at this path (404).
    public static let serverNotFound: Self = "server/not-found"
    /// The same `Idempotency-Key` is being accepted by another request right now (409).
    public static let serverIdempotencyInProgress: Self = "server/idempotency-in-progress"
    /// A named sample that the template does not have (422).
    public static let serverUnknownSample: Self = "server/unknown-sample"
    /// `/readyz`: the store does not answer, no provider is loaded, or a provider is not ready (503).
    public static let serverNotReady: Self = "server/not-ready"
    /// The server refuses to start: no API keys without `--no-auth`, or `--no-auth` on a non-loopback address.
    public static let serverInsecure: Self = "server/insecure"
    /// The server could not listen on its address (in use, not permitted).
    public static let serverBindFailed: Self = "server/bind-failed"
    /// `server.tls`: the certificate chain or private key could not be read or used (the message names the file,
    /// never key material).
    public static let serverInvalidTLS: Self = "server/invalid-tls"
}

extension NorqError {
    /// The HTTP status an error answers with: client mistakes are 4xx, an unavailable store 503; never 500 for
    /// anything the caller sent.
    package var httpStatus: Int {
        switch code {
        case .serverUnauthorized: 401
        case .serverForbidden: 403
        case .serverNotFound, .storeSendNotFound: 404
        case .serverIdempotencyInProgress: 409
        case .serverBodyTooLarge, .serverTooManyRecipients: 413
        case .serverUnsupportedMediaType: 415
        case .serverRateLimited: 429
        case .serverInvalidRequest, .invalidJSON: 400
        case .serverNotReady: 503
        case .serverUnknownSample: 422
        default:
            switch code.area {
            case "store", "provider": 503
            case "server": 400
            // template, push, routing, apns, idempotency, token, config, cli: what the caller sent is wrong
            default: 422
            }
        }
    }
}
