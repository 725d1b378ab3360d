import Tracing
import NorqSpanAttributes

/// The protobuf wire format, the part OTLP needs: varints, fixed-width numbers, and length-delimited fields written
/// in place (a nested message reserves one length byte and moves its body only when it is 128 bytes or longer).
struct ProtobufWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    /// Empties the writer, keeping its storage (a recycled span buffer: no new memory).
    mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }

    /// The bytes the writer holds without growing.
    var capacity: Int { bytes.capacity }

    @inline(__always)
    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 { bytes.append(UInt8(truncatingIfNeeded: value) | 0x80); value >>= 7 }
        bytes.append(UInt8(value))
    }

    @inline(__always)
    mutating func tag(_ field: UInt32, _ wireType: UInt8) { varint(UInt64(field) << 3 | UInt64(wireType)) }

    mutating func varintField(_ field: UInt32, _ value: UInt64) { tag(field, 0); varint(value) }

    mutating func fixed64Field(_ field: UInt32, _ value: UInt64) {
        tag(field, 1)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func fixed32Field(_ field: UInt32, _ value: UInt32) {
        tag(field, 5)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func stringField(_ field: UInt32, _ value: String) {
        tag(field, 2)
        var value = value
        value.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    /// A span id as 8 bytes, big-endian (OTLP's `span_id`).
    mutating func idField(_ field: UInt32, _ id: UInt64) {
        tag(field, 2)
        varint(8)
        withUnsafeBytes(of: id.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// A trace id as 16 bytes, big-endian (OTLP's `trace_id`): no array per id, as a variadic would make.
    mutating func idField(_ field: UInt32, _ high: UInt64, _ low: UInt64) {
        tag(field, 2)
        varint(16)
        withUnsafeBytes(of: high.bigEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: low.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// The bytes a varint takes.
    static func varintSize(_ value: Int) -> Int { varintSize(UInt64(value)) }

    static func varintSize(_ value: UInt64) -> Int {
        var size = 1
        while value >> (7 * size) != 0 { size += 1 }
        return size
    }

    /// The bytes a length-delimited field of a one-byte tag with `length` bytes of content takes.
    static func fieldSize(_ length: Int) -> Int { 1 + varintSize(length) + length }

    /// A length-delimited field's tag and length; its `length` bytes are the caller's to write next.
    mutating func lengthDelimited(_ field: UInt32, length: Int) {
        tag(field, 2)
        varint(UInt64(length))
    }

    /// Bytes already encoded.
    mutating func append(_ raw: some Collection<UInt8>) { bytes.append(contentsOf: raw) }

    /// A nested message in field `field`, its body written by `body`. `lengthBytes` bytes are reserved for its length
    /// before the body is written: the body moves only when its length takes another number of bytes (a span, 128
    /// bytes to 16 KiB encoded, reserves 2; most other messages are shorter than 128 bytes and reserve 1).
    mutating func message(_ field: UInt32, lengthBytes reserved: Int = 1, _ body: (inout ProtobufWriter) -> Void) {
        tag(field, 2)
        let lengthAt = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: reserved))
        let start = bytes.count
        body(&self)
        let length = bytes.count - start
        if length < 0x80, reserved == 1 {
            bytes[lengthAt] = UInt8(length)
            return
        }
        let size = Self.varintSize(length)
        if size > reserved {
            bytes.insert(contentsOf: repeatElement(0, count: size - reserved), at: start)
        } else if size < reserved {
            bytes.removeSubrange((lengthAt + size)..<start)
        }
        var value = UInt64(length)
        for index in lengthAt..<(lengthAt + size) {
            bytes[index] = UInt8(truncatingIfNeeded: value) | (index == lengthAt + size - 1 ? 0 : 0x80)
            value >>= 7
        }
    }
}

/// Encodes finished spans as an OTLP `ExportTraceServiceRequest` (opentelemetry-proto `collector/trace/v1`): one
/// resource (`service.name` and the SDK's name), one instrumentation scope (`norq`), the spans (each encoded when
/// it ends, ``appendSpanField(_:into:)``; a request wraps a run of them, ``request(spanFields:serviceName:)``).
enum OTLPTraceEncoder {
    /// One span as `ScopeSpans.spans` (field 2): what ``OTLPSpanBuffer`` keeps of a span that ended.
    static func appendSpanField(_ span: borrowing OTLPFinishedSpan, into writer: inout ProtobufWriter) {
        writer.message(2, lengthBytes: 2) { encode(span, into: &$0) }
    }

    /// The request around spans already encoded as `ScopeSpans.spans` fields (``appendSpanField(_:into:)``): the
    /// lengths are known first, so the spans' bytes are copied once, not moved when a length is written.
    static func request(spanFields: ArraySlice<UInt8>, serviceName: String) -> [UInt8] {
        var bytes = requestPrefix(spanFieldsCount: spanFields.count, serviceName: serviceName)
        bytes.append(contentsOf: spanFields)
        return bytes
    }

    /// The bytes of a request that come before its spans' fields (``request(spanFields:serviceName:)`` is these and
    /// then the fields): the exporter writes both into its body, so the spans are copied once.
    static func requestPrefix(spanFieldsCount: Int, serviceName: String) -> [UInt8] {
        var resource = ProtobufWriter()                            // Resource
        keyValue(&resource, field: 1, key: "service.name", .string(serviceName))
        keyValue(&resource, field: 1, key: "telemetry.sdk.name", .string("norq"))
        keyValue(&resource, field: 1, key: "telemetry.sdk.language", .string("swift"))
        var scope = ProtobufWriter()                               // ScopeSpans.scope: InstrumentationScope.name
        scope.message(1) { $0.stringField(1, "norq") }
        let scopeSpans = scope.bytes.count + spanFieldsCount
        let resourceSpans = ProtobufWriter.fieldSize(resource.bytes.count) + ProtobufWriter.fieldSize(scopeSpans)
        var writer = ProtobufWriter(capacity: ProtobufWriter.fieldSize(resourceSpans) - spanFieldsCount)
        writer.lengthDelimited(1, length: resourceSpans)           // ExportTraceServiceRequest.resource_spans
        writer.lengthDelimited(1, length: resource.bytes.count)    // ResourceSpans.resource
        writer.append(resource.bytes)
        writer.lengthDelimited(2, length: scopeSpans)              // ResourceSpans.scope_spans
        writer.append(scope.bytes)
        return writer.bytes
    }

    /// One `Span` message's fields.
    static func encode(_ span: borrowing OTLPFinishedSpan, into writer: inout ProtobufWriter) {
        writer.idField(1, span.context.traceIDHigh, span.context.traceIDLow)
        writer.idField(2, span.context.spanID)
        if let state = span.context.traceState { writer.stringField(3, state) }
        if span.parentSpanID != 0 { writer.idField(4, span.parentSpanID) }
        writer.stringField(5, span.name)
        writer.varintField(6, kindNumber(span.kind))
        writer.fixed64Field(7, span.startNanoseconds)
        writer.fixed64Field(8, span.endNanoseconds)
        span.attributes.forEach { key, value in keyValue(&writer, field: 9, key: key, value) }
        for (key, value) in span.attributeList.entries { keyValue(&writer, field: 9, key: key, listValue: value) }
        for event in span.events {
            writer.message(11) { event_ in
                event_.fixed64Field(1, event.nanosecondsSinceEpoch)
                event_.stringField(2, event.name)
                event.attributes.forEach { key, value in keyValue(&event_, field: 3, key: key, value) }
            }
        }
        if span.droppedEvents > 0 { writer.varintField(12, UInt64(span.droppedEvents)) }
        for link in span.links {
            writer.message(13) { link_ in
                link_.idField(1, link.context.traceIDHigh, link.context.traceIDLow)
                link_.idField(2, link.context.spanID)
                if let state = link.context.traceState { link_.stringField(3, state) }
                link.attributes.forEach { key, value in keyValue(&link_, field: 4, key: key, value) }
            }
        }
        if span.droppedLinks > 0 { writer.varintField(14, UInt64(span.droppedLinks)) }
        if let status = span.status {
            writer.message(15) { status_ in
                if let message = status.message { status_.stringField(2, message) }
                status_.varintField(3, status.code == .ok ? 1 : 2)  // STATUS_CODE_OK, STATUS_CODE_ERROR
            }
        }
        writer.fixed32Field(16, span.context.sampled ? 1 : 0)  // Span.flags: W3C trace flags
    }

    /// OTLP's `SpanKind` numbers.
    static func kindNumber(_ kind: SpanKind) -> UInt64 {
        switch kind {
        case .internal: 1
        case .server: 2
        case .client: 3
        case .producer: 4
        case .consumer: 5
        }
    }

    /// A `KeyValue` in field `field`; a value OTLP cannot carry is left out. A string, an integer or a Boolean (every
    /// attribute Norq sets) is written as Norq's own list's values are (``keyValue(_:field:key:listValue:)``);
    /// doubles, arrays and the rest take the general path.
    static func keyValue(_ writer: inout ProtobufWriter, field: UInt32, key: String, _ value: SpanAttribute) {
        switch value {
        case .string(let text): keyValue(&writer, field: field, key: key, listValue: .string(text))
        case .int64(let number): keyValue(&writer, field: field, key: key, listValue: .int(number))
        case .int32(let number): keyValue(&writer, field: field, key: key, listValue: .int(Int64(number)))
        case .bool(let flag): keyValue(&writer, field: field, key: key, listValue: .bool(flag))
        default:
            writer.message(field) { keyValue in
                keyValue.stringField(1, key)
                keyValue.message(2) { anyValue(&$0, value) }
            }
        }
    }

    /// A `KeyValue` in field `field` from Norq's own attribute list: the lengths are known before writing, so
    /// nothing is moved and no closure is made.
    static func keyValue(_ writer: inout ProtobufWriter, field: UInt32, key: String, listValue value: SpanAttributeList.Value) {
        let valueField: Int = switch value {
        case .string(let text): ProtobufWriter.fieldSize(text.utf8.count)
        case .int(let number): 1 + ProtobufWriter.varintSize(UInt64(bitPattern: number))
        case .bool: 2
        }
        writer.lengthDelimited(field, length: ProtobufWriter.fieldSize(key.utf8.count) + ProtobufWriter.fieldSize(valueField))
        writer.stringField(1, key)
        writer.lengthDelimited(2, length: valueField)
        switch value {
        case .string(let text): writer.stringField(1, text)
        case .int(let number): writer.varintField(3, UInt64(bitPattern: number))
        case .bool(let flag): writer.varintField(2, flag ? 1 : 0)
        }
    }

    /// An `AnyValue`'s one field.
    static func anyValue(_ writer: inout ProtobufWriter, _ value: SpanAttribute) {
        switch value {
        case .string(let text): writer.stringField(1, text)
        case .bool(let flag): writer.varintField(2, flag ? 1 : 0)
        case .int32(let number): writer.varintField(3, UInt64(bitPattern: Int64(number)))
        case .int64(let number): writer.varintField(3, UInt64(bitPattern: number))
        case .double(let number): writer.fixed64Field(4, number.bitPattern)
        case .stringConvertible(let convertible): writer.stringField(1, String(describing: convertible))
        case .stringArray(let items): array(&writer, items.map(SpanAttribute.string))
        case .boolArray(let items): array(&writer, items.map(SpanAttribute.bool))
        case .int32Array(let items): array(&writer, items.map(SpanAttribute.int32))
        case .int64Array(let items): array(&writer, items.map(SpanAttribute.int64))
        case .doubleArray(let items): array(&writer, items.map(SpanAttribute.double))
        case .stringConvertibleArray(let items): array(&writer, items.map { .string(String(describing: $0)) })
        default: writer.stringField(1, "")
        }
    }

    static func array(_ writer: inout ProtobufWriter, _ items: [SpanAttribute]) {
        writer.message(5) { array in                               // AnyValue.array_value
            for item in items { array.message(1) { anyValue(&$0, item) } }  // ArrayValue.values
        }
    }
}
