package import Tracing

/// One of Norq's spans as a value (no span object): its name, kind, identity in its trace (the ids as W3C Trace
/// Context carries them), its parent's span id and when it started. Made by a ``SpanValueTracer`` (Norq's OTLP
/// tracer), which records it when it ends (``SpanValueTracer/end(_:operationName:attributes:status:)``), once.
///
/// Norq makes four spans a send (the API request's, `norq.enqueue`, `norq.claim`, `norq.attempt`) at thousands of
/// sends a second, and knows each one's whole life: it sets its attributes once, at its end, never reads them back,
/// and starts children only of the request's and the claim's span. A span object of swift-distributed-tracing costs
/// each of them an allocation, a lock, a dynamic cast and reference-counted existential copies on the way; a value
/// costs none of these. Any other tracer's spans (swift-otel, a test's) are objects, as before
/// (``SpanAttributeRecorder`` chooses).
package struct SpanValue: Sendable {
    package var operationName: String
    package var kind: SpanKind
    /// The trace id's high and low 8 bytes and the span's id (never zero).
    package var traceIDHigh: UInt64
    package var traceIDLow: UInt64
    package var spanID: UInt64
    /// The parent's span id (0: a root span).
    package var parentSpanID: UInt64
    /// Whether the trace is recorded (W3C's `sampled` flag): a span that is not only carries its context.
    package var isSampled: Bool
    /// The W3C `tracestate` of the trace, as received.
    package var traceState: String?
    /// When the span started, in nanoseconds since the epoch (0 when not sampled).
    package var startNanoseconds: UInt64

    package init(operationName: String, kind: SpanKind, traceIDHigh: UInt64, traceIDLow: UInt64, spanID: UInt64,
                 parentSpanID: UInt64, isSampled: Bool, traceState: String?, startNanoseconds: UInt64) {
        self.operationName = operationName
        self.kind = kind
        self.traceIDHigh = traceIDHigh
        self.traceIDLow = traceIDLow
        self.spanID = spanID
        self.parentSpanID = parentSpanID
        self.isSampled = isSampled
        self.traceState = traceState
        self.startNanoseconds = startNanoseconds
    }
}

/// A tracer that makes Norq's spans as values (``SpanValue``) and records them with their attributes as a
/// ``SpanAttributeList``, name and status in one call when they end: Norq's OTLP tracer. Its spans made through
/// `Tracer.startSpan` stay objects, for any other caller.
package protocol SpanValueTracer: Tracer {
    /// A span started at `start` (nanoseconds since the epoch; nil: now), a child of the span `context` names (a new
    /// trace's root when it names none), decided sampled or not as `startSpan(_:context:ofKind:)` would.
    func startSpanValue(_ operationName: String, context: InstrumentationContext, ofKind kind: SpanKind,
                        at start: UInt64?) -> SpanValue

    /// A span started now, a child of `parent` (in its trace, sampled as it is).
    func startSpanValue(_ operationName: String, childOf parent: SpanValue, ofKind kind: SpanKind) -> SpanValue

    /// `base` with `span` as its current span: what `span.context` would be for a span object started in `base`
    /// (its children, and what `inject` writes of it).
    func context(of span: SpanValue, in base: InstrumentationContext) -> InstrumentationContext

    /// Ends `span` now and records it (when sampled) with the attributes in `list`, renamed `operationName` and with
    /// `status` when those are not nil. A value is ended once: ending a copy again records it again.
    func end(_ span: SpanValue, operationName: String?, attributes list: SpanAttributeList, status: SpanStatus?)
}
