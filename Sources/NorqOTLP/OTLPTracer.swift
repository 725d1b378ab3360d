public import Tracing
package import NorqSpanAttributes

/// Norq's OpenTelemetry tracer (issue 33): spans of swift-distributed-tracing, W3C `traceparent`/`tracestate`
/// propagation, the `ParentBased(TraceIdRatioBased)` sampler, exported over OTLP/HTTP (protobuf) by an
/// ``OTLPExporter`` (run it in the service group).
///
/// Built for a server that makes a few spans per request at thousands of requests a second: a span is one object
/// with a lock, and its `context` is made only when asked for; ending it encodes it into the exporter's bounded
/// buffer (``OTLPExporter/Configuration/maxQueueSize`` spans, about ``OTLPExporter/Configuration/maxQueueBytes``
/// bytes; beyond either spans are dropped and counted) without a task hop; the exporter sends the bytes in batches.
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
        return startSpan(operationName, in: context, parent: context.otlpSpanContext, ofKind: kind,
                         at: instant().nanosecondsSinceEpoch)
    }

    /// A span of `kind` in `context` (its base: see ``OTLPSpan/context``), a child of `parent` (nil: a new trace's
    /// root), started at `start` (nanoseconds since the epoch; read only when the span is sampled).
    private func startSpan(_ operationName: String, in context: InstrumentationContext, parent: OTLPSpanContext?,
                           ofKind kind: SpanKind, at start: @autoclosure () -> UInt64) -> OTLPSpan {
        let (high, low, spanID): (UInt64, UInt64, UInt64) = if let parent {
            (parent.traceIDHigh, parent.traceIDLow, ids.next())
        } else {
            (ids.next(), ids.next(), ids.next())
        }
        let sampled = sampler.isSampled(parent: parent, traceIDLow: low)
        let own = OTLPSpanContext(traceIDHigh: high, traceIDLow: low, spanID: spanID, sampled: sampled,
                                  traceState: parent?.traceState)
        return OTLPSpan(operationName: operationName, kind: kind, context: context, spanContext: own,
                        parentSpanID: parent?.spanID ?? 0, startNanoseconds: sampled ? start() : 0,
                        sink: sampled ? buffer : nil)
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

extension OTLPTracer: SpanAttributeListTracer {
    package func end(_ span: any Tracing.Span, operationName: String?, attributes list: SpanAttributeList,
                     status: SpanStatus?) -> Bool {
        guard let span = span as? OTLPSpan else { return false }
        span.end(operationName: operationName, attributes: list, status: status)
        return true
    }

    /// The child's base context is the one `parent` was started in: its `context` is then what it would be had it
    /// been started in `parent.context`, which is not made (the OTLP span context, the only value that differs,
    /// is the child's own either way).
    package func startSpan(_ operationName: String, childOf parent: any Tracing.Span,
                           ofKind kind: SpanKind) -> (any Tracing.Span)? {
        guard let parent = parent as? OTLPSpan else { return nil }
        return startSpan(operationName, in: parent.baseContext, parent: parent.spanContext, ofKind: kind,
                         at: DefaultTracerClock.now.nanosecondsSinceEpoch)
    }
}
