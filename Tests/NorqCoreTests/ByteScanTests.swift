import Testing
@testable import NorqCore

/// `ByteScan`'s word-at-a-time checks answer exactly what their per-byte definitions say.
@Suite struct ByteScanTests {
    /// Every byte value at every position of buffers of 1-17 bytes (a word, a word and a tail, two words and one),
    /// the other bytes valid for the check.
    @Test func everyByteAtEveryPosition() {
        for length in 1...17 {
            for position in 0..<length {
                for value in 0...255 {
                    var tokenBytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    tokenBytes[position] = UInt8(value)
                    let expectToken = ByteScan.isTokenCharacter(UInt8(value))
                    let token = tokenBytes.withUnsafeBufferPointer { ByteScan.allTokenCharacters($0) }
                    #expect(token == expectToken, "token check of \(value) at \(position) of \(length)")
                    let expectEscape = ByteScan.needsJSONEscape(UInt8(value))
                    let escape = tokenBytes.withUnsafeBufferPointer { ByteScan.mayNeedJSONEscape($0) }
                    #expect(escape == expectEscape, "escape check of \(value) at \(position) of \(length)")
                }
            }
        }
    }

    /// Random buffers of 0-200 bytes, drawn from the neighbours of each class boundary, against the per-byte
    /// definitions.
    @Test func randomBuffersMatchTheDefinitions() {
        var generator = SystemRandomNumberGenerator()
        let edges: [UInt8] = [0x00, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x2C, 0x2D, 0x2E, 0x2F, 0x30, 0x39, 0x3A, 0x3B, 0x40,
                              0x41, 0x5A, 0x5B, 0x5C, 0x5D, 0x5E, 0x5F, 0x60, 0x61, 0x7A, 0x7B, 0x7F, 0x80, 0xE2, 0xFF]
        for _ in 0..<3_000 {
            let length = Int.random(in: 0...200, using: &generator)
            let validOnly = Bool.random(using: &generator)
            let bytes: [UInt8] = (0..<length).map { _ in
                validOnly && Int.random(in: 0..<50, using: &generator) != 0
                    ? UInt8(ascii: "k") : edges.randomElement(using: &generator)!
            }
            let token = bytes.withUnsafeBufferPointer { ByteScan.allTokenCharacters($0) }
            #expect(token == bytes.allSatisfy(ByteScan.isTokenCharacter))
            let escape = bytes.withUnsafeBufferPointer { ByteScan.mayNeedJSONEscape($0) }
            #expect(escape == bytes.contains(where: ByteScan.needsJSONEscape))
        }
    }

    @Test func emptyBuffers() {
        #expect([UInt8]().withUnsafeBufferPointer { ByteScan.allTokenCharacters($0) })
        #expect(![UInt8]().withUnsafeBufferPointer { ByteScan.mayNeedJSONEscape($0) })
    }
}
