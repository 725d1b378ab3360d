package import Tracing

/// The attributes of one of Norq's spans (`norq.enqueue`, `norq.claim`, `norq.attempt`, the API request's), as a
/// list in the order they were set, made once per span and handed to the span once, when it ends
/// (``SpanAttributeRecorder/end(_:operationName:attributes:status:)``).
///
/// A span of swift-distributed-tracing takes its attributes as `SpanAttributes`, a dictionary: every key hashed
/// when it is set, every entry copied again when the tracer reads them back, all of it freed when the span goes.
/// Norq makes four spans a send at thousands of sends a second, and the tracer that matters most, Norq's own OTLP
/// exporter, reads each attribute exactly once (to encode it). So a ``SpanValueTracer`` takes this list as it is, with
/// the span's end; any other tracer's span gets the same attributes as `SpanAttributes` (``spanAttributes``). Either
/// way it sees the same keys and values.
package struct SpanAttributeList: Sendable, Equatable {
    /// An attribute's value: the kinds Norq's spans set (a subset of `SpanAttribute` that copies without a value
    /// witness: a string, a 64-bit integer, a Boolean).
    package enum Value: Sendable, Equatable {
        case string(String)
        case int(Int64)
        case bool(Bool)

        /// The same value as swift-distributed-tracing's `SpanAttribute`.
        package var spanAttribute: SpanAttribute {
            switch self {
            case .string(let text): .string(text)
            case .int(let number): .int64(number)
            case .bool(let flag): .bool(flag)
            }
        }
    }

    /// The attributes in the order they were first set; a key appears once.
    package private(set) var entries: [(key: String, value: Value)] = []

    /// An empty list with room for `capacity` attributes (the most a span of that kind sets: no growth).
    package init(capacity: Int = 0) {
        entries.reserveCapacity(capacity)
    }

    /// Sets `key` to `value`: a key set again keeps its place and takes the later value, as a dictionary would
    /// (Norq's spans set at most a dozen keys, so the search is a few comparisons, no hashing).
    package mutating func set(_ key: String, _ value: Value) {
        for index in entries.indices where entries[index].key == key {
            entries[index].value = value
            return
        }
        entries.append((key, value))
    }

    /// Adds `key`, which the list does not hold yet, with `value`: no search (Norq's spans name each key once; a key
    /// added twice stops a debug build, and a release build would encode it twice, so use ``set(_:_:)`` where a key
    /// may repeat).
    package mutating func add(_ key: String, _ value: Value) {
        assert(!entries.contains { $0.key == key }, "\(key) is already in the list")
        entries.append((key, value))
    }

    package var count: Int { entries.count }
    package var isEmpty: Bool { entries.isEmpty }

    /// The same attributes as swift-distributed-tracing's dictionary (for a tracer that takes only that).
    package var spanAttributes: SpanAttributes {
        var attributes = SpanAttributes()
        attributes.reserveCapacity(entries.count)
        for (key, value) in entries { attributes.set(key, value: value.spanAttribute) }
        return attributes
    }

    package static func == (lhs: SpanAttributeList, rhs: SpanAttributeList) -> Bool {
        lhs.entries.count == rhs.entries.count
            && zip(lhs.entries, rhs.entries).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }
}
