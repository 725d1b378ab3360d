/// The fast path of a send answer: `{"data":[{"status":"ok","id":"..."}, ...]}` read by a one-pass scanner that picks
/// each ticket's `id`, instead of the JSON parser (which built a tree of every ticket: ~3% of the batched send's CPU).
/// Anything else (an error ticket, whose `details` the table reads; escapes; `errors`; a single ticket object) is
/// left to the parser: the scanner answers nil, never a partial reading.
enum ExpoTicketScanner {
    /// The ids of the tickets, in order, when every ticket is `ok` with a string id and the body has that simple
    /// shape; nil otherwise.
    static func okTickets(_ body: [UInt8]) -> [String]? {
        body.withUnsafeBufferPointer { okTickets(bytes: $0) }
    }

    /// ``okTickets(_:)`` on bytes in place (an answer's buffer, not copied out first); `expected`: the tickets
    /// expected (the array's capacity).
    static func okTickets(bytes: UnsafeBufferPointer<UInt8>, expected: Int = 0) -> [String]? {
        var reader = Reader(bytes: bytes)
        guard reader.take(UInt8(ascii: "{")), let key = reader.string(), reader.equals(key, "data"),
              reader.take(UInt8(ascii: ":")), reader.take(UInt8(ascii: "[")) else { return nil }
        var ids: [String] = []
        if reader.take(UInt8(ascii: "]")) { return reader.take(UInt8(ascii: "}")) && reader.atEnd ? ids : nil }
        ids.reserveCapacity(expected)
        repeat {
            guard reader.take(UInt8(ascii: "{")) else { return nil }
            var ok = false
            var id: String?
            repeat {
                guard let key = reader.string(), reader.take(UInt8(ascii: ":")), let value = reader.string() else {
                    return nil
                }
                if reader.equals(key, "status") {
                    ok = reader.equals(value, "ok")
                } else if reader.equals(key, "id") {
                    id = String(decoding: UnsafeBufferPointer(rebasing: bytes[value]), as: UTF8.self)
                }
            } while reader.take(UInt8(ascii: ","))
            guard reader.take(UInt8(ascii: "}")), ok, let id else { return nil }
            ids.append(id)
        } while reader.take(UInt8(ascii: ","))
        guard reader.take(UInt8(ascii: "]")), reader.take(UInt8(ascii: "}")), reader.atEnd else { return nil }
        return ids
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        mutating func skipSpace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0a || bytes[index] == 0x0d || bytes[index] == 0x09 {
                index += 1
            }
        }

        var atEnd: Bool {
            mutating get {
                skipSpace()
                return index == bytes.count
            }
        }

        /// Takes `byte` (after white space) when it comes next.
        mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        /// The range of a string's content without escapes; nil when the next token is not such a string.
        mutating func string() -> Range<Int>? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = index
            while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                if bytes[index] == UInt8(ascii: "\\") || bytes[index] < 0x20 { return nil }
                index += 1
            }
            guard index < bytes.count else { return nil }
            index += 1
            return start..<(index - 1)
        }

        func equals(_ range: Range<Int>, _ text: StaticString) -> Bool {
            guard range.count == text.utf8CodeUnitCount else { return false }
            return text.withUTF8Buffer { expected in
                var i = 0
                while i < range.count {
                    if bytes[range.lowerBound + i] != expected[i] { return false }
                    i += 1
                }
                return true
            }
        }
    }
}
