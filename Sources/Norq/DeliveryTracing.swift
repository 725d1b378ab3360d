import Tracing
import NorqCore
import NorqSpanAttributes

// Spans of delivery (issue 33): `norq.enqueue` (a durable send committed), `norq.claim` (a worker took rows of a
// send), `norq.attempt` (one provider attempt, durable or in memory). The trace context of a durable send is
// stored with it (`DurableCodec.StoredPlan.trace`: what the tracer injects, W3C `traceparent`/`tracestate` for
// OpenTelemetry), so the worker that claims its rows, in any instance, continues the caller's trace. Attributes name
// the provider, the status and the outcome; never a token, a channel id, a key or a body.

/// The names and attribute keys of Norq's spans (stable: dashboards and tests read them).
enum DeliveryTracing {
    static let enqueueSpan = "norq.enqueue"
    static let claimSpan = "norq.claim"
    static let attemptSpan = "norq.attempt"

    /// Bounds on a stored trace context: entries, and bytes of a key or a value (W3C `traceparent` is 55 bytes,
    /// `tracestate` at most 512).
    static let maximumEntries = 8
    static let maximumKeyBytes = 64
    static let maximumValueBytes = 512

    /// What `tracer` injects for `context` (nil when nothing), bounded, as stored with a send.
    static func carrier(of context: InstrumentationContext, tracer: any Tracer) -> [String: String]? {
        var carrier: [String: String] = [:]
        tracer.inject(context, into: &carrier, using: DictionaryInjector())
        return carrier.isEmpty ? nil : carrier
    }

    /// The context a stored carrier names (extracted by `tracer`), or nil when there is none.
    static func context(from carrier: [String: String]?, tracer: any Tracer) -> InstrumentationContext? {
        guard let carrier, !carrier.isEmpty else { return nil }
        var context = InstrumentationContext.topLevel
        tracer.extract(carrier, into: &context, using: DictionaryExtractor())
        return context
    }

    /// The parent of an attempt's span: the context of the send's caller (an attempt in memory), or the claim's span
    /// (a durable attempt). A span that is a value (``SpanAttributeRecorder/makesSpanValues``) is kept as it is; of
    /// any other tracer, its context (made once per claim, not per attempt).
    enum Parent: Sendable {
        case context(InstrumentationContext)
        case span(NorqSpan)

        /// What an attempt whose parent is `span` keeps of it.
        init(_ span: NorqSpan, recorder: SpanAttributeRecorder) {
            self = recorder.makesSpanValues ? .span(span) : .context(recorder.context(of: span, in: .topLevel))
        }
    }

    /// An attempt's span and what was known when it started, made into its attributes with the answer's, in one
    /// list sized once, when it ends (``endAttempt(_:answer:step:)``).
    struct AttemptSpan: Sendable {
        let span: NorqSpan
        let recorder: SpanAttributeRecorder
        let provider: String
        let position: Int
        let attempt: Int
        /// The token's platform; nil for a channel.
        let platform: String?
        let sendID: String?
    }

    /// Starts the span of one provider attempt; nil when `router` does not trace.
    static func startAttempt(_ router: NotificationRouter, parent: Parent?, job: DeliveryJob,
                             attempt: Int, sendID: String? = nil) -> AttemptSpan? {
        guard let recorder = router.spanRecorder else { return nil }
        let span: NorqSpan = switch parent {
        case .span(let claim): recorder.startSpan(attemptSpan, childOf: claim, ofKind: .client)
        case .context(let context): recorder.startSpan(attemptSpan, context: context, ofKind: .client)
        case nil: recorder.startSpan(attemptSpan, context: .topLevel, ofKind: .client)
        }
        let platform: String? = switch job.target {
        case .token(let token): token.platform.rawValue
        case .channel: nil
        }
        return AttemptSpan(span: span, recorder: recorder, provider: job.provider.name, position: job.position,
                           attempt: attempt, platform: platform, sendID: sendID)
    }

    /// The most attributes an attempt's span has: six from its start, three from its end.
    static let attemptAttributeCapacity = 9

    /// Ends an attempt's span with what came of it: the status code, the outcome kind (`delivered`, `accepted`,
    /// `rejected`, `failed`, `skipped`, `retry`) and the error code (provider reason codes and Norq codes, never a
    /// token).
    static func endAttempt(_ attempt: AttemptSpan, answer: Result<DeliveryResponse, NorqError>,
                           step: NotificationRouter.AttemptStep) {
        let span = attempt.span
        guard span.isRecording else { attempt.recorder.end(span); return }
        var attributes = SpanAttributeList(capacity: attemptAttributeCapacity)
        attributes.add("norq.provider", .string(attempt.provider))
        attributes.add("norq.target.position", .int(Int64(attempt.position)))
        attributes.add("norq.attempt", .int(Int64(attempt.attempt)))
        if let platform = attempt.platform {
            attributes.add("norq.target.kind", .string("token"))
            attributes.add("norq.platform", .string(platform))
        } else {
            attributes.add("norq.target.kind", .string("channel"))
        }
        if let sendID = attempt.sendID { attributes.add("norq.send.id", .string(sendID)) }
        // The error code: the outcome's when it has one, else the failed answer's.
        var errorCode: String?
        switch answer {
        case .success(let response):
            attributes.add("http.response.status_code", .int(Int64(response.status)))
        case .failure(let error):
            errorCode = error.code.rawValue
        }
        var failed = false
        switch step {
        case .done(let result, _):
            let kind = outcomeKind(result)
            attributes.add("norq.outcome", .string(kind.name))
            if let code = kind.code { errorCode = code }
            failed = kind.isError
        case .retry(let delay, _, _, _):
            attributes.add("norq.outcome", .string("retry"))
            attributes.add("norq.retry.delay_ms", .int(delay.components.seconds * 1000
                                                                 + delay.components.attoseconds / 1_000_000_000_000_000))
        }
        if let errorCode { attributes.add("norq.error.code", .string(errorCode)) }
        attempt.recorder.end(span, attributes: attributes, status: failed ? SpanStatus(code: .error) : nil)
    }

    /// The outcome's kind for the `norq.outcome` attribute, its error code, and whether the span failed.
    static func outcomeKind(_ result: PushOutcome.Result) -> (name: String, code: String?, isError: Bool) {
        switch result {
        case .delivered(let delivered): (delivered.accepted ? "accepted" : "delivered", nil, false)
        case .rejected(let rejected): ("rejected", rejected.code.rawValue, true)
        case .failed(let error): ("failed", error.code.rawValue, true)
        case .skipped(let skipped): ("skipped", skipped.code.rawValue, false)
        case .duplicate(let first): outcomeKind(first)
        }
    }
}

/// Writes a tracer's context into a stored carrier, bounded (``DeliveryTracing/maximumEntries`` and the byte
/// bounds: an entry beyond them is left out).
struct DictionaryInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) {
        guard carrier.count < DeliveryTracing.maximumEntries || carrier[key] != nil,
              key.utf8.count <= DeliveryTracing.maximumKeyBytes,
              value.utf8.count <= DeliveryTracing.maximumValueBytes else { return }
        carrier[key] = value
    }
}

/// Reads a tracer's context from a stored carrier.
struct DictionaryExtractor: Extractor {
    func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
}
