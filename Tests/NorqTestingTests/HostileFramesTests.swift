import NIOCore
import NIOHPACK
@testable import NorqHostileTesting
@testable import NorqTesting
import Testing

/// The hostile server's own wire encoding: what it sends must be valid apart from the fault it injects.
@Suite("HostileHTTP2Server frames")
struct HostileFramesTests {
    @Test("literal header fields decode with NIOHPACK, short and long (multi-byte lengths)", arguments: [0, 1, 126, 127, 128, 16_383, 70_000])
    func literals(length: Int) throws {
        var block = ByteBuffer()
        HostileFrames.literal(":status", "200", into: &block)
        HostileFrames.literal("x-padding", String(repeating: "a", count: length), into: &block)
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator(), maxDynamicTableSize: 4096, maxHeaderListSize: 1 << 20)
        let headers = try decoder.decodeHeaders(from: &block)
        #expect(headers.first(name: ":status") == "200")
        #expect(headers.first(name: "x-padding")?.utf8.count == length)
        #expect(block.readableBytes == 0)
    }

    @Test("frame headers carry the 24-bit length, type, flags and a 31-bit stream id")
    func frameHeader() {
        let frame = HostileFrames.frame(HostileFrames.data, flags: 0x1, stream: 0x8000_0003) { $0.writeRepeatingByte(7, count: 70_000) }
        #expect(frame.readableBytes == 9 + 70_000)
        #expect(frame.getBytes(at: 0, length: 5) == [0x01, 0x11, 0x70, 0x00, 0x01])
        #expect(frame.getInteger(at: 5, as: UInt32.self) == 3)
        let settings = HostileFrames.settingsFrame([(0x3, 100), (0x4, 1 << 20)])
        #expect(settings.getBytes(at: 0, length: 4) == [0, 0, 12, 0x4])
    }

    @Test("a flight before a reset is padded to one of the sizes on the wire, answers first when small")
    func flightPadding() {
        for index in 0..<HostileConnectionHandler.flightSizes.count {
            var answers = ByteBuffer(repeating: 1, count: 80)
            let flight = HostileConnectionHandler.padded(&answers, connectionIndex: index)
            let wire = HostileConnectionHandler.flightSizes[index]
            let records = (wire + 16_384 + 21) / (16_384 + 22)
            #expect(flight.readableBytes + records * 22 == wire, "connection \(index)")
            if wire <= 16_384 {
                #expect(flight.getBytes(at: 0, length: 80) == [UInt8](repeating: 1, count: 80))
            } else {
                #expect(flight.getBytes(at: flight.readableBytes - 80, length: 80) == [UInt8](repeating: 1, count: 80))
            }
        }
    }
}
