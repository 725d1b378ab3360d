import Foundation
import NIOCore
import NorqHTTP2
import Testing

/// The frame parser and the connection state machine fed mutated and random frame sequences: no crash, no
/// unbounded memory, every frame either parsed or a typed error, every request ending exactly once.
/// Runs about 2 seconds; `NORQ_FUZZ_SECONDS=<n>` runs longer.
@Suite("HTTP2 frame fuzzing")
struct HTTP2FrameFuzzTests {
    static var seconds: Double {
        ProcessInfo.processInfo.environment["NORQ_FUZZ_SECONDS"].flatMap(Double.init) ?? 2
    }

    /// A deterministic generator, so that a failure can be replayed from its seed.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9e37_79b9_7f4a_7c15
            var z = state
            z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
            z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
            return z ^ (z >> 31)
        }
    }

    /// A plausible server conversation: SETTINGS, answers, control frames.
    static func validSequence(_ h: inout MachineHarness, streams: Int, random: inout SplitMix) -> [ByteBuffer] {
        var frames: [ByteBuffer] = [Wire.settings([(3, 100), (4, 65_535)])]
        for index in 0..<streams {
            let id = Int32(2 * index + 1)
            let status = ["200", "400", "410", "103", "500"].randomElement(using: &random)!
            frames.append(Wire.headers(&h.encoder, stream: id, status: status, [("apns-id", "\(index)")], endStream: false))
            frames.append(Wire.data(stream: id, Array("{\"reason\":\"x\"}".utf8), endStream: Bool.random(using: &random)))
            frames.append(Wire.windowUpdate(stream: 0, UInt32.random(in: 0...70_000, using: &random)))
            frames.append(Wire.frame(HTTP2Wire.FrameType.ping, [1, 2, 3, 4, 5, 6, 7, 8]))
            if Bool.random(using: &random) { frames.append(Wire.rst(stream: id, UInt32.random(in: 0...13, using: &random))) }
        }
        frames.append(Wire.goAway(last: Int32.random(in: 0...Int32(2 * streams), using: &random), 0, debug: "x"))
        return frames
    }

    static func mutate(_ buffer: ByteBuffer, _ random: inout SplitMix) -> ByteBuffer {
        var bytes = Array(buffer.readableBytesView)
        guard !bytes.isEmpty else { return buffer }
        switch Int.random(in: 0..<6, using: &random) {
        case 0: bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
        case 1: bytes[Int.random(in: 0..<min(9, bytes.count), using: &random)] ^= 1 << UInt8.random(in: 0..<8, using: &random)
        case 2: bytes.removeLast(Int.random(in: 0...bytes.count, using: &random))
        case 3: bytes += (0..<Int.random(in: 0..<64, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
        case 4: if bytes.count > 3 { bytes[3] = UInt8.random(in: 0...12, using: &random) }  // another frame type
        default: if bytes.count > 4 { bytes[4] = UInt8.random(in: 0...255, using: &random) }  // other flags
        }
        return ByteBuffer(bytes: bytes)
    }

    @Test("mutated and random frame sequences: a frame or a typed error, bounded, every request ends once")
    func fuzz() {
        let deadline = Date().addingTimeInterval(Self.seconds)
        var seed: UInt64 = 0x4e4f_5251
        var runs = 0
        while Date() < deadline {
            seed &+= 1
            var random = SplitMix(state: seed)
            var h = MachineHarness(settings: nil)
            let streams = Int.random(in: 1...8, using: &random)
            for _ in 0..<streams { h.send(body: Int.random(in: 0...3_000, using: &random)) }
            var input = Self.validSequence(&h, streams: streams, random: &random)
            for index in input.indices where Int.random(in: 0..<4, using: &random) == 0 {
                input[index] = Self.mutate(input[index], &random)
            }
            if Int.random(in: 0..<4, using: &random) == 0 {
                input.insert(ByteBuffer(bytes: (0..<Int.random(in: 0..<200, using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random)
                }), at: Int.random(in: 0...input.count, using: &random))
            }
            // Delivered in random splits, as TCP may.
            var all = ByteBuffer()
            for var frame in input { all.writeBuffer(&frame) }
            while all.readableBytes > 0, !h.closed {
                let chunk = all.readSlice(length: min(all.readableBytes, Int.random(in: 1...4_096, using: &random)))!
                h.receive(chunk)
                if Bool.random(using: &random) { h.readComplete() }
                #expect(h.machine.outbound.readableBytes < 1 << 20, "seed \(seed)")
                _ = h.written()
            }
            h.tick(advance: .seconds(11))  // every deadline passes
            h.machine.channelClosed(reason: "end of run")
            h.run()
            let ended = h.outcomes.completedCount + Set(h.requeued.map(\.index)).count
            #expect(ended == streams, "seed \(seed): \(ended) of \(streams) requests ended")
            #expect(h.outcomes.completedOnce, "seed \(seed)")
            if ended != streams { return }
            runs += 1
        }
        #expect(runs > 0)
    }

    @Test("the frame decoder alone on random bytes: frames or a typed error, never more held than one frame and a block")
    func decoderOnRandomBytes() {
        let deadline = Date().addingTimeInterval(Self.seconds / 2)
        var random = SplitMix(state: 42)
        var frames = 0
        var errors = 0
        while Date() < deadline {
            var decoder = HTTP2FrameDecoder(maxHeaderBlockBytes: 65_536)
            for _ in 0..<50 {
                var bytes = ByteBuffer(bytes: (0..<Int.random(in: 0..<300, using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random)
                })
                // Mostly plausible headers: small lengths, known types.
                if bytes.readableBytes >= 9, Bool.random(using: &random) {
                    bytes.setInteger(UInt8(0), at: 0)
                    bytes.setInteger(UInt16(bytes.readableBytes - 9), at: 1)
                    bytes.setInteger(UInt8.random(in: 0...9, using: &random), at: 3)
                }
                decoder.receive(&bytes)
                do {
                    while try decoder.nextFrame() != nil { frames += 1 }
                } catch {
                    errors += 1
                    break  // typed (HTTP2ProtocolError): the connection would end here
                }
                #expect(decoder.bufferedBytes < 9 + 16_384 + 65_536)
            }
        }
        #expect(frames > 0 && errors > 0)
    }
}
