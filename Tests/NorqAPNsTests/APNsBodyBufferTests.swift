import NIOCore
@testable import NorqAPNs
import NorqCore
import Testing

@Suite("The payload buffer of the wire request")
struct APNsBodyBufferTests {
    static func address(_ buffer: ByteBuffer) -> UnsafeRawPointer? {
        buffer.withUnsafeReadableBytes { UnsafeRawPointer($0.baseAddress) }
    }

    @Test("the tokens of one send share one body buffer; other bodies get their own, with their own bytes")
    func sharedBodyBuffer() throws {
        let provider = try Fixtures.provider()
        let content = PushContent(title: "shared")
        let options = SendOptions(contentID: 7)
        let first = try provider.prepare(content, for: PushToken(token: String(repeating: "ab", count: 32), platform: .ios),
                                         options: options)
        let second = try provider.prepare(content, for: PushToken(token: String(repeating: "cd", count: 32), platform: .ios),
                                          options: options)
        let a = provider.bodyBuffer(for: first.body)
        let b = provider.bodyBuffer(for: second.body)
        #expect(Array(a.readableBytesView) == first.body)
        #expect(Self.address(a) == Self.address(b), "one buffer for the whole send")

        // Same bytes in another array (a request prepared elsewhere, or decoded from a store): the same bytes,
        // so the same buffer (decided by the bytes, not by where the array lives).
        var copied = first
        copied.body = Array(first.body)
        let c = provider.bodyBuffer(for: copied.body)
        #expect(Array(c.readableBytesView) == first.body)
        #expect(Self.address(c) == Self.address(a))
        // One byte changed, same length: never the cached buffer.
        var changed = first
        changed.body[changed.body.count - 2] ^= 0x01
        let d = provider.bodyBuffer(for: changed.body)
        #expect(Array(d.readableBytesView) == changed.body)
        #expect(Self.address(d) != Self.address(a))
        // Different bytes: their own buffer.
        var other = first
        other.body = Array("{\"aps\":{}}".utf8)
        #expect(Array(provider.bodyBuffer(for: other.body).readableBytesView) == other.body)
    }

    @Test("a later send of the same content takes over the cached payload under its own content id")
    func contentIDFollowsTheLatestSend() throws {
        let provider = try Fixtures.provider()
        let content = PushContent(title: "same")
        let first = try provider.encodedPayload(content, pushType: .alert, sendTime: 1_800_000_000, contentID: 1)
        // Send 2, same content: found by comparing the content once; the entry now carries id 2.
        let second = try provider.encodedPayload(content, pushType: .alert, sendTime: 1_800_000_000, contentID: 2)
        #expect(second == first)
        #expect(second.withUnsafeBufferPointer { $0.baseAddress } == first.withUnsafeBufferPointer { $0.baseAddress })
        // Id 2 now vouches for the content without a comparison (the contract of `SendOptions.contentID`), which
        // shows the id was remembered: a caller that broke the contract would get the cached bytes.
        let vouched = try provider.encodedPayload(PushContent(title: "other"), pushType: .alert,
                                                  sendTime: 1_800_000_000, contentID: 2)
        #expect(vouched == first)
        // Without an id, other content is compared and encoded anew.
        let fresh = try provider.encodedPayload(PushContent(title: "other"), pushType: .alert, sendTime: 1_800_000_000)
        #expect(fresh != first)
    }
}
