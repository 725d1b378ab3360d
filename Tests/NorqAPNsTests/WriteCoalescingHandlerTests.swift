import NIOCore
import NIOEmbedded
@testable import NorqAPNs
import Testing

@Suite("WriteCoalescingHandler: one TLS write per tick, a full record at once")
struct WriteCoalescingHandlerTests {
    static func channel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(WriteCoalescingHandler())
        return channel
    }

    static func frame(_ size: Int, _ byte: UInt8) -> ByteBuffer { ByteBuffer(repeating: byte, count: size) }

    @Test("small flushed writes go out together, as one buffer, when the event loop runs its tasks")
    func smallWritesCoalesce() throws {
        let channel = try Self.channel()
        for byte in UInt8(1)...3 {
            channel.write(Self.frame(100, byte), promise: nil)
            channel.flush()
        }
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil, "nothing before the tick ends")
        channel.embeddedEventLoop.run()
        let written = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(written.readableBytes == 300)
        #expect(Array(written.readableBytesView) == [UInt8](repeating: 1, count: 100) + [UInt8](repeating: 2, count: 100)
                + [UInt8](repeating: 3, count: 100))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        _ = try channel.finish()
    }

    @Test("a flush with a full TLS record gathered writes it at once; the rest waits for the tick")
    func fullRecordGoesOutAtOnce() throws {
        let channel = try Self.channel()
        let size = WriteCoalescingHandler.recordSize / 4 + 1
        for byte in UInt8(1)...4 {
            channel.write(Self.frame(size, byte), promise: nil)
            channel.flush()
        }
        let record = try #require(try channel.readOutbound(as: ByteBuffer.self), "written before the tick ends")
        #expect(record.readableBytes == 4 * size)
        channel.write(Self.frame(10, 9), promise: nil)
        channel.flush()
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        channel.embeddedEventLoop.run()
        #expect(try channel.readOutbound(as: ByteBuffer.self)?.readableBytes == 10)
        _ = try channel.finish()
    }

    @Test("write promises complete when the gathered buffer is written")
    func promisesComplete() throws {
        let channel = try Self.channel()
        let first = channel.embeddedEventLoop.makePromise(of: Void.self)
        let second = channel.embeddedEventLoop.makePromise(of: Void.self)
        var done = 0
        first.futureResult.whenSuccess { done += 1 }
        second.futureResult.whenSuccess { done += 1 }
        channel.write(Self.frame(10, 1), promise: first)
        channel.write(Self.frame(10, 2), promise: second)
        channel.flush()
        #expect(done == 0)
        channel.embeddedEventLoop.run()
        #expect(done == 2)
        _ = try channel.finish()
    }
}
