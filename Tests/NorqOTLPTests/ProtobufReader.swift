@testable import NorqOTLP

// A minimal protobuf reader for the tests: fields of one message, by number, as varints, fixed values or bytes.
struct ProtobufField {
    var number: Int
    var wireType: Int
    var integer: UInt64 = 0
    var bytes: [UInt8] = []

    var string: String { String(decoding: bytes, as: UTF8.self) }
    var message: ProtobufMessage? { ProtobufMessage(bytes) }
}

struct ProtobufMessage {
    var fields: [ProtobufField] = []

    init?(_ bytes: [UInt8]) {
        var index = 0
        func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while index < bytes.count, shift < 64 {
                let byte = bytes[index]; index += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
            return nil
        }
        func fixed(_ width: Int) -> UInt64? {
            guard index + width <= bytes.count else { return nil }
            var value: UInt64 = 0
            for offset in 0..<width { value |= UInt64(bytes[index + offset]) << (8 * UInt64(offset)) }
            index += width
            return value
        }
        while index < bytes.count {
            guard let key = varint() else { return nil }
            var field = ProtobufField(number: Int(key >> 3), wireType: Int(key & 7))
            switch field.wireType {
            case 0: guard let value = varint() else { return nil }; field.integer = value
            case 1: guard let value = fixed(8) else { return nil }; field.integer = value
            case 5: guard let value = fixed(4) else { return nil }; field.integer = value
            case 2:
                guard let length = varint(), index + Int(length) <= bytes.count else { return nil }
                field.bytes = Array(bytes[index..<(index + Int(length))]); index += Int(length)
            default: return nil
            }
            fields.append(field)
        }
    }

    func all(_ number: Int) -> [ProtobufField] { fields.filter { $0.number == number } }
    func first(_ number: Int) -> ProtobufField? { fields.first { $0.number == number } }

    /// The `KeyValue`s in field `number`, as key -> AnyValue message.
    func attributes(_ number: Int) -> [String: ProtobufMessage] {
        var result: [String: ProtobufMessage] = [:]
        for field in all(number) {
            guard let keyValue = field.message, let key = keyValue.first(1)?.string,
                  let value = keyValue.first(2)?.message else { continue }
            result[key] = value
        }
        return result
    }

    /// The spans of an `ExportTraceServiceRequest`.
    static func spans(ofRequest bytes: [UInt8]) -> [ProtobufMessage] {
        guard let request = ProtobufMessage(bytes) else { return [] }
        var spans: [ProtobufMessage] = []
        for resourceSpans in request.all(1).compactMap(\.message) {
            for scopeSpans in resourceSpans.all(2).compactMap(\.message) {
                spans += scopeSpans.all(2).compactMap(\.message)
            }
        }
        return spans
    }
}

func hex(_ bytes: [UInt8]) -> String {
    bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
}

/// A span as the buffer holds it (a `ScopeSpans.spans` field), read back.
struct DecodedSpan {
    var message: ProtobufMessage

    var name: String { message.first(5)?.string ?? "" }
    var traceIDLow: UInt64 { Self.bigEndian(message.first(1)?.bytes.suffix(8) ?? []) }
    var spanID: UInt64 { Self.bigEndian(message.first(2)?.bytes ?? []) }
    /// 0 for a root span (no field 4).
    var parentSpanID: UInt64 { Self.bigEndian(message.first(4)?.bytes ?? []) }

    static func bigEndian(_ bytes: some Collection<UInt8>) -> UInt64 { bytes.reduce(0) { $0 << 8 | UInt64($1) } }
}

extension OTLPEncodedSpans {
    /// Each held span, decoded (nil when one is not a well-formed `spans` field).
    var decoded: [DecodedSpan]? {
        var spans: [DecodedSpan] = []
        for index in 0..<count {
            guard let field = ProtobufMessage(Array(fields(index..<(index + 1)))), field.fields.count == 1,
                  field.fields[0].number == 2, let span = field.fields[0].message else { return nil }
            spans.append(DecodedSpan(message: span))
        }
        return spans
    }
}
