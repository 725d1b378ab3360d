/// Whether a failed export is tried again (pure; OTLP/HTTP's rules): a transport failure, 429, 502, 503 and 504 are
/// retried after a doubling delay (0.5 s, 1 s, ...) while attempts remain and the delay ends before the batch's
/// deadline; any other status, or running out, drops the batch (counted). 2xx is success.
public struct OTLPExportPolicy: Sendable, Hashable {
    /// Attempts per batch, the first included.
    public var maxAttempts: Int = 3
    /// The delay before the second attempt (doubled for each later one).
    public var initialBackoff: Duration = .milliseconds(500)

    public init(maxAttempts: Int = 3, initialBackoff: Duration = .milliseconds(500)) {
        self.maxAttempts = max(1, maxAttempts)
        self.initialBackoff = initialBackoff
    }

    /// What comes after an attempt.
    public enum Decision: Sendable, Hashable {
        case done
        case retry(after: Duration)
        case drop
    }

    /// The decision after attempt `attempt` (1-based) answered `status` (nil: no answer, a transport failure), with
    /// `remaining` left before the batch's deadline.
    public func decision(status: Int?, attempt: Int, remaining: Duration) -> Decision {
        if let status, (200..<300).contains(status) { return .done }
        let retryable = status.map { [429, 502, 503, 504].contains($0) } ?? true
        guard retryable, attempt < maxAttempts else { return .drop }
        let delay = initialBackoff * (1 << min(attempt - 1, 16))
        return delay < remaining ? .retry(after: delay) : .drop
    }
}
