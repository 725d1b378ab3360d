import NIOCore
import NIOHPACK
import NorqHTTP2
import Testing

@Suite("HPACKRequestEncoder: what NIOHPACK's decoder reads back, with the dynamic table kept in step")
struct HPACKRequestEncoderTests {
    static func request(path: String, id: String, jwt: String = "bearer eyJhbGciOiJFUzI1NiJ9.x.y") -> HTTP2RequestHead {
        HTTP2RequestHead(method: "POST", authority: "api.sandbox.push.apple.com", path: path, fields: [
            HTTP2HeaderField("apns-topic", "com.example.app"),
            HTTP2HeaderField("apns-push-type", "alert"),
            HTTP2HeaderField("apns-id", id, indexing: .neverIndexed),
            HTTP2HeaderField("authorization", jwt),
        ])
    }

    /// What a decoder must read back from `head`.
    static func pairs(_ head: HTTP2RequestHead) -> [String] {
        [":method: \(head.method)", ":scheme: \(head.scheme)", ":path: \(head.path)", ":authority: \(head.authority)"]
            + head.fields.map { "\($0.name): \($0.value)" }
    }

    static func pairs(_ headers: HPACKHeaders) -> [String] { headers.map { "\($0.name): \($0.value)" } }

    @Test("integers use the prefix and continuation bytes of RFC 7541 C.1")
    func integers() {
        var buffer = ByteBuffer()
        HPACKRequestEncoder.writeInteger(10, prefixBits: 5, mask: 0, into: &buffer)
        HPACKRequestEncoder.writeInteger(1337, prefixBits: 5, mask: 0, into: &buffer)
        HPACKRequestEncoder.writeInteger(42, prefixBits: 8, mask: 0, into: &buffer)
        HPACKRequestEncoder.writeInteger(31, prefixBits: 5, mask: 0x20, into: &buffer)
        #expect(Array(buffer.readableBytesView) == [0x0a, 0x1f, 0x9a, 0x0a, 0x2a, 0x3f, 0x00])
    }

    @Test("repeated requests decode exactly; the constant headers shrink to one byte each after the first")
    func roundTripAndIndexing() throws {
        var encoder = HPACKRequestEncoder()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var sizes: [Int] = []
        for n in 0..<50 {
            let headers = Self.request(path: "/3/device/\(String(repeating: "ab", count: 32))\(n)", id: "id-\(n)")
            var block = ByteBuffer()
            encoder.encode(headers, into: &block)
            sizes.append(block.readableBytes)
            let decoded = try decoder.decodeHeaders(from: &block)
            #expect(Self.pairs(decoded) == Self.pairs(headers))
            #expect(block.readableBytes == 0)
        }
        // :method, :scheme, :authority, apns-topic, apns-push-type, authorization: 1 byte each from the second
        // request on; the path and apns-id stay literals.
        let path = 10 + 64 + 1, id = 4
        #expect(sizes[1] == 6 + (2 + path) + (1 + 1 + 7 + 1 + id))
        #expect(sizes[0] > sizes[1] + 80)
    }

    @Test("never-indexed and non-indexed headers stay out of the table, with the never-indexed bit on the wire")
    func indexingHints() throws {
        var encoder = HPACKRequestEncoder()
        var headers = HPACKHeaders()
        headers.add(name: "apns-id", value: "secret", indexing: .neverIndexed)
        headers.add(name: "apns-expiration", value: "0", indexing: .nonIndexable)
        var block = ByteBuffer()
        encoder.encode(headers, into: &block)
        #expect(block.getInteger(at: 0, as: UInt8.self) == 0x10)  // literal never indexed, new name
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        let decoded = try decoder.decodeHeaders(from: &block)
        #expect(Self.pairs(decoded) == ["apns-id: secret", "apns-expiration: 0"])
        #expect(decoded.map(\.indexable) == [.neverIndexed, .nonIndexable])
        var again = ByteBuffer()
        encoder.encode(headers, into: &again)
        #expect(again.readableBytes == 1 + 1 + 7 + 1 + 6 + 1 + 1 + 15 + 1 + 1)  // literals again: nothing was indexed
    }

    @Test("many distinct indexed headers evict the oldest entries as the decoder does")
    func eviction() throws {
        var encoder = HPACKRequestEncoder()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        for round in 0..<3 {
            for n in 0..<120 {
                var headers = HPACKHeaders()
                headers.add(name: "x-header-\(n % 40)", value: String(repeating: "v", count: n % 97) + "\(round)")
                headers.add(name: "apns-topic", value: "com.example.app")
                var block = ByteBuffer()
                encoder.encode(headers, into: &block)
                let decoded = try decoder.decodeHeaders(from: &block)
                #expect(Self.pairs(decoded) == Self.pairs(headers))
            }
        }
    }

    @Test("a smaller SETTINGS_HEADER_TABLE_SIZE is signalled before the next block, smallest value first")
    func tableSizeUpdates() throws {
        var encoder = HPACKRequestEncoder()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        func roundTrip(_ n: Int) throws -> ByteBuffer {
            let headers = Self.request(path: "/3/device/\(n)", id: "\(n)")
            var block = ByteBuffer()
            encoder.encode(headers, into: &block)
            let copy = block
            let decoded = try decoder.decodeHeaders(from: &block)
            #expect(Self.pairs(decoded) == Self.pairs(headers))
            return copy
        }
        _ = try roundTrip(0)
        encoder.setPeerMaxTableSize(0)
        let emptied = try roundTrip(1)
        #expect(emptied.getInteger(at: 0, as: UInt8.self) == 0x20)  // size update to 0
        #expect(decoder.allowedDynamicTableLength == 0)
        encoder.setPeerMaxTableSize(100)
        encoder.setPeerMaxTableSize(50)
        encoder.setPeerMaxTableSize(1 << 20)  // more than 4,096 is allowed, not used
        let restored = try roundTrip(2)
        #expect(Array(restored.readableBytesView.prefix(4)) == [0x3f, 0x13, 0x3f, 0xe1])  // 50, then 4,096
        #expect(encoder.maxTableSize == 4_096)
        #expect(decoder.allowedDynamicTableLength == 4_096)
        #expect(try roundTrip(3).getInteger(at: 0, as: UInt8.self) == 0x83)  // no size update any more: :method POST
    }

    @Test("a header larger than the whole table is sent as a literal and not indexed")
    func oversizedHeader() throws {
        var encoder = HPACKRequestEncoder()
        encoder.setPeerMaxTableSize(64)
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var headers = HPACKHeaders()
        headers.add(name: "authorization", value: String(repeating: "j", count: 200))
        var sizes: [Int] = []
        for _ in 0..<2 {
            var block = ByteBuffer()
            encoder.encode(headers, into: &block)
            sizes.append(block.readableBytes)
            let decoded = try decoder.decodeHeaders(from: &block)
            #expect(Self.pairs(decoded) == Self.pairs(headers))
        }
        // The first block starts with the size update to 64 (two bytes); then a literal without indexing: name
        // 23 (two bytes), length 200 (two bytes), the value.
        #expect(sizes == [2 + 2 + 2 + 200, 2 + 2 + 200])
    }

    @Test("fields that change at a position (renewed JWT, other topics, channel requests) decode exactly, also while a small table evicts", arguments: [4_096, 300, 120, 0])
    func changingFields(tableSize: Int) throws {
        var encoder = HPACKRequestEncoder()
        encoder.setPeerMaxTableSize(tableSize)
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var generator = SystemRandomNumberGenerator()
        for n in 0..<2_000 {
            let jwt = "bearer jwt-\(n / 300)"
            var head: HTTP2RequestHead
            switch Int.random(in: 0..<4, using: &generator) {
            case 0:
                head = Self.request(path: "/3/device/\(n)", id: "id-\(n)", jwt: jwt)
            case 1:
                head = Self.request(path: "/3/device/\(n)", id: "id-\(n)", jwt: jwt)
                head.fields[0].value = "com.example.app\(Int.random(in: 0..<12, using: &generator)).voip"
                head.fields.insert(HTTP2HeaderField("apns-expiration", "\(n)", indexing: .notIndexed), at: 2)
            case 2:
                head = HTTP2RequestHead(method: "GET", authority: "api-manage-broadcast.sandbox.push.apple.com:2195",
                                        path: "/1/apps/com.example/channels",
                                        fields: [HTTP2HeaderField("apns-channel-id", "ch\(n)", indexing: .neverIndexed),
                                                 HTTP2HeaderField("apns-request-id", "r\(n)", indexing: .neverIndexed),
                                                 HTTP2HeaderField("authorization", jwt)])
            default:
                head = Self.request(path: "/3/device/\(n)", id: "id-\(n)", jwt: jwt)
                head.fields.removeFirst()
                head.method = "DELETE"
            }
            var block = ByteBuffer()
            encoder.encode(head, into: &block)
            let decoded = try decoder.decodeHeaders(from: &block)
            #expect(Self.pairs(decoded) == Self.pairs(head))
            if Self.pairs(decoded) != Self.pairs(head) { return }
        }
    }
}
