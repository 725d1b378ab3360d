import Logging
@testable import NorqOTLP
import NorqSpanAttributes
import Testing
import Tracing

@Suite("NorqOTLP: span contexts, sampling, encoding")
struct OTLPTracerTests {
    /// An exporter (not run: its buffer is read by the test) and a tracer sampling `ratio` of traces into it.
    static func tracer(_ configuration: OTLPExporter.Configuration = .init(),
                       ratio: Double = 1) -> (OTLPExporter, OTLPTracer) {
        let exporter = OTLPExporter(configuration: configuration, logger: Logger(label: "test"))
        return (exporter, OTLPTracer(sampler: OTLPSampler(ratio: ratio), exporter: exporter))
    }

    @Test("traceparent: written and read back; malformed values refused")
    func traceparentRoundTrip() throws {
        let context = OTLPSpanContext(traceIDHigh: 0x0af7_6519_16cd_43dd, traceIDLow: 0x8448_eb21_1c80_319c,
                                      spanID: 0xb7ad_6b71_6920_3331, sampled: true)
        #expect(context.traceparent == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        let read = try #require(OTLPSpanContext(traceparent: context.traceparent, traceState: "congo=t61rcWkgMzE"))
        #expect(read.traceIDHigh == context.traceIDHigh && read.traceIDLow == context.traceIDLow)
        #expect(read.spanID == context.spanID && read.sampled && read.traceState == "congo=t61rcWkgMzE")
        #expect(OTLPSpanContext(traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")?.sampled == false)
        // A later version may carry more after a dash.
        #expect(OTLPSpanContext(traceparent: "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra") != nil)
        for bad in ["", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0",
                    "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
                    "00-00000000000000000000000000000000-b7ad6b7169203331-01",
                    "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
                    "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
                    "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                    // the bytes next to the digits' ranges ('/' ':' '`' 'g'), in each of the three ids
                    "00-0af7651916cd43dd8448eb211c80319/-b7ad6b7169203331-01",
                    "00-0af7651916cd43dd:448eb211c80319c-b7ad6b7169203331-01",
                    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333`-01",
                    "00-0af7651916cd43dd8448eb211c80319c-g7ad6b7169203331-01",
                    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g"] {
            #expect(OTLPSpanContext(traceparent: bad) == nil, "\(bad)")
        }
        // A tracestate over the bound is not kept.
        let long = String(repeating: "a", count: OTLPSpanContext.maximumTraceStateBytes + 1)
        #expect(OTLPSpanContext(traceparent: context.traceparent, traceState: long)?.traceState == nil)
    }

    @Test("sampler: parent's flag wins; ratio 0 and 1; a ratio samples about its share")
    func sampler() {
        let parent = OTLPSpanContext(traceIDHigh: 1, traceIDLow: 1, spanID: 1, sampled: false)
        #expect(!OTLPSampler(ratio: 1).isSampled(parent: parent, traceIDLow: 0))
        #expect(OTLPSampler(ratio: 0).isSampled(parent: OTLPSpanContext(traceIDHigh: 1, traceIDLow: 1, spanID: 1, sampled: true), traceIDLow: 0xFFFF))
        let ids = OTLPIDSource(seed: 42)
        var counts = (none: 0, all: 0, quarter: 0)
        for _ in 0..<20_000 {
            let low = ids.next()
            if OTLPSampler(ratio: 0).isSampled(parent: nil, traceIDLow: low) { counts.none += 1 }
            if OTLPSampler(ratio: 1).isSampled(parent: nil, traceIDLow: low) { counts.all += 1 }
            if OTLPSampler(ratio: 0.25).isSampled(parent: nil, traceIDLow: low) { counts.quarter += 1 }
        }
        #expect(counts.none == 0 && counts.all == 20_000)
        #expect((4_500...5_500).contains(counts.quarter), "\(counts.quarter)")
        #expect(OTLPSampler(ratio: .nan).ratio == 0 && OTLPSampler(ratio: 7).ratio == 1)
    }

    @Test("ids: SplitMix64's published sequence, and distinct ids to concurrent callers")
    func idSource() async {
        let source = OTLPIDSource(seed: 0)
        #expect([source.next(), source.next(), source.next()] == [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F])
        let shared = OTLPIDSource()
        let ids = await withTaskGroup(of: [UInt64].self) { group in
            for _ in 0..<4 { group.addTask { (0..<10_000).map { _ in shared.next() } } }
            var all: [UInt64] = []
            for await some in group { all += some }
            return all
        }
        #expect(ids.count == 40_000 && Set(ids).count == 40_000 && !ids.contains(0))
    }

    @Test("spans: children keep the trace and name their parent; inject and extract cross a carrier")
    func parentChild() throws {
        let (exporter, tracer) = Self.tracer()
        let root = tracer.startSpan("root", context: .topLevel, ofKind: .server)
        var carrier: [String: String] = [:]
        tracer.inject(root.context, into: &carrier, using: DictionaryInjector())
        var extracted = InstrumentationContext.topLevel
        tracer.extract(carrier, into: &extracted, using: DictionaryExtractor())
        let child = tracer.startSpan("child", context: extracted, ofKind: .client)
        child.attributes["norq.attempt"] = 2
        child.end()
        root.end()
        child.end()  // once only
        let (held, dropped) = exporter.buffer.takeAll()
        let spans = try #require(held.decoded)
        #expect(dropped == 0 && spans.map(\.name) == ["child", "root"])
        let rootContext = try #require(root.context.otlpSpanContext)
        #expect(spans[0].traceIDLow == rootContext.traceIDLow && spans[0].parentSpanID == rootContext.spanID)
        #expect(spans[1].parentSpanID == 0 && spans[0].spanID != rootContext.spanID)
        #expect(spans[1].spanID == rootContext.spanID)
        #expect(spans[0].message.attributes(9)["norq.attempt"]?.first(3)?.integer == 2)
    }

    @Test("a span value ended with Norq's attribute list encodes it as it is, in order; unsampled, it records nothing")
    func attributeList() throws {
        let (exporter, tracer) = Self.tracer()
        let recorder = SpanAttributeRecorder(tracer: tracer)
        #expect(recorder.makesSpanValues)
        var list = SpanAttributeList(capacity: 4)
        list.set("norq.provider", .string("apns"))
        list.set("norq.attempt", .int(-3))
        list.set("norq.send.created", .bool(true))
        list.set("é😀", .string(String(repeating: "ü", count: 100)))  // a KeyValue over 127 bytes

        let listed = recorder.startSpan("listed", context: .topLevel, ofKind: .client)
        guard case .value(let value) = listed.storage else { Issue.record("not a value"); return }
        #expect(listed.isRecording && value.isSampled && value.parentSpanID == 0 && value.startNanoseconds > 0)
        recorder.end(listed, attributes: list)

        let (held, _) = exporter.buffer.takeAll()
        let spans = ProtobufMessage.spans(ofRequest: OTLPTraceEncoder.request(spanFields: held.fields(0..<held.count),
                                                                             serviceName: "svc"))
        #expect(spans.count == 1)
        let attributes = try #require(spans.first).attributes(9)
        #expect(attributes.count == 4)
        #expect(attributes["norq.provider"]?.first(1)?.string == "apns")
        #expect(attributes["norq.attempt"]?.first(3).map { Int64(bitPattern: $0.integer) } == -3)
        #expect(attributes["norq.send.created"]?.first(2)?.integer == 1)
        #expect(attributes["é😀"]?.first(1)?.string == String(repeating: "ü", count: 100))
        #expect(spans[0].all(9).compactMap { $0.message?.first(1)?.string }
                == ["norq.provider", "norq.attempt", "norq.send.created", "é😀"])  // in the list's order
        #expect(spans[0].first(6)?.integer == 3)  // SPAN_KIND_CLIENT
        #expect(spans[0].first(7)?.integer == value.startNanoseconds)
        #expect(try #require(spans[0].first(8)?.integer) >= value.startNanoseconds)
        #expect(spans[0].first(15) == nil)  // no status given: unset

        // A span of a trace that is not sampled records nothing, and its context still says so.
        let (quietExporter, unsampled) = Self.tracer(ratio: 0)
        let quietRecorder = SpanAttributeRecorder(tracer: unsampled)
        let quiet = quietRecorder.startSpan("quiet", context: .topLevel, ofKind: .server)
        #expect(!quiet.isRecording)
        quietRecorder.end(quiet, attributes: list)
        quietRecorder.end(quiet)
        let child = quietRecorder.startSpan("child", childOf: quiet, ofKind: .client)
        #expect(!child.isRecording)
        var carrier: [String: String] = [:]
        unsampled.inject(quietRecorder.context(of: quiet, in: .topLevel), into: &carrier, using: DictionaryInjector())
        #expect(carrier["traceparent"]?.hasSuffix("-00") == true)
        #expect(quietExporter.buffer.count == 0)
    }

    @Test("span values: a child of a value or of a context keeps the trace and names its parent; name and status given at the end")
    func spanValues() throws {
        let (exporter, tracer) = Self.tracer()
        let recorder = SpanAttributeRecorder(tracer: tracer)
        // The caller's context (another key's value in it, a `tracestate`): the request span's parent.
        var base = InstrumentationContext.topLevel
        base[OtherKey.self] = "kept"
        base.otlpSpanContext = OTLPSpanContext(traceIDHigh: 7, traceIDLow: 9, spanID: 11, sampled: true,
                                               traceState: "vendor=1")
        let request = recorder.startSpan("HTTP POST", context: base, ofKind: .server)
        // The context handlers see: the caller's other keys, the request span as the current span.
        let requestContext = recorder.context(of: request, in: base)
        let current = try #require(requestContext.otlpSpanContext)
        #expect(requestContext[OtherKey.self] == "kept")
        #expect(current.traceIDHigh == 7 && current.traceIDLow == 9 && current.spanID != 11 && current.sampled)
        #expect(current.traceState == "vendor=1")
        let enqueue = recorder.startSpan("norq.enqueue", context: requestContext, ofKind: .producer)
        let claimStart = DefaultTracerClock.Instant(nanosecondsSinceEpoch: 1_000)
        let claim = recorder.startSpan("norq.claim", context: requestContext, ofKind: .consumer, at: claimStart)
        let attempt = recorder.startSpan("norq.attempt", childOf: claim, ofKind: .client)

        var list = SpanAttributeList(capacity: 2)
        list.add("norq.outcome", .string("rejected"))
        list.add("http.response.status_code", .int(400))
        recorder.end(attempt, attributes: list, status: SpanStatus(code: .error, message: "rejected"))
        recorder.end(claim, attributes: SpanAttributeList())
        recorder.end(enqueue, attributes: SpanAttributeList(), status: SpanStatus(code: .ok))
        recorder.end(request, operationName: "/v1/sends", attributes: SpanAttributeList())

        let (held, dropped) = exporter.buffer.takeAll()
        let spans = try #require(held.decoded)
        #expect(dropped == 0 && spans.map(\.name) == ["norq.attempt", "norq.claim", "norq.enqueue", "/v1/sends"])
        #expect(spans.allSatisfy { DecodedSpan.bigEndian($0.message.first(1)?.bytes.prefix(8) ?? []) == 7 && $0.traceIDLow == 9 })
        #expect(spans.allSatisfy { $0.message.first(3)?.string == "vendor=1" })  // tracestate
        #expect(Set(spans.map(\.spanID)).count == 4)
        #expect(spans[3].parentSpanID == 11 && spans[3].spanID == current.spanID)
        #expect(spans[2].parentSpanID == current.spanID && spans[1].parentSpanID == current.spanID)
        #expect(spans[0].parentSpanID == spans[1].spanID)
        #expect(spans[1].message.first(7)?.integer == 1_000)  // the claim's given start
        #expect(spans[0].message.first(15)?.message?.first(3)?.integer == 2)  // error
        #expect(spans[0].message.first(15)?.message?.first(2)?.string == "rejected")
        #expect(spans[2].message.first(15)?.message?.first(3)?.integer == 1)  // ok
        #expect(spans[3].message.first(6)?.integer == 2 && spans[3].message.first(16)?.integer == 1)  // server, sampled
        #expect(spans[0].message.all(9).compactMap { $0.message?.first(1)?.string }
                == ["norq.outcome", "http.response.status_code"])
    }

    @Test("a tracer whose spans are objects: the recorder makes objects, children from their context")
    func objectSpans() throws {
        let (exporter, otlp) = Self.tracer()
        var base = InstrumentationContext.topLevel
        base[OtherKey.self] = "kept"
        let recorder = SpanAttributeRecorder(tracer: ObjectOnlyTracer(otlp))
        #expect(!recorder.makesSpanValues)
        let parent = recorder.startSpan("claim", context: base, ofKind: .consumer)
        guard case .object(let object) = parent.storage else { Issue.record("not an object"); return }
        let child = recorder.startSpan("attempt", childOf: parent, ofKind: .client)
        #expect(recorder.context(of: child, in: .topLevel)[OtherKey.self] == "kept")
        var list = SpanAttributeList()
        list.add("norq.outcome", .string("delivered"))
        recorder.end(child, operationName: "renamed", attributes: list, status: SpanStatus(code: .error))
        recorder.end(parent)
        #expect(!object.isRecording)
        let spans = try #require(exporter.buffer.takeAll().spans.decoded)
        #expect(spans.map(\.name) == ["renamed", "claim"])
        #expect(spans[0].parentSpanID == spans[1].spanID)
        #expect(spans[0].message.attributes(9)["norq.outcome"]?.first(1)?.string == "delivered")
        #expect(spans[0].message.first(15)?.message?.first(3)?.integer == 2)
    }

    private enum OtherKey: InstrumentationContextKey {
        typealias Value = String
    }

    /// Norq's OTLP tracer seen only as a `Tracer` (no span values): as swift-otel's would be.
    private struct ObjectOnlyTracer: Tracer {
        let base: OTLPTracer
        init(_ base: OTLPTracer) { self.base = base }

        func startSpan<Instant: TracerInstant>(
            _ operationName: String, context: @autoclosure () -> InstrumentationContext, ofKind kind: SpanKind,
            at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
        ) -> OTLPSpan {
            base.startSpan(operationName, context: context(), ofKind: kind, at: instant(), function: function,
                           file: fileID, line: line)
        }

        func forceFlush() {}
        func inject<Carrier, Inject: Injector>(_ context: InstrumentationContext, into carrier: inout Carrier,
                                               using injector: Inject) where Inject.Carrier == Carrier {
            base.inject(context, into: &carrier, using: injector)
        }
        func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout InstrumentationContext,
                                                  using extractor: Extract) where Extract.Carrier == Carrier {
            base.extract(carrier, into: &context, using: extractor)
        }
    }

    @Test("an unsampled trace records nothing but still propagates")
    func unsampled() {
        let (exporter, tracer) = Self.tracer(ratio: 0)
        let span = tracer.startSpan("dropped", context: .topLevel, ofKind: .server)
        span.attributes["x"] = "y"
        #expect(!span.isRecording && span.attributes.isEmpty)
        var carrier: [String: String] = [:]
        tracer.inject(span.context, into: &carrier, using: DictionaryInjector())
        #expect(carrier["traceparent"]?.hasSuffix("-00") == true)
        span.end()
        #expect(exporter.buffer.count == 0)
    }

    @Test("the buffer holds at most maxQueueSize spans and counts the dropped")
    func bounded() {
        var configuration = OTLPExporter.Configuration()
        configuration.maxQueueSize = 10
        configuration.maxExportBatchSize = 4
        let (exporter, tracer) = Self.tracer(configuration)
        for index in 0..<25 { tracer.startSpan("s\(index)", context: .topLevel).end() }
        let (spans, dropped) = exporter.buffer.takeAll()
        #expect(spans.count == 10 && dropped == 15 && spans.decoded?.first?.name == "s0")
    }

    /// Ends `count` recorded spans named `s0`, `s1`, ..., each with a 100-byte attribute (~150 bytes encoded).
    static func endPaddedSpans(_ count: Int, tracer: OTLPTracer) {
        for index in 0..<count {
            let span = tracer.startSpan("s\(index)", context: .topLevel)
            span.attributes["pad"] = String(repeating: "p", count: 100)
            span.end()
        }
    }

    @Test("the buffer also stops at about maxQueueBytes of encoded spans")
    func boundedBytes() throws {
        var configuration = OTLPExporter.Configuration()
        configuration.maxQueueBytes = 1_000
        let (exporter, tracer) = Self.tracer(configuration)
        Self.endPaddedSpans(40, tracer: tracer)
        let (spans, dropped) = exporter.buffer.takeAll()
        // Each span is ~150 bytes: refused once 1,000 are held, so 7 kept (the last one over the bound).
        #expect(spans.count + dropped == 40 && spans.count >= 6 && spans.count <= 8)
        #expect(spans.bytes.count < 1_000 + 200)
        #expect(try #require(spans.decoded).map(\.name) == (0..<spans.count).map { "s\($0)" })
        // Taken: the buffer is empty and takes spans again.
        tracer.startSpan("after", context: .topLevel).end()
        #expect(exporter.buffer.takeAll().spans.decoded?.map(\.name) == ["after"])
    }

    @Test("sent spans' storage is given back, emptied, and the next take after next writes into it")
    func recycled() {
        var configuration = OTLPExporter.Configuration()
        configuration.maxExportBatchSize = 16
        let (exporter, tracer) = Self.tracer(configuration)
        for index in 0..<3 { tracer.startSpan("a\(index)", context: .topLevel).end() }
        let first = exporter.buffer.takeAll().spans
        #expect(first.decoded?.map(\.name) == ["a0", "a1", "a2"])
        let storage = first.bytes.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
        exporter.buffer.recycle(consume first)
        #expect(exporter.buffer.hasSpare)
        // The spans ended after the take are in the storage that took over; the recycled one waits for the next take.
        tracer.startSpan("b0", context: .topLevel).end()
        let second = exporter.buffer.takeAll().spans
        #expect(second.decoded?.map(\.name) == ["b0"])
        #expect(!exporter.buffer.hasSpare)
        tracer.startSpan("c0", context: .topLevel).end()
        tracer.startSpan("c1", context: .topLevel).end()
        let third = exporter.buffer.takeAll().spans
        // Emptied: nothing of a0...a2 is sent again, and the bytes are where the first take's were.
        #expect(third.decoded?.map(\.name) == ["c0", "c1"])
        #expect(third.bytes.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } == storage)
        let request = OTLPTraceEncoder.request(spanFields: third.fields(0..<2), serviceName: "svc")
        #expect(ProtobufMessage.spans(ofRequest: request).map { DecodedSpan(message: $0).name } == ["c0", "c1"])
    }

    @Test("storage a burst grew past the bound is freed, not kept")
    func recycleBound() {
        var configuration = OTLPExporter.Configuration()
        configuration.maxExportBatchSize = 2
        let (exporter, tracer) = Self.tracer(configuration)
        // A batch of 2 reserves ~512 bytes; the bound is four times that. 40 spans with 100-byte attributes outgrow it.
        Self.endPaddedSpans(40, tracer: tracer)
        let (grown, _) = exporter.buffer.takeAll()
        #expect(grown.storageBytes > exporter.buffer.recycleBound)
        exporter.buffer.recycle(consume grown)
        #expect(!exporter.buffer.hasSpare)
        let (small, _) = exporter.buffer.takeAll()
        exporter.buffer.recycle(consume small)
        #expect(exporter.buffer.hasSpare)
    }

    @Test("encoding: every field of a span as OTLP's protobuf")
    func encoding() throws {
        let (exporter, tracer) = Self.tracer()
        var parentContext = InstrumentationContext.topLevel
        parentContext.otlpSpanContext = OTLPSpanContext(traceIDHigh: 0x0102_0304_0506_0708, traceIDLow: 0x090A_0B0C_0D0E_0F10,
                                                        spanID: 0x1112_1314_1516_1718, sampled: true, traceState: "k=v")
        let span = tracer.startSpan("POST /v1/sends", context: parentContext, ofKind: .producer,
                                    at: DefaultTracerClock.Timestamp(nanosecondsSinceEpoch: 1_000))
        span.attributes["s"] = "text"
        span.attributes["i"] = -5
        span.attributes["b"] = true
        span.attributes["d"] = 2.5
        span.attributes["a"] = ["x", "y"]
        span.attributes["long"] = String(repeating: "z", count: 300)
        span.attributes.set("i32", value: .int32(-7))
        span.attributes.set("big", value: .int64(.max))
        span.attributes.set("é😀", value: .string("ü"))
        span.addEvent(SpanEvent(name: "evt", at: DefaultTracerClock.Timestamp(nanosecondsSinceEpoch: 1_500), attributes: ["n": 1]))
        span.addLink(SpanLink(context: parentContext, attributes: ["l": "1"]))
        span.setStatus(SpanStatus(code: .error, message: "bad"))
        span.end(at: DefaultTracerClock.Timestamp(nanosecondsSinceEpoch: 2_000))
        let (finished, _) = exporter.buffer.takeAll()
        let bytes = OTLPTraceEncoder.request(spanFields: finished.fields(0..<finished.count), serviceName: "svc")

        let request = try #require(ProtobufMessage(bytes))
        let resourceSpans = try #require(request.first(1)?.message)
        let resource = try #require(resourceSpans.first(1)?.message)
        #expect(resource.attributes(1)["service.name"]?.first(1)?.string == "svc")
        let scopeSpans = try #require(resourceSpans.first(2)?.message)
        #expect(scopeSpans.first(1)?.message?.first(1)?.string == "norq")
        let spans = ProtobufMessage.spans(ofRequest: bytes)
        #expect(spans.count == 1)
        let encoded = try #require(spans.first)
        #expect(hex(encoded.first(1)?.bytes ?? []) == "0102030405060708090a0b0c0d0e0f10")
        #expect(encoded.first(2)?.bytes.count == 8 && encoded.first(2)?.bytes != encoded.first(4)?.bytes)
        #expect(encoded.first(3)?.string == "k=v")
        #expect(hex(encoded.first(4)?.bytes ?? []) == "1112131415161718")
        #expect(encoded.first(5)?.string == "POST /v1/sends")
        #expect(encoded.first(6)?.integer == 4)
        #expect(encoded.first(7)?.integer == 1_000 && encoded.first(8)?.integer == 2_000)
        let attributes = encoded.attributes(9)
        #expect(attributes["s"]?.first(1)?.string == "text")
        #expect(attributes["i"]?.first(3).map { Int64(bitPattern: $0.integer) } == -5)
        #expect(attributes["b"]?.first(2)?.integer == 1)
        #expect(attributes["d"]?.first(4).map { Double(bitPattern: $0.integer) } == 2.5)
        #expect(attributes["a"]?.first(5)?.message?.all(1).compactMap { $0.message?.first(1)?.string } == ["x", "y"])
        #expect(attributes["long"]?.first(1)?.string.count == 300)
        #expect(attributes["i32"]?.first(3).map { Int64(bitPattern: $0.integer) } == -7)
        #expect(attributes["big"]?.first(3)?.integer == UInt64(Int64.max))
        #expect(attributes["é😀"]?.first(1)?.string == "ü")
        #expect(attributes.count == 9)
        let event = try #require(encoded.first(11)?.message)
        #expect(event.first(1)?.integer == 1_500 && event.first(2)?.string == "evt")
        #expect(event.attributes(3)["n"]?.first(3)?.integer == 1)
        let link = try #require(encoded.first(13)?.message)
        #expect(hex(link.first(2)?.bytes ?? []) == "1112131415161718" && link.attributes(4)["l"] != nil)
        let status = try #require(encoded.first(15)?.message)
        #expect(status.first(2)?.string == "bad" && status.first(3)?.integer == 2)
        #expect(encoded.first(16)?.integer == 1)
    }

    /// The outer message holds a string field of `textBytes` (2-4 bytes more), so its own length crosses the
    /// one-, two- and three-byte varint bounds (127/128, 16,383/16,384) over the arguments.
    /// Each time with 1, 2 and 3 bytes reserved for the length: the length is always written in as few bytes as it
    /// needs (the body moved back or forth), never padded.
    @Test("encoding: a nested message's length takes as many varint bytes as it needs, whatever was reserved",
          arguments: [0, 1, 124, 125, 126, 300, 16_379, 16_380, 16_381, 70_000])
    func nestedLengths(textBytes: Int) throws {
        for reserved in 1...3 {
            var writer = ProtobufWriter()
            writer.varintField(1, 7)
            writer.message(2, lengthBytes: reserved) { inner in inner.stringField(1, String(repeating: "x", count: textBytes)) }
            writer.varintField(3, 9)
            let message = try #require(ProtobufMessage(writer.bytes))
            #expect(message.fields.map(\.number) == [1, 2, 3])
            #expect(message.first(1)?.integer == 7)
            #expect(message.first(3)?.integer == 9)
            let text = try #require(message.first(2)?.message?.first(1)).string
            #expect(text.utf8.count == textBytes && text.allSatisfy { $0 == "x" })
            let inner = ProtobufWriter.fieldSize(textBytes)
            #expect(writer.bytes.count == 2 + 1 + ProtobufWriter.varintSize(inner) + inner + 2, "reserved \(reserved)")
        }
    }

    @Test("export policy: success, retryable statuses and transport failures, the attempt and deadline bounds")
    func policy() {
        let policy = OTLPExportPolicy(maxAttempts: 3, initialBackoff: .milliseconds(500))
        #expect(policy.decision(status: 200, attempt: 1, remaining: .seconds(10)) == .done)
        #expect(policy.decision(status: 503, attempt: 1, remaining: .seconds(10)) == .retry(after: .milliseconds(500)))
        #expect(policy.decision(status: nil, attempt: 2, remaining: .seconds(10)) == .retry(after: .seconds(1)))
        #expect(policy.decision(status: 429, attempt: 3, remaining: .seconds(10)) == .drop)
        #expect(policy.decision(status: 400, attempt: 1, remaining: .seconds(10)) == .drop)
        #expect(policy.decision(status: 502, attempt: 1, remaining: .milliseconds(100)) == .drop)
    }
}

struct DictionaryInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
}

struct DictionaryExtractor: Extractor {
    func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
}
