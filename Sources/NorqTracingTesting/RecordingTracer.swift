public import Tracing
import Synchronization

/// A tracer for tests (issue 33): it reads and writes the W3C `traceparent` header (version 00, as OpenTelemetry
/// does, so a context crosses HTTP and the durable store as it would in production), makes random trace and span
/// ids, and keeps every finished span in memory (the newest `capacity`), to check parent-child chains.
public final class RecordingTracer: Tracer, Sendable {
    public typealias Span = RecordingSpan

    /// A span's identity in a trace.
    public struct SpanContext: Sendable, Hashable {
        /// 32 lower-case hex digits.
        public var traceID: String
        /// 16 lower-case hex digits.
        public var spanID: String
        public var sampled: Bool

        public init(traceID: String, spanID: String, sampled: Bool = true) {
            self.traceID = traceID
            self.spanID = spanID
            self.sampled = sampled
        }

        /// The W3C `traceparent` header value.
        public var traceparent: String { "00-\(traceID)-\(spanID)-\(sampled ? "01" : "00")" }

        /// Parses a W3C `traceparent` (version 00); nil when it is malformed or names the all-zero ids.
        public init?(traceparent: String) {
            let parts = traceparent.split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 4, parts[0] == "00", parts[1].utf8.count == 32, parts[2].utf8.count == 16,
                  parts[3].utf8.count == 2, parts[1...3].allSatisfy({ $0.allSatisfy(\.isHexDigit) && $0 == $0.lowercased() }),
                  parts[1].contains(where: { $0 != "0" }), parts[2].contains(where: { $0 != "0" }),
                  let flags = UInt8(parts[3], radix: 16) else { return nil }
            self.init(traceID: String(parts[1]), spanID: String(parts[2]), sampled: flags & 1 == 1)
        }
    }

    /// The key of a span context in an `InstrumentationContext`.
    public enum ContextKey: InstrumentationContextKey {
        public typealias Value = SpanContext
    }

    /// A span that has ended.
    public struct FinishedSpan: Sendable {
        public var operationName: String
        public var kind: SpanKind
        public var context: SpanContext
        /// The parent's span id (nil: a root span).
        public var parentSpanID: String?
        public var attributes: SpanAttributes
        public var status: SpanStatus?
    }

    public let capacity: Int
    private let finished: Mutex<[FinishedSpan]>

    public init(capacity: Int = 10_000) {
        self.capacity = max(1, capacity)
        self.finished = Mutex([])
    }

    /// The finished spans, oldest first.
    public var finishedSpans: [FinishedSpan] { finished.withLock { $0 } }

    func record(_ span: FinishedSpan) {
        finished.withLock { spans in
            if spans.count >= capacity { spans.removeFirst(spans.count - capacity + 1) }
            spans.append(span)
        }
    }

    public func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> InstrumentationContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> RecordingSpan {
        var context = context()
        let parent = context[ContextKey.self]
        let own = SpanContext(traceID: parent?.traceID ?? Self.randomHex(bytes: 16), spanID: Self.randomHex(bytes: 8),
                              sampled: parent?.sampled ?? true)
        context[ContextKey.self] = own
        return RecordingSpan(tracer: self, operationName: operationName, kind: kind, context: context,
                             parentSpanID: parent?.spanID)
    }

    public func forceFlush() {}

    public func inject<Carrier, Inject: Injector>(_ context: InstrumentationContext, into carrier: inout Carrier,
                                                  using injector: Inject) where Inject.Carrier == Carrier {
        guard let span = context[ContextKey.self] else { return }
        injector.inject(span.traceparent, forKey: "traceparent", into: &carrier)
    }

    public func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout InstrumentationContext,
                                                     using extractor: Extract) where Extract.Carrier == Carrier {
        guard let value = extractor.extract(key: "traceparent", from: carrier),
              let span = SpanContext(traceparent: value) else { return }
        context[ContextKey.self] = span
    }

    static func randomHex(bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        var text = ""
        repeat {
            text = ""
            for _ in 0..<bytes {
                let byte = UInt8.random(in: 0...255, using: &generator)
                text += String(byte >> 4, radix: 16) + String(byte & 0xF, radix: 16)
            }
        } while text.allSatisfy { $0 == "0" }
        return text
    }
}

/// A span of ``RecordingTracer``: recorded when it ends (once).
public final class RecordingSpan: Span, Sendable {
    private struct State {
        var operationName: String
        var attributes: SpanAttributes = [:]
        var status: SpanStatus?
        var ended = false
    }
    public let context: InstrumentationContext
    public let kind: SpanKind
    let parentSpanID: String?
    private let tracer: RecordingTracer
    private let state: Mutex<State>

    init(tracer: RecordingTracer, operationName: String, kind: SpanKind, context: InstrumentationContext,
         parentSpanID: String?) {
        self.tracer = tracer
        self.kind = kind
        self.context = context
        self.parentSpanID = parentSpanID
        self.state = Mutex(State(operationName: operationName))
    }

    public var operationName: String {
        get { state.withLock { $0.operationName } }
        set { state.withLock { $0.operationName = newValue } }
    }

    public var attributes: SpanAttributes {
        get { state.withLock { $0.attributes } }
        set { state.withLock { $0.attributes = newValue } }
    }

    public var isRecording: Bool { state.withLock { !$0.ended } }

    public func setStatus(_ status: SpanStatus) { state.withLock { $0.status = status } }
    public func addEvent(_ event: SpanEvent) {}
    public func recordError<Instant: TracerInstant>(_ error: any Error, attributes: SpanAttributes,
                                                    at instant: @autoclosure () -> Instant) {}
    public func addLink(_ link: SpanLink) {}

    public func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        let finished: RecordingTracer.FinishedSpan? = state.withLock { state in
            guard !state.ended, let own = context[RecordingTracer.ContextKey.self] else { return nil }
            state.ended = true
            return RecordingTracer.FinishedSpan(operationName: state.operationName, kind: kind, context: own,
                                                parentSpanID: parentSpanID, attributes: state.attributes,
                                                status: state.status)
        }
        if let finished { tracer.record(finished) }
    }
}
