public import Tracing

/// A span's identity in a trace, as W3C Trace Context and OTLP carry it: a 16-byte trace id, an 8-byte span id, the
/// sampled flag and the vendor `tracestate` (kept as received, at most 512 bytes).
public struct OTLPSpanContext: Sendable, Hashable {
    /// The trace id's high and low 8 bytes (big-endian order on the wire); never both zero.
    public var traceIDHigh: UInt64
    public var traceIDLow: UInt64
    /// The span id; never zero.
    public var spanID: UInt64
    /// Whether the trace is recorded (the `sampled` flag, bit 0 of `trace-flags`).
    public var sampled: Bool
    /// The W3C `tracestate` header as received (nil: none).
    public var traceState: String?

    /// A span context; the ids must not be zero (``isValid``).
    public init(traceIDHigh: UInt64, traceIDLow: UInt64, spanID: UInt64, sampled: Bool, traceState: String? = nil) {
        self.traceIDHigh = traceIDHigh
        self.traceIDLow = traceIDLow
        self.spanID = spanID
        self.sampled = sampled
        self.traceState = traceState
    }

    /// Whether neither id is all zero (W3C: such a `traceparent` is invalid).
    public var isValid: Bool { (traceIDHigh != 0 || traceIDLow != 0) && spanID != 0 }

    /// The bound on a kept `tracestate` (W3C allows 32 members of at most 256 bytes; OpenTelemetry keeps 512 bytes).
    public static let maximumTraceStateBytes = 512

    /// The W3C `traceparent` header value: `00-<32 hex>-<16 hex>-<01|00>`.
    public var traceparent: String {
        String(unsafeUninitializedCapacity: 55) { buffer in
            var index = 0
            func put(_ byte: UInt8) { buffer[index] = byte; index += 1 }
            func hex(_ value: UInt64) {
                var shift = 60
                while shift >= 0 { put(Self.hexDigits[Int((value >> UInt64(shift)) & 0xF)]); shift -= 4 }
            }
            put(UInt8(ascii: "0")); put(UInt8(ascii: "0")); put(UInt8(ascii: "-"))
            hex(traceIDHigh); hex(traceIDLow); put(UInt8(ascii: "-"))
            hex(spanID); put(UInt8(ascii: "-"))
            put(UInt8(ascii: "0")); put(sampled ? UInt8(ascii: "1") : UInt8(ascii: "0"))
            return index
        }
    }

    /// Parses a W3C `traceparent`: version 00 exactly (55 bytes), or a later version's first 55 bytes followed by
    /// `-` (the W3C rule for versions this parser does not know); nil when it is malformed, upper-case, or names an
    /// all-zero id.
    public init?(traceparent: String, traceState: String? = nil) {
        var text = traceparent
        let parsed: OTLPSpanContext? = text.withUTF8 { bytes -> OTLPSpanContext? in
            guard bytes.count >= 55 else { return nil }
            guard let version = Self.hexByte(bytes[0], bytes[1]), version != 0xFF else { return nil }
            if version == 0 { guard bytes.count == 55 else { return nil } }
            else if bytes.count > 55, bytes[55] != UInt8(ascii: "-") { return nil }
            guard bytes[2] == UInt8(ascii: "-"), bytes[35] == UInt8(ascii: "-"), bytes[52] == UInt8(ascii: "-"),
                  let high = Self.hex64(bytes, from: 3), let low = Self.hex64(bytes, from: 19),
                  let span = Self.hex64(bytes, from: 36), let flags = Self.hexByte(bytes[53], bytes[54]) else { return nil }
            let context = OTLPSpanContext(traceIDHigh: high, traceIDLow: low, spanID: span, sampled: flags & 1 == 1)
            return context.isValid ? context : nil
        }
        guard var parsed else { return nil }
        if let traceState, !traceState.isEmpty, traceState.utf8.count <= Self.maximumTraceStateBytes {
            parsed.traceState = traceState
        }
        self = parsed
    }

    static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    static func nibble(_ byte: UInt8) -> UInt8? {
        let value = nibbles[Int(byte)]
        return value == 0xFF ? nil : value
    }

    /// Each byte's hex digit value, 0xFF for a byte that is not a lower-case hex digit (upper case is invalid in W3C
    /// trace context): a `traceparent` is read at every claim, 49 digits each.
    private static let nibbles: [UInt8] = (0...255).map { byte in
        switch UInt8(byte) {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt8(byte) - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt8(byte) - UInt8(ascii: "a") + 10
        default: 0xFF
        }
    }

    static func hexByte(_ high: UInt8, _ low: UInt8) -> UInt8? {
        guard let high = nibble(high), let low = nibble(low) else { return nil }
        return high << 4 | low
    }

    static func hex64(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> UInt64? {
        nibbles.withUnsafeBufferPointer { table in
            var value: UInt64 = 0
            var invalid: UInt8 = 0
            for index in start..<(start + 16) {
                let digit = table[Int(bytes[index])]
                invalid |= digit & 0xF0  // 0xFF for a byte that is not a digit
                value = value << 4 | UInt64(digit & 0x0F)
            }
            return invalid == 0 ? value : nil
        }
    }
}

extension OTLPSpanContext {
    /// The key of the current span's context in an `InstrumentationContext`.
    public enum Key: InstrumentationContextKey {
        public typealias Value = OTLPSpanContext
        public static let nameOverride: String? = "otlp-span-context"
    }
}

extension InstrumentationContext {
    /// The OTLP span context of this context (nil: none).
    public var otlpSpanContext: OTLPSpanContext? {
        get { self[OTLPSpanContext.Key.self] }
        set { self[OTLPSpanContext.Key.self] = newValue }
    }
}
