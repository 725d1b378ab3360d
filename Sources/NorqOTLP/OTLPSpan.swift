public import Tracing
import NorqSpanAttributes
import Synchronization

/// A span that has ended, as the exporter encodes it.
struct OTLPFinishedSpan: Sendable {
    var context: OTLPSpanContext
    /// The parent's span id (0: a root span).
    var parentSpanID: UInt64
    var name: String
    var kind: SpanKind
    var startNanoseconds: UInt64
    var endNanoseconds: UInt64
    /// The span's attributes: those of a span object as `SpanAttributes`, those of a ``SpanValue`` as Norq's list (one
    /// of the two is empty).
    var attributes: SpanAttributes
    var attributeList: SpanAttributeList
    var events: [SpanEvent]
    var links: [(context: OTLPSpanContext, attributes: SpanAttributes)]
    var status: SpanStatus?
    /// Events and links beyond the bounds (counted, not kept).
    var droppedEvents: Int
    var droppedLinks: Int
}

/// A span of ``OTLPTracer``. A recorded span (its trace sampled) keeps its name, attributes, status, events (at most
/// ``maximumEvents``) and links (at most ``maximumLinks``) under a lock and hands them to the exporter once, when it
/// ends; a span of an unsampled trace only carries its context (for propagation) and records nothing.
public final class OTLPSpan: Span, Sendable {
    /// Bounds on what one span keeps (beyond them, counted as dropped in the export).
    public static let maximumEvents = 32
    public static let maximumLinks = 32

    private struct State {
        var operationName: String
        var attributes: SpanAttributes = [:]
        var status: SpanStatus?
        var events: [SpanEvent] = []
        var links: [(context: OTLPSpanContext, attributes: SpanAttributes)] = []
        var droppedEvents = 0
        var droppedLinks = 0
        var ended = false
    }

    /// The context the span was started in; ``context`` replaces its OTLP span context with the span's own.
    let baseContext: InstrumentationContext
    let spanContext: OTLPSpanContext
    let parentSpanID: UInt64
    let kind: SpanKind
    let startNanoseconds: UInt64
    /// Nil for a span that records nothing.
    private let sink: OTLPSpanBuffer?
    private let state: Mutex<State>
    /// Whether the span has ended (read without the lock by ``isRecording``, which callers ask on every update).
    private let ended: Atomic<Bool>

    init(operationName: String, kind: SpanKind, context: InstrumentationContext, spanContext: OTLPSpanContext,
         parentSpanID: UInt64, startNanoseconds: UInt64, sink: OTLPSpanBuffer?) {
        self.baseContext = context
        self.spanContext = spanContext
        self.parentSpanID = parentSpanID
        self.kind = kind
        self.startNanoseconds = startNanoseconds
        self.sink = sink
        self.state = Mutex(State(operationName: operationName, ended: sink == nil))
        self.ended = Atomic(sink == nil)
    }

    /// The span's context: its parent's with this span's ``OTLPSpanContext``. Made when asked for: most of Norq's
    /// spans are never asked (an attempt has no children), and setting a context's value copies its storage and
    /// boxes the value.
    public var context: InstrumentationContext {
        var context = baseContext
        context.otlpSpanContext = spanContext
        return context
    }

    public var operationName: String {
        get { state.withLock { $0.operationName } }
        set { guard sink != nil else { return }; state.withLock { if !$0.ended { $0.operationName = newValue } } }
    }

    public var attributes: SpanAttributes {
        get { state.withLock { $0.attributes } }
        set {
            guard sink != nil else { return }
            state.withLock { state in
                guard !state.ended else { return }
                state.attributes = newValue
            }
        }
    }

    public var isRecording: Bool { !ended.load(ordering: .relaxed) }

    public func setStatus(_ status: SpanStatus) {
        guard sink != nil else { return }
        state.withLock { state in
            // OpenTelemetry: `ok` is final; `error` does not replace it.
            guard !state.ended, state.status?.code != .ok else { return }
            state.status = status
        }
    }

    public func addEvent(_ event: SpanEvent) {
        guard sink != nil else { return }
        state.withLock { state in
            guard !state.ended else { return }
            if state.events.count < Self.maximumEvents { state.events.append(event) } else { state.droppedEvents += 1 }
        }
    }

    public func recordError<Instant: TracerInstant>(_ error: any Error, attributes: SpanAttributes,
                                                    at instant: @autoclosure () -> Instant) {
        guard sink != nil else { return }
        var attributes = attributes
        attributes["exception.type"] = String(describing: type(of: error))
        attributes["exception.message"] = String(String(describing: error).prefix(1024))
        addEvent(SpanEvent(name: "exception", at: instant(), attributes: attributes))
    }

    public func addLink(_ link: SpanLink) {
        guard sink != nil, let other = link.context.otlpSpanContext else { return }
        state.withLock { state in
            guard !state.ended else { return }
            if state.links.count < Self.maximumLinks { state.links.append((other, link.attributes)) }
            else { state.droppedLinks += 1 }
        }
    }

    public func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        guard let sink else { return }
        let end = instant().nanosecondsSinceEpoch
        let finished: OTLPFinishedSpan? = state.withLock { state in
            guard !state.ended else { return nil }
            return finish(&state, end: end)
        }
        if let finished { sink.append(finished) }
    }

    /// Marks the span ended and makes what the exporter encodes of it (the span keeps what it recorded: it can
    /// still be read once ended).
    private func finish(_ state: inout State, end: UInt64) -> OTLPFinishedSpan {
        state.ended = true
        ended.store(true, ordering: .relaxed)
        return OTLPFinishedSpan(context: spanContext, parentSpanID: parentSpanID, name: state.operationName, kind: kind,
                                startNanoseconds: startNanoseconds, endNanoseconds: max(end, startNanoseconds),
                                attributes: state.attributes, attributeList: SpanAttributeList(),
                                events: state.events, links: state.links, status: state.status,
                                droppedEvents: state.droppedEvents, droppedLinks: state.droppedLinks)
    }
}
