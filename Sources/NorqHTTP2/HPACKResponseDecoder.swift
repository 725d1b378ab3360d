import NIOCore
import NIOHPACK
import Synchronization

/// NIOHPACK's decoder, remembering the last header block that left the dynamic table as it was.
///
/// A server answers most requests with the same header block: every field indexed or a literal that is not added
/// to the table (`content-length`, a never-indexed field). Such a block decodes to the same fields for as long as
/// the dynamic table is unchanged, so a block equal to the remembered one returns its fields without decoding.
/// Any block that changes the table (a literal with incremental indexing, a table size update) is decoded and
/// forgets the remembered block. Bound: one block of at most ``maxRememberedBytes`` bytes.
struct HPACKResponseDecoder {
    /// The largest block remembered; a longer one is always decoded.
    static let maxRememberedBytes = 512

    /// A decoded header block and what every response reads of it, worked out once per distinct block.
    struct Block {
        var fields: HPACKHeaders
        /// RFC 9113 6.5.2's size: names and values plus 32 octets per field.
        var listSize: Int
        /// The first `:status` field's value as a number, if it is one.
        var status: Int?
        /// The same for every block answered from memory, and never the same for two decoded blocks (of any
        /// connection in the process): a cache of what is made from `fields` may key on it.
        var id: UInt64

        init(fields: HPACKHeaders, id: UInt64) {
            self.fields = fields
            self.id = id
            var listSize = 0
            var status: Int?
            var statusSeen = false
            for field in fields {
                listSize += field.name.utf8.count + field.value.utf8.count + 32
                if !statusSeen, field.name == ":status" {
                    statusSeen = true
                    status = Int(field.value)
                }
            }
            self.listSize = listSize
            self.status = status
        }
    }

    private static let blockIDs = Atomic<UInt64>(0)

    private var decoder: HPACKDecoder
    private var rememberedBlock: [UInt8] = []
    private var remembered: Block?
    /// How many blocks were answered from the remembered one (for tests and diagnosis).
    private(set) var reuses = 0

    init(allocator: ByteBufferAllocator, maxDynamicTableSize: Int, maxHeaderListSize: Int) {
        self.decoder = HPACKDecoder(allocator: allocator, maxDynamicTableSize: maxDynamicTableSize,
                                    maxHeaderListSize: maxHeaderListSize)
    }

    /// The fields of `block`, which is consumed. Throws NIOHPACK's errors.
    mutating func decodeHeaders(from block: inout ByteBuffer) throws -> Block {
        if let remembered, block.readableBytes == rememberedBlock.count,
           block.withUnsafeReadableBytes({ bytes in rememberedBlock.withUnsafeBytes { $0.elementsEqual(bytes) } }) {
            block.moveReaderIndex(forwardBy: block.readableBytes)
            reuses &+= 1
            return remembered
        }
        let neutral = block.readableBytes <= Self.maxRememberedBytes
            && block.withUnsafeReadableBytes { Self.leavesTableUnchanged(UnsafeRawBufferPointer($0)) }
        remembered = nil
        if neutral {
            // The array's storage is reused from block to block.
            rememberedBlock.removeAll(keepingCapacity: true)
            rememberedBlock.append(contentsOf: block.readableBytesView)
        }
        let decoded = Block(fields: try decoder.decodeHeaders(from: &block),
                            id: Self.blockIDs.wrappingAdd(1, ordering: .relaxed).newValue)
        if neutral { remembered = decoded }
        return decoded
    }

    /// True when every field representation of `block` leaves the dynamic table unchanged (RFC 7541 6.1-6.2.3:
    /// indexed, literal without indexing, literal never indexed); false for one that changes it (6.2.1, 6.3) or
    /// a block that does not parse (the decoder then says why).
    static func leavesTableUnchanged(_ block: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        let count = block.count
        // Skips an HPACK integer with an N-bit prefix (RFC 7541 5.1); returns its value, or nil past the end.
        func integer(prefixBits: Int) -> Int? {
            guard index < count else { return nil }
            let mask = (1 << prefixBits) - 1
            var value = Int(block[index]) & mask
            index += 1
            guard value == mask else { return value }
            var shift = 0
            while index < count {
                let byte = Int(block[index])
                index += 1
                guard shift <= 28 else { return nil }
                value += (byte & 0x7F) << shift
                shift += 7
                if byte & 0x80 == 0 { return value }
            }
            return nil
        }
        func skipString() -> Bool {
            guard let length = integer(prefixBits: 7), length <= count - index else { return false }
            index += length
            return true
        }
        while index < count {
            let first = block[index]
            if first & 0x80 != 0 {
                guard integer(prefixBits: 7) != nil else { return false }
            } else if first & 0xE0 == 0 {
                // 0000xxxx (without indexing) or 0001xxxx (never indexed): a 4-bit name index, 0 = a literal name.
                guard let nameIndex = integer(prefixBits: 4) else { return false }
                if nameIndex == 0, !skipString() { return false }
                if !skipString() { return false }
            } else {
                return false  // 01xxxxxx (incremental indexing) or 001xxxxx (table size update)
            }
        }
        return true
    }
}
