public import Tracing
package import NorqSpanAttributes

/// Norq's OpenTelemetry tracer (issue 33): spans of swift-distributed-tracing, W3C `traceparent`/`tracestate`
/// propagation, the `ParentBased(TraceIdRatioBased)` sampler, exported over OTLP/HTTP (protobuf) by an
/// ``OTLPExporter`` (run it in the service group).
///
/// Built for a server that makes a few spans per request at thousands of requests a second: a span is one object
/// with a lock, and its `context` is made only when asked for; Norq's own spans are values, with no object at all
/// (``SpanValue``). Ending a span encodes it into the exporter's bounded buffer
/// (``OTLPExporter/Configuration/maxQueueSize`` spans, about ``OTLPExporter/Configuration/maxQueueBytes`` bytes;
/// beyond either spans are dropped and counted) without a task hop; the exporter sends the bytes in batches.
/// Ids come from one atomic counter (SplitMix64), so spans started on many threads never wait for each other.
public final class OTLPTracer: Tracer, Sendable {
    public typealias Span = OTLPSpan

    let sampler: OTLPSampler
    let buffer: OTLPSpanBuffer
    private let ids: OTLPIDSource

    /// A tracer whose recorded spans `exporter` sends.
    public init(sampler: OTLPSampler, exporter: OTLPExporter) {
        self.sampler = sampler
        self.buffer = exporter.buffer
        self.ids = OTLPIDSource()
    }

    public func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> InstrumentationContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> OTLPSpan {
        let context = context()
        let span = startSpanValue(operationName, parent: context.otlpSpanContext, ofKind: kind,
                                  at: instant().nanosecondsSinceEpoch)
        return OTLPSpan(operationName: operationName, kind: kind, context: context, spanContext: OTLPSpanContext(span),
                        parentSpanID: span.parentSpanID, startNanoseconds: span.startNanoseconds,
                        sink: span.isSampled ? buffer : nil)
    }

    /// A span of `kind`, a child of `parent` (nil: a new trace's root), started at `start` (nanoseconds since the
    /// epoch; read only when the span is sampled): its ids and sampling decision, for a span object or a value.
    private func startSpanValue(_ operationName: String, parent: OTLPSpanContext?, ofKind kind: SpanKind,
                                at start: @autoclosure () -> UInt64) -> SpanValue {
        let (high, low, spanID): (UInt64, UInt64, UInt64) = if let parent {
            (parent.traceIDHigh, parent.traceIDLow, ids.next())
        } else {
            (ids.next(), ids.next(), ids.next())
        }
        let sampled = sampler.isSampled(parent: parent, traceIDLow: low)
        return SpanValue(operationName: operationName, kind: kind, traceIDHigh: high, traceIDLow: low, spanID: spanID,
                         parentSpanID: parent?.spanID ?? 0, isSampled: sampled, traceState: parent?.traceState,
                         startNanoseconds: sampled ? start() : 0)
    }

    /// Asks the exporter to send what it holds now.
    public func forceFlush() { buffer.requestFlush() }

    public func inject<Carrier, Inject: Injector>(_ context: InstrumentationContext, into carrier: inout Carrier,
                                                  using injector: Inject) where Inject.Carrier == Carrier {
        guard let span = context.otlpSpanContext else { return }
        injector.inject(span.traceparent, forKey: "traceparent", into: &carrier)
        if let state = span.traceState { injector.inject(state, forKey: "tracestate", into: &carrier) }
    }

    public func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout InstrumentationContext,
                                                     using extractor: Extract) where Extract.Carrier == Carrier {
        guard let value = extractor.extract(key: "traceparent", from: carrier),
              let span = OTLPSpanContext(traceparent: value,
                                         traceState: extractor.extract(key: "tracestate", from: carrier)) else { return }
        context.otlpSpanContext = span
    }
}

extension OTLPTracer: SpanValueTracer {
    package func startSpanValue(_ operationName: String, context: InstrumentationContext, ofKind kind: SpanKind,
                                at start: UInt64?) -> SpanValue {
        startSpanValue(operationName, parent: context.otlpSpanContext, ofKind: kind,
                       at: start ?? DefaultTracerClock.now.nanosecondsSinceEpoch)
    }

    package func startSpanValue(_ operationName: String, childOf parent: SpanValue, ofKind kind: SpanKind) -> SpanValue {
        startSpanValue(operationName, parent: OTLPSpanContext(parent), ofKind: kind,
                       at: DefaultTracerClock.now.nanosecondsSinceEpoch)
    }

    package func context(of span: SpanValue, in base: InstrumentationContext) -> InstrumentationContext {
        var context = base
        context.otlpSpanContext = OTLPSpanContext(span)
        return context
    }

    /// Encodes the span into the exporter's buffer (when sampled), without a span object: the list is encoded as
    /// it is, in order.
    package func end(_ span: SpanValue, operationName: String?, attributes list: SpanAttributeList, status: SpanStatus?) {
        guard span.isSampled else { return }
        let end = DefaultTracerClock.now.nanosecondsSinceEpoch
        buffer.append(OTLPFinishedSpan(context: OTLPSpanContext(span), parentSpanID: span.parentSpanID,
                                       name: operationName ?? span.operationName, kind: span.kind,
                                       startNanoseconds: span.startNanoseconds,
                                       endNanoseconds: max(end, span.startNanoseconds), attributes: [:],
                                       attributeList: list, events: [], links: [], status: status,
                                       droppedEvents: 0, droppedLinks: 0))
    }
}

extension OTLPSpanContext {
    /// The context of a span made as a value.
    init(_ span: SpanValue) {
        self.init(traceIDHigh: span.traceIDHigh, traceIDLow: span.traceIDLow, spanID: span.spanID,
                  sampled: span.isSampled, traceState: span.traceState)
    }
}
