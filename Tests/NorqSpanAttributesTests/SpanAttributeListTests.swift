import NorqSpanAttributes
import Synchronization
import Testing
import Tracing

@Suite("NorqSpanAttributes: the attribute list of Norq's spans")
struct SpanAttributeListTests {
    @Test("a key set again keeps its place and takes the later value; the dictionary form has the same entries")
    func setReplaces() {
        var list = SpanAttributeList(capacity: 4)
        list.set("norq.provider", .string("apns"))
        list.set("norq.attempt", .int(1))
        list.set("norq.error.code", .string("provider/transport-failed"))
        list.set("norq.send.created", .bool(true))
        list.set("norq.error.code", .string("apns/BadDeviceToken"))
        #expect(list.count == 4 && !list.isEmpty)
        #expect(list.entries.map(\.key) == ["norq.provider", "norq.attempt", "norq.error.code", "norq.send.created"])
        #expect(list.entries[2].value == .string("apns/BadDeviceToken"))
        let attributes = list.spanAttributes
        #expect(attributes.count == 4)
        #expect(attributes.get("norq.provider") == .string("apns"))
        #expect(attributes.get("norq.attempt") == .int64(1))
        #expect(attributes.get("norq.error.code") == .string("apns/BadDeviceToken"))
        #expect(attributes.get("norq.send.created") == .bool(true))
        #expect(SpanAttributeList().isEmpty && SpanAttributeList().spanAttributes.isEmpty)
    }

    @Test("a key added (known to be new) is appended in order: the same list as setting it")
    func addAppends() {
        var added = SpanAttributeList(capacity: 3), set = SpanAttributeList(capacity: 3)
        for (key, value) in [("http.route", SpanAttributeList.Value.string("/v1/sends")), ("http.response.status_code", .int(202)),
                             ("norq.send.created", .bool(false))] {
            added.add(key, value)
            set.set(key, value)
        }
        #expect(added == set && added.entries.map(\.key) == ["http.route", "http.response.status_code", "norq.send.created"])
        #expect(added.spanAttributes.get("http.response.status_code") == .int64(202))
    }

    @Test("equality: same keys, values and order")
    func equality() {
        var one = SpanAttributeList(), two = SpanAttributeList(capacity: 8)
        one.set("a", .int(1)); one.set("b", .bool(false))
        two.set("a", .int(1)); two.set("b", .bool(false))
        #expect(one == two)
        two.set("b", .bool(true))
        #expect(one != two)
        var reordered = SpanAttributeList()
        reordered.set("b", .bool(false)); reordered.set("a", .int(1))
        #expect(one != reordered)
    }

    @Test("a tracer that takes no span values: span objects, given the same attributes as SpanAttributes, their name and status, and ended")
    func recorderFallsBack() {
        let tracer = DictionaryTracer()
        let recorder = SpanAttributeRecorder(tracer: tracer)
        #expect(!recorder.makesSpanValues)
        let started = recorder.startSpan("norq.attempt", context: .topLevel, ofKind: .client)
        guard case .object(let object) = started.storage, let span = object as? DictionaryTracer.DictionarySpan else {
            Issue.record("not a span object of the tracer"); return
        }
        #expect(started.isRecording)
        span.attributes = ["stale": "gone"]
        var list = SpanAttributeList()
        list.set("norq.outcome", .string("delivered"))
        list.set("http.response.status_code", .int(200))
        recorder.end(started, operationName: "renamed", attributes: list, status: SpanStatus(code: .error))
        #expect(span.attributes == list.spanAttributes)
        #expect(span.attributes.get("stale") == nil)
        #expect(span.operationName == "renamed" && span.status?.code == .error && span.ended)
        // A child of one of its spans is started from the span's context, as an object too.
        let child = recorder.startSpan("norq.attempt", childOf: started, ofKind: .client)
        guard case .object(let childObject) = child.storage else { Issue.record("not a span object"); return }
        #expect(childObject.operationName == "norq.attempt")
        recorder.end(child)
        #expect((childObject as? DictionaryTracer.DictionarySpan)?.ended == true)
    }
}

/// A tracer whose spans keep `SpanAttributes` only (as any tracer but Norq's own).
private struct DictionaryTracer: Tracer {
    final class DictionarySpan: Tracing.Span, Sendable {
        private let state = Mutex((name: "", attributes: SpanAttributes(), status: SpanStatus?.none, ended: false))
        init(name: String) { state.withLock { $0.name = name } }
        var context: InstrumentationContext { .topLevel }
        var operationName: String {
            get { state.withLock { $0.name } }
            set { state.withLock { $0.name = newValue } }
        }
        var attributes: SpanAttributes {
            get { state.withLock { $0.attributes } }
            set { state.withLock { $0.attributes = newValue } }
        }
        var isRecording: Bool { true }
        func setStatus(_ status: SpanStatus) { state.withLock { $0.status = status } }
        var status: SpanStatus? { state.withLock { $0.status } }
        var ended: Bool { state.withLock { $0.ended } }
        func addEvent(_ event: SpanEvent) {}
        func recordError<Instant: TracerInstant>(_ error: any Error, attributes: SpanAttributes,
                                                 at instant: @autoclosure () -> Instant) {}
        func addLink(_ link: SpanLink) {}
        func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) { state.withLock { $0.ended = true } }
    }

    func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> InstrumentationContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> DictionarySpan {
        DictionarySpan(name: operationName)
    }

    func forceFlush() {}
    func inject<Carrier, Inject: Injector>(_ context: InstrumentationContext, into carrier: inout Carrier,
                                           using injector: Inject) where Inject.Carrier == Carrier {}
    func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout InstrumentationContext,
                                              using extractor: Extract) where Extract.Carrier == Carrier {}
}
