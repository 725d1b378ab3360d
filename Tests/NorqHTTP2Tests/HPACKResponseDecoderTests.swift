import NIOCore
import NIOHPACK
import Testing
@testable import NorqHTTP2

/// `HPACKResponseDecoder` answers a repeated block from memory only while the dynamic table is unchanged.
@Suite struct HPACKResponseDecoderTests {
    private func decoder() -> HPACKResponseDecoder {
        HPACKResponseDecoder(allocator: ByteBufferAllocator(), maxDynamicTableSize: HPACKDecoder.maxDynamicTableSize,
                             maxHeaderListSize: 16_384)
    }

    private func decode(_ bytes: [UInt8], with decoder: inout HPACKResponseDecoder) throws -> [String] {
        var block = ByteBuffer(bytes: bytes)
        let decoded = try decoder.decodeHeaders(from: &block)
        #expect(block.readableBytes == 0)
        return decoded.fields.map { "\($0.name): \($0.value)" }
    }

    /// A literal with incremental indexing of a new name (RFC 7541 6.2.1): 0x40, name, value.
    private func indexedLiteral(_ name: String, _ value: String) -> [UInt8] {
        [0x40, UInt8(name.utf8.count)] + Array(name.utf8) + [UInt8(value.utf8.count)] + Array(value.utf8)
    }

    /// `:status: 200` (static index 8), `content-length: 61` without indexing (static name 28), and a field of the
    /// dynamic table (index 62), as a server repeats them answer after answer.
    private let repeated: [UInt8] = [0x88, 0x0F, 0x0D, 0x02] + Array("61".utf8) + [0xBE]

    @Test func aRepeatedBlockIsAnsweredFromMemoryWithTheSameFields() throws {
        var decoder = decoder()
        #expect(try decode(indexedLiteral("server", "one"), with: &decoder) == ["server: one"])
        let first = try decode(repeated, with: &decoder)
        #expect(first == [":status: 200", "content-length: 61", "server: one"])
        #expect(decoder.reuses == 0)
        for _ in 0..<3 { #expect(try decode(repeated, with: &decoder) == first) }
        #expect(decoder.reuses == 3)
    }

    /// The same bytes after a block that changed the table mean other fields: they are decoded again.
    @Test func aBlockThatChangesTheTableForgetsTheRememberedOne() throws {
        var decoder = decoder()
        _ = try decode(indexedLiteral("server", "one"), with: &decoder)
        #expect(try decode(repeated, with: &decoder).last == "server: one")
        _ = try decode(indexedLiteral("server", "two"), with: &decoder)  // now index 62
        #expect(try decode(repeated, with: &decoder).last == "server: two")
        #expect(decoder.reuses == 0)
        // A table size update changes the table too.
        _ = try decode(repeated, with: &decoder)
        _ = try decode([0x20] + repeated.prefix(6), with: &decoder)  // size 0: the table is emptied
        #expect(throws: (any Error).self) { try decode(repeated, with: &decoder) }  // index 62 is gone
    }

    /// A remembered block keeps its id, status and list size; every decoded block gets a new id.
    @Test func idsStatusAndListSize() throws {
        var decoder = decoder()
        var setup = ByteBuffer(bytes: indexedLiteral("server", "one"))
        let first = try decoder.decodeHeaders(from: &setup)
        #expect(first.status == nil)
        var block = ByteBuffer(bytes: repeated)
        let decoded = try decoder.decodeHeaders(from: &block)
        block = ByteBuffer(bytes: repeated)
        let reused = try decoder.decodeHeaders(from: &block)
        #expect(decoded.id != first.id && decoded.id != 0)
        #expect(reused.id == decoded.id)
        #expect(reused.status == 200)
        #expect(reused.listSize == (7 + 3 + 32) + (14 + 2 + 32) + (6 + 3 + 32))
        // A first `:status` that is not a number is the status, not a later one.
        var twoStatuses = ByteBuffer(bytes: [0x08, 0x01] + Array("x".utf8) + [0x88])
        #expect(try decoder.decodeHeaders(from: &twoStatuses).status == nil)
        // Another decoder's blocks never share an id with this one's.
        var other = self.decoder()
        block = ByteBuffer(bytes: [0x88])
        let elsewhere = try other.decodeHeaders(from: &block)
        #expect(elsewhere.id != decoded.id && elsewhere.id != first.id)
    }

    /// Differential: random sequences of blocks from NIOHPACK's encoder (fields from a small pool, so entries repeat
    /// and the table fills and evicts; random indexing), with earlier blocks' exact bytes sent again now and then,
    /// decode to the same fields through `HPACKResponseDecoder` as through a plain `HPACKDecoder`, or both fail.
    @Test func matchesAPlainDecoderOnRandomSequences() throws {
        var generator = SystemRandomNumberGenerator()
        let names = [":status", "content-type", "date", "server", "x-a", "x-b", "content-length"]
        let values = ["200", "400", "application/json", "one", "two", String(repeating: "v", count: 300), "61"]
        let indexings: [HPACKIndexing] = [.indexable, .indexable, .nonIndexable, .neverIndexed]
        var reuses = 0
        for _ in 0..<150 {
            var encoder = HPACKEncoder(allocator: ByteBufferAllocator(), useHuffmanEncoding: Bool.random(using: &generator))
            var plain = HPACKDecoder(allocator: ByteBufferAllocator())
            var ours = decoder()
            var sent: [[UInt8]] = []
            for _ in 0..<40 {
                let bytes: [UInt8]
                if !sent.isEmpty, Int.random(in: 0..<3, using: &generator) == 0 {
                    bytes = sent.randomElement(using: &generator)!
                } else {
                    var fields = HPACKHeaders()
                    for _ in 0..<Int.random(in: 1...6, using: &generator) {
                        fields.add(name: names.randomElement(using: &generator)!,
                                   value: values.randomElement(using: &generator)!,
                                   indexing: indexings.randomElement(using: &generator)!)
                    }
                    var buffer = ByteBuffer()
                    try encoder.encode(headers: fields, to: &buffer)
                    bytes = Array(buffer.readableBytesView)
                }
                sent.append(bytes)
                var forPlain = ByteBuffer(bytes: bytes)
                var forOurs = ByteBuffer(bytes: bytes)
                let expected = try? plain.decodeHeaders(from: &forPlain)
                let actual = try? ours.decodeHeaders(from: &forOurs)
                #expect(actual?.fields.map { "\($0.name): \($0.value)" } == expected?.map { "\($0.name): \($0.value)" })
                if expected == nil { break }  // the two decoders' states after an error are not comparable
            }
            reuses += ours.reuses
        }
        #expect(reuses > 0, "the sequences never repeated a block the decoder could reuse")
    }

    @Test func classification() {
        func neutral(_ bytes: [UInt8]) -> Bool {
            bytes.withUnsafeBytes { HPACKResponseDecoder.leavesTableUnchanged($0) }
        }
        #expect(neutral([]))
        #expect(neutral([0x88, 0xBE]))                                   // indexed
        #expect(neutral([0xFF, 0x80, 0x01]))                             // indexed, multi-byte index
        #expect(neutral([0x0F, 0x0D, 0x01, 0x31]))                       // without indexing, indexed name
        #expect(neutral([0x00, 0x01, 0x61, 0x01, 0x62]))                 // without indexing, literal name
        #expect(neutral([0x10, 0x01, 0x61, 0x01, 0x62]))                 // never indexed
        #expect(!neutral(indexedLiteral("a", "b")))                      // incremental indexing
        #expect(!neutral([0x88, 0x20]))                                  // table size update
        #expect(!neutral([0x0F, 0x0D, 0x05, 0x31]))                      // value past the end
        #expect(!neutral([0x00, 0x01]))                                  // name past the end
        #expect(!neutral([0xFF, 0x80]))                                  // integer past the end
        #expect(!neutral([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]))    // integer too long
    }
}
