package import NIOCore
package import NIOHPACK

/// The HPACK (RFC 7541) request encoder: plain (not Huffman-coded) string literals, the static table, and a
/// dynamic table for the fields the caller marks `.indexed`, which are the same for every request of a provider
/// (`:authority`, a topic, a content type, a bearer token). After a connection's first request those cost one or
/// two bytes each. Fields marked `.notIndexed` or `.neverIndexed` (and `:path`) are written as literals and never
/// enter the table.
///
/// Huffman coding saves a few bytes on the per-request literals but costs more CPU than the bytes it saves on a
/// local or data-centre link; the decoder on the other side accepts either.
package struct HPACKRequestEncoder {
    private struct Pair: Hashable {
        var name: String
        var value: String
    }

    private struct Entry {
        var pair: Pair
        var size: Int
        var sequence: Int
    }

    /// RFC 7541 Appendix A, index 1...61.
    package static let staticTable: [(name: String, value: String)] = [
        (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"), (":path", "/index.html"),
        (":scheme", "http"), (":scheme", "https"), (":status", "200"), (":status", "204"), (":status", "206"),
        (":status", "304"), (":status", "400"), (":status", "404"), (":status", "500"), ("accept-charset", ""),
        ("accept-encoding", "gzip, deflate"), ("accept-language", ""), ("accept-ranges", ""), ("accept", ""),
        ("access-control-allow-origin", ""), ("age", ""), ("allow", ""), ("authorization", ""),
        ("cache-control", ""), ("content-disposition", ""), ("content-encoding", ""), ("content-language", ""),
        ("content-length", ""), ("content-location", ""), ("content-range", ""), ("content-type", ""),
        ("cookie", ""), ("date", ""), ("etag", ""), ("expect", ""), ("expires", ""), ("from", ""), ("host", ""),
        ("if-match", ""), ("if-modified-since", ""), ("if-none-match", ""), ("if-range", ""),
        ("if-unmodified-since", ""), ("last-modified", ""), ("link", ""), ("location", ""), ("max-forwards", ""),
        ("proxy-authenticate", ""), ("proxy-authorization", ""), ("range", ""), ("referer", ""), ("refresh", ""),
        ("retry-after", ""), ("server", ""), ("set-cookie", ""), ("strict-transport-security", ""),
        ("transfer-encoding", ""), ("user-agent", ""), ("vary", ""), ("via", ""), ("www-authenticate", ""),
    ]

    /// Full (name, value) matches of the static table; entries with an empty value are names only.
    private static let staticPairs: [Pair: Int] = {
        var pairs: [Pair: Int] = [:]
        for (offset, entry) in staticTable.enumerated() where !entry.value.isEmpty {
            pairs[Pair(name: entry.name, value: entry.value)] = offset + 1
        }
        return pairs
    }()

    /// The first static index of each name.
    private static let staticNames: [String: Int] = {
        var names: [String: Int] = [:]
        for (offset, entry) in staticTable.enumerated() where names[entry.name] == nil {
            names[entry.name] = offset + 1
        }
        return names
    }()

    /// The protocol's initial table size, which this encoder never exceeds (a larger
    /// `SETTINGS_HEADER_TABLE_SIZE` is allowed, not required).
    static let defaultTableSize = 4_096

    private var entries = CircularBuffer<Entry>(initialCapacity: 16)
    private var byPair: [Pair: Int] = [:]
    private var byName: [String: Int] = [:]
    /// Entries ever inserted: the next entry's sequence number.
    private var inserted = 0
    private var tableSize = 0
    private(set) package var maxTableSize = HPACKRequestEncoder.defaultTableSize
    /// Size changes the decoder has not been told about yet, signalled at the start of the next header block:
    /// the smallest size taken since the last block, then the final one (RFC 7541 4.2).
    private var sizeUpdate: (smallest: Int, final: Int)?

    package init() {}

    /// Applies the peer's `SETTINGS_HEADER_TABLE_SIZE`: the table shrinks (and the next block says so) when the
    /// peer allows less than the current size; it grows back, at most to 4,096 bytes, when it allows more.
    package mutating func setPeerMaxTableSize(_ size: Int) {
        let newSize = min(max(0, size), Self.defaultTableSize)
        guard newSize != maxTableSize else { return }
        maxTableSize = newSize
        evict(toFit: 0)
        sizeUpdate = (min(sizeUpdate?.smallest ?? newSize, newSize), newSize)
    }

    /// How a header field was last written at one position of the block. Requests of a provider repeat the same
    /// fields in the same order, mostly with the very same strings (shared storage compares in O(1)), so the next
    /// request at that position is usually one index byte, without hashing the JWT or the topic again.
    private struct Remembered {
        var name: String
        var value: String
        var indexing: HPACKIndexing
        /// The indexing the caller asked for (`indexing` may have been lowered: too large for the table).
        var requested: HPACKIndexing
        /// The static entry matching name and value.
        var staticIndex: Int?
        /// The dynamic entry matching name and value (for `.indexable` fields).
        var sequence: Int?
        /// The static index of the name, or the dynamic entry holding it, for literals.
        var staticNameIndex: Int?
        var nameSequence: Int?
    }
    private var remembered: [Remembered?] = []
    /// The bytes of the block being encoded (reused).
    private var scratch: [UInt8] = []

    /// Appends the header block of `head`: the pseudo-headers, then its fields in order.
    package mutating func encode(_ head: HTTP2RequestHead, into buffer: inout ByteBuffer) {
        var out = takeScratch()
        defer { finish(out, into: &buffer) }
        writePendingSizeUpdate(into: &out)
        encodeFields(head, into: &out)
    }

    private mutating func encodeFields(_ head: HTTP2RequestHead, into out: inout [UInt8]) {
        switch head.method {
        case "POST": out.append(UInt8(0x83))  // static 3
        case "GET": out.append(UInt8(0x82))  // static 2
        default: writeLiteral(nameIndex: 2, name: ":method", value: head.method, prefixBits: 4, mask: 0x00, into: &out)
        }
        switch head.scheme {
        case "https": out.append(UInt8(0x87))  // static 7
        case "http": out.append(UInt8(0x86))  // static 6
        default: writeLiteral(nameIndex: 6, name: ":scheme", value: head.scheme, prefixBits: 4, mask: 0x00, into: &out)
        }
        writeLiteral(nameIndex: 4, name: ":path", value: head.path, prefixBits: 4, mask: 0x00, into: &out)
        encodeField(slot: 0, name: ":authority", value: head.authority, indexing: .indexable, into: &out)
        // By index, not `for field in`: each field copied retained its strings (the bearer token's is shared by
        // every request, on every event loop).
        for index in head.fields.indices {
            encodeField(slot: index + 1, name: head.fields[index].name, value: head.fields[index].value,
                        indexing: head.fields[index].indexing.hpack, into: &out)
        }
    }

    /// Encodes `head`'s block and, when it fits in one frame of `maxFrameSize`, appends it as a HEADERS frame
    /// (`flags`, `streamID`): frame header and block with one buffer access, and returns nil. A longer block
    /// (the dynamic table has taken it either way) is returned, nothing written, for the caller to split into
    /// HEADERS and CONTINUATION frames.
    package mutating func encodeFrame(_ head: HTTP2RequestHead, flags: UInt8, streamID: Int32, maxFrameSize: Int,
                                      into buffer: inout ByteBuffer) -> [UInt8]? {
        var out = takeScratch()
        writePendingSizeUpdate(into: &out)
        encodeFields(head, into: &out)
        guard out.count <= maxFrameSize else { return out }
        let header = HTTP2Wire.frameHeader(length: out.count, type: HTTP2Wire.FrameType.headers, flags: flags,
                                           streamID: streamID)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 9 + out.count) { raw in
            withUnsafeBytes(of: header) { raw.copyMemory(from: $0) }
            out.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: raw[9...]).copyMemory(from: $0) }
            return 9 + out.count
        }
        if out.capacity <= 4_096 { scratch = out }
        return nil
    }

    /// Appends the header block of `headers`, with their own indexing hints.
    package mutating func encode(_ headers: HPACKHeaders, into buffer: inout ByteBuffer) {
        var out = takeScratch()
        defer { finish(out, into: &buffer) }
        writePendingSizeUpdate(into: &out)
        for (name, value, indexing) in headers {
            _ = encode(name: name, value: value, indexing: indexing, into: &out)
        }
    }

    /// The header block is built in a reused byte array and appended to the buffer with one write: each write to
    /// a `ByteBuffer` checks its uniqueness and capacity, and a block is some twenty small writes.
    private mutating func takeScratch() -> [UInt8] {
        var out: [UInt8] = []
        swap(&out, &scratch)
        out.removeAll(keepingCapacity: true)
        return out
    }

    private mutating func finish(_ out: [UInt8], into buffer: inout ByteBuffer) {
        buffer.writeBytes(out)
        // Kept for the next block unless one unusually large block grew it.
        if out.capacity <= 4_096 { scratch = out }
    }

    private mutating func writePendingSizeUpdate(into out: inout [UInt8]) {
        guard let update = sizeUpdate else { return }
        Self.writeInteger(update.smallest, prefixBits: 5, mask: 0x20, into: &out)
        if update.final != update.smallest {
            Self.writeInteger(update.final, prefixBits: 5, mask: 0x20, into: &out)
        }
        sizeUpdate = nil
    }

    /// What the field remembered at a position says about the field now there.
    private enum Reuse {
        case index(Int)
        case literal(nameIndex: Int?, neverIndexed: Bool)
    }

    /// Read in place (`inout`): a copy of the remembered field retained its strings per field and request.
    private static func reuse(_ last: inout Remembered?, name: String, value: String, indexing: HPACKIndexing,
                              inserted: Int, entries: Int) -> Reuse? {
        guard last != nil, last!.name == name, last!.requested == indexing else { return nil }
        func dynamicIndex(_ sequence: Int?) -> Int? {
            guard let sequence else { return nil }
            let age = inserted - 1 - sequence
            return age >= 0 && age < entries ? 62 + age : nil
        }
        if last!.indexing == .indexable {
            guard last!.value == value, let index = last!.staticIndex ?? dynamicIndex(last!.sequence) else { return nil }
            return .index(index)
        }
        return .literal(nameIndex: last!.staticNameIndex ?? dynamicIndex(last!.nameSequence),
                        neverIndexed: last!.indexing == .neverIndexed)
    }

    private mutating func encodeField(slot: Int, name: String, value: String, indexing: HPACKIndexing,
                                      into out: inout [UInt8]) {
        if slot < remembered.count {
            switch Self.reuse(&remembered[slot], name: name, value: value, indexing: indexing, inserted: inserted,
                              entries: entries.count) {
            case .index(let index)?:
                Self.writeInteger(index, prefixBits: 7, mask: 0x80, into: &out)
                return
            case .literal(let nameIndex, let neverIndexed)?:
                writeLiteral(nameIndex: nameIndex, name: name, value: value, prefixBits: 4,
                             mask: neverIndexed ? 0x10 : 0x00, into: &out)
                return
            case nil:
                break
            }
        }
        let written = encode(name: name, value: value, indexing: indexing, into: &out)
        while remembered.count <= slot { remembered.append(nil) }
        remembered[slot] = written
    }

    /// Writes one field by the full rules (static table, dynamic table, literal) and says how.
    private mutating func encode(name: String, value: String, indexing: HPACKIndexing,
                                 into out: inout [UInt8]) -> Remembered {
        var written = Remembered(name: name, value: value, indexing: indexing, requested: indexing)
        let pair = Pair(name: name, value: value)
        if let index = Self.staticPairs[pair] {
            Self.writeInteger(index, prefixBits: 7, mask: 0x80, into: &out)
            written.staticIndex = index
            return written
        }
        if indexing == .indexable, let sequence = byPair[pair], let index = dynamicIndex(of: sequence) {
            Self.writeInteger(index, prefixBits: 7, mask: 0x80, into: &out)
            written.sequence = sequence
            return written
        }
        written.staticNameIndex = Self.staticNames[name]
        if written.staticNameIndex == nil, let sequence = byName[name], dynamicIndex(of: sequence) != nil {
            written.nameSequence = sequence
        }
        let nameIndex = written.staticNameIndex ?? written.nameSequence.flatMap(dynamicIndex(of:))
        let size = name.utf8.count + value.utf8.count + 32
        if indexing == .indexable, size <= maxTableSize {
            writeLiteral(nameIndex: nameIndex, name: name, value: value, prefixBits: 6, mask: 0x40, into: &out)
            insert(pair, size: size)
            written.sequence = inserted - 1
        } else {
            // Too large for the table (or not to be indexed): a literal that leaves the table alone.
            written.indexing = indexing == .indexable ? .nonIndexable : indexing
            writeLiteral(nameIndex: nameIndex, name: name, value: value, prefixBits: 4,
                         mask: indexing == .neverIndexed ? 0x10 : 0x00, into: &out)
        }
        return written
    }

    /// The HPACK index of a dynamic entry still in the table: 62 is the newest.
    private func dynamicIndex(of sequence: Int) -> Int? {
        let age = inserted - 1 - sequence
        guard age >= 0, age < entries.count else { return nil }
        return 62 + age
    }

    private mutating func insert(_ pair: Pair, size: Int) {
        evict(toFit: size)
        entries.append(Entry(pair: pair, size: size, sequence: inserted))
        byPair[pair] = inserted
        byName[pair.name] = inserted
        inserted += 1
        tableSize += size
    }

    /// Drops the oldest entries until `size` more bytes fit.
    private mutating func evict(toFit size: Int) {
        while tableSize + size > maxTableSize, let oldest = entries.popFirst() {
            tableSize -= oldest.size
            if byPair[oldest.pair] == oldest.sequence { byPair.removeValue(forKey: oldest.pair) }
            if byName[oldest.pair.name] == oldest.sequence { byName.removeValue(forKey: oldest.pair.name) }
        }
    }

    private func writeLiteral(nameIndex: Int?, name: String, value: String, prefixBits: Int, mask: UInt8,
                              into out: inout [UInt8]) {
        if let nameIndex {
            Self.writeInteger(nameIndex, prefixBits: prefixBits, mask: mask, into: &out)
        } else {
            out.append(mask)
            Self.writeString(name, into: &out)
        }
        Self.writeString(value, into: &out)
    }

    /// A string literal, not Huffman-coded.
    private static func writeString(_ string: String, into out: inout [UInt8]) {
        writeInteger(string.utf8.count, prefixBits: 7, mask: 0x00, into: &out)
        out.append(contentsOf: string.utf8)
    }

    /// An HPACK integer (RFC 7541 5.1) in a byte whose high bits are `mask`.
    package static func writeInteger(_ value: Int, prefixBits: Int, mask: UInt8, into buffer: inout ByteBuffer) {
        var out: [UInt8] = []
        writeInteger(value, prefixBits: prefixBits, mask: mask, into: &out)
        buffer.writeBytes(out)
    }

    static func writeInteger(_ value: Int, prefixBits: Int, mask: UInt8, into out: inout [UInt8]) {
        let limit = (1 << prefixBits) - 1
        if value < limit {
            out.append(mask | UInt8(value))
            return
        }
        out.append(mask | UInt8(limit))
        var rest = value - limit
        while rest >= 128 {
            out.append(UInt8(rest & 0x7f | 0x80))
            rest >>= 7
        }
        out.append(UInt8(rest))
    }
}

extension HTTP2HeaderIndexing {
    var hpack: HPACKIndexing {
        switch self {
        case .indexed: .indexable
        case .notIndexed: .nonIndexable
        case .neverIndexed: .neverIndexed
        }
    }
}
