import NorqZlib
import Testing

@Suite("Gzip over the system zlib")
struct GzipTests {
    @Test("gzip round trip; a corrupt, truncated or oversized body does not inflate")
    func roundTrip() throws {
        let body = Array(String(repeating: #"{"to":"ExponentPushToken[abc]","title":"Hello"},"#, count: 100).utf8)
        let compressed = try #require(Gzip.compress(body))
        #expect(compressed.starts(with: [0x1f, 0x8b]))  // the gzip magic
        #expect(compressed.count < body.count / 5)
        #expect(Gzip.decompress(compressed, limit: 1 << 20) == body)
        #expect(Gzip.decompress(compressed, limit: 100) == nil)
        #expect(Gzip.decompress(Array(compressed.prefix(20)), limit: 1 << 20) == nil)
        #expect(Gzip.decompress([1, 2, 3, 4], limit: 1 << 20) == nil)
    }

    @Test("an empty body round-trips")
    func empty() throws {
        let compressed = try #require(Gzip.compress([]))
        #expect(Gzip.decompress(compressed, limit: 16) == [])
    }
}
