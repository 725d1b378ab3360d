package import Tracing

/// One of Norq's spans: a value for a ``SpanValueTracer`` (Norq's OTLP tracer), a span object of any other tracer.
package struct NorqSpan: Sendable {
    package enum Storage: Sendable {
        case value(SpanValue)
        case object(any Tracing.Span)
    }

    package let storage: Storage

    package init(_ storage: Storage) { self.storage = storage }

    /// Whether the span records what it is given (its trace is sampled): when not, its attributes need not be made.
    package var isRecording: Bool {
        switch storage {
        case .value(let value): value.isSampled
        case .object(let span): span.isRecording
        }
    }
}

/// How Norq makes and ends its spans with a tracer, decided once for the tracer (a conformance check costs about
/// 100 ns, too much to make per span): as values (``SpanValue``) with a ``SpanValueTracer``, ended with their
/// ``SpanAttributeList`` in one call; as span objects of `Tracer.startSpan` with any other tracer, given the same
/// attributes as `SpanAttributes`, name and status, and ended. Either way the tracer sees the same spans.
///
/// A class: it is copied along with every attempt's span, and a copy is one reference, not two existentials.
package final class SpanAttributeRecorder: Sendable {
    package let tracer: any Tracer
    private let valueTracer: (any SpanValueTracer)?

    package init(tracer: any Tracer) {
        self.tracer = tracer
        self.valueTracer = tracer as? any SpanValueTracer
    }

    /// Whether this tracer's spans are values (``SpanValue``): keeping one is as good as keeping its context.
    package var makesSpanValues: Bool { valueTracer != nil }

    /// A span started at `start` (nil: now), a child of the span `context` names.
    package func startSpan(_ operationName: String, context: InstrumentationContext, ofKind kind: SpanKind,
                           at start: DefaultTracerClock.Instant? = nil) -> NorqSpan {
        if let valueTracer {
            return NorqSpan(.value(valueTracer.startSpanValue(operationName, context: context, ofKind: kind,
                                                              at: start?.nanosecondsSinceEpoch)))
        }
        if let start { return NorqSpan(.object(tracer.startSpan(operationName, context: context, ofKind: kind, at: start))) }
        return NorqSpan(.object(tracer.startSpan(operationName, context: context, ofKind: kind)))
    }

    /// A span started now, a child of `parent` (a span of this recorder's).
    package func startSpan(_ operationName: String, childOf parent: NorqSpan, ofKind kind: SpanKind) -> NorqSpan {
        switch parent.storage {
        case .value(let value):
            if let valueTracer { return NorqSpan(.value(valueTracer.startSpanValue(operationName, childOf: value, ofKind: kind))) }
            return startSpan(operationName, context: .topLevel, ofKind: kind)  // not this recorder's span
        case .object(let span):
            return startSpan(operationName, context: span.context, ofKind: kind)
        }
    }

    /// The context whose current span is `span`, started in `base`: what its children and `inject` see.
    package func context(of span: NorqSpan, in base: InstrumentationContext) -> InstrumentationContext {
        switch span.storage {
        case .value(let value): valueTracer?.context(of: value, in: base) ?? base
        case .object(let span): span.context
        }
    }

    /// Ends `span` with the attributes in `list`, renamed `operationName` and with `status` when those are not nil:
    /// in one call for a value, as the three calls and `end()` for an object (whose attributes `list` replaces).
    package func end(_ span: NorqSpan, operationName: String? = nil, attributes list: SpanAttributeList,
                     status: SpanStatus? = nil) {
        switch span.storage {
        case .value(let value):
            valueTracer?.end(value, operationName: operationName, attributes: list, status: status)
        case .object(let span):
            if let operationName { span.operationName = operationName }
            span.attributes = list.spanAttributes
            if let status { span.setStatus(status) }
            span.end()
        }
    }

    /// Ends `span` with nothing more (a span that does not record: ``NorqSpan/isRecording``).
    package func end(_ span: NorqSpan) {
        switch span.storage {
        case .value(let value):
            if value.isSampled { valueTracer?.end(value, operationName: nil, attributes: SpanAttributeList(), status: nil) }
        case .object(let span): span.end()
        }
    }
}
