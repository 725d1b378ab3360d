import NIOCore
import NIOHPACK

/// The HPACK (RFC 7541) encoder of the APNs client: plain (not Huffman-coded) string literals, the static table,
/// and a dynamic table for the headers marked `.indexable`, which are the same for every request of a provider
/// (`:authority`, `apns-topic`, `apns-push-type`, `apns-priority`, the JWT). After a connection's first request
/// those cost one or two bytes each. Headers marked `.nonIndexable` or `.neverIndexed` (the path, `apns-id`) are
/// written as literals and never enter the table.
///
/// Huffman coding saves a few bytes on the per-request literals but costs more CPU than the bytes it saves on a
/// local or data-centre link; the decoder on the other side accepts either.
struct HPACKRequestEncoder {
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
    static let staticTable: [(name: String, value: String)] = [
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
    private(set) var maxTableSize = HPACKRequestEncoder.defaultTableSize
    /// Size changes the decoder has not been told about yet, signalled at the start of the next header block:
    /// the smallest size taken since the last block, then the final one (RFC 7541 4.2).
    private var sizeUpdate: (smallest: Int, final: Int)?

    init() {}

    /// Applies the peer's `SETTINGS_HEADER_TABLE_SIZE`: the table shrinks (and the next block says so) when the
    /// peer allows less than the current size; it grows back, at most to 4,096 bytes, when it allows more.
    mutating func setPeerMaxTableSize(_ size: Int) {
        let newSize = min(max(0, size), Self.defaultTableSize)
        guard newSize != maxTableSize else { return }
        maxTableSize = newSize
        evict(toFit: 0)
        sizeUpdate = (min(sizeUpdate?.smallest ?? newSize, newSize), newSize)
    }

    /// Appends the header block of `headers` to `buffer`.
    mutating func encode(_ headers: HPACKHeaders, into buffer: inout ByteBuffer) {
        if let update = sizeUpdate {
            Self.writeInteger(update.smallest, prefixBits: 5, mask: 0x20, into: &buffer)
            if update.final != update.smallest {
                Self.writeInteger(update.final, prefixBits: 5, mask: 0x20, into: &buffer)
            }
            sizeUpdate = nil
        }
        for (name, value, indexing) in headers {
            encode(name: name, value: value, indexing: indexing, into: &buffer)
        }
    }

    private mutating func encode(name: String, value: String, indexing: HPACKIndexing, into buffer: inout ByteBuffer) {
        let pair = Pair(name: name, value: value)
        if let index = Self.staticPairs[pair] {
            Self.writeInteger(index, prefixBits: 7, mask: 0x80, into: &buffer)
            return
        }
        switch indexing {
        case .indexable:
            if let sequence = byPair[pair], let index = dynamicIndex(of: sequence) {
                Self.writeInteger(index, prefixBits: 7, mask: 0x80, into: &buffer)
                return
            }
            let nameIndex = self.nameIndex(of: name)
            let size = name.utf8.count + value.utf8.count + 32
            guard size <= maxTableSize else {
                writeLiteral(nameIndex: nameIndex, name: name, value: value, prefixBits: 4, mask: 0x00, into: &buffer)
                return
            }
            writeLiteral(nameIndex: nameIndex, name: name, value: value, prefixBits: 6, mask: 0x40, into: &buffer)
            insert(pair, size: size)
        case .nonIndexable:
            writeLiteral(nameIndex: nameIndex(of: name), name: name, value: value, prefixBits: 4, mask: 0x00, into: &buffer)
        case .neverIndexed:
            writeLiteral(nameIndex: nameIndex(of: name), name: name, value: value, prefixBits: 4, mask: 0x10, into: &buffer)
        }
    }

    private func nameIndex(of name: String) -> Int? {
        if let index = Self.staticNames[name] { return index }
        if let sequence = byName[name] { return dynamicIndex(of: sequence) }
        return nil
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
                              into buffer: inout ByteBuffer) {
        if let nameIndex {
            Self.writeInteger(nameIndex, prefixBits: prefixBits, mask: mask, into: &buffer)
        } else {
            buffer.writeInteger(mask)
            Self.writeString(name, into: &buffer)
        }
        Self.writeString(value, into: &buffer)
    }

    /// A string literal, not Huffman-coded.
    private static func writeString(_ string: String, into buffer: inout ByteBuffer) {
        writeInteger(string.utf8.count, prefixBits: 7, mask: 0x00, into: &buffer)
        buffer.writeString(string)
    }

    /// An HPACK integer (RFC 7541 5.1) in a byte whose high bits are `mask`.
    static func writeInteger(_ value: Int, prefixBits: Int, mask: UInt8, into buffer: inout ByteBuffer) {
        let limit = (1 << prefixBits) - 1
        if value < limit {
            buffer.writeInteger(mask | UInt8(value))
            return
        }
        buffer.writeInteger(mask | UInt8(limit))
        var rest = value - limit
        while rest >= 128 {
            buffer.writeInteger(UInt8(rest & 0x7f | 0x80))
            rest >>= 7
        }
        buffer.writeInteger(UInt8(rest))
    }
}
