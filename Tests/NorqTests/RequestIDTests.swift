import Norq
import NorqCore
import Testing

@Suite("RequestID")
struct RequestIDTests {
    @Test("UUIDv5 matches the RFC test vector (DNS namespace, python.org)")
    func rfcVector() {
        let dns: [UInt8] = [0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8]
        #expect(RequestID.uuidV5(namespace: dns, name: Array("python.org".utf8)) == "886313e1-3b8a-5372-9b90-0c9aee199e5d")
    }

    @Test("a name hashed piece by piece gives the id of the whole name")
    func piecewise() {
        let dns: [UInt8] = [0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8]
        var v5 = RequestID.V5(namespace: dns)
        v5.update(Array("pyth".utf8))
        v5.update("on")
        v5.update(byte: UInt8(ascii: "."))
        v5.update("org")
        #expect(v5.finalize() == "886313e1-3b8a-5372-9b90-0c9aee199e5d")
    }

    @Test("the id is stable per (key, token), differs otherwise, and is 36 lowercase characters")
    func stable() {
        let a = RequestID.make(idempotencyKey: "order-1", token: "aaaa")
        #expect(a == RequestID.make(idempotencyKey: "order-1", token: "aaaa"))
        #expect(a != RequestID.make(idempotencyKey: "order-1", token: "aaab"))
        #expect(a != RequestID.make(idempotencyKey: "order-2", token: "aaaa"))
        // The separator keeps ("ab", "c") and ("a", "bc") apart.
        #expect(RequestID.make(idempotencyKey: "ab", token: "c") != RequestID.make(idempotencyKey: "a", token: "bc"))
        #expect(a.utf8.count == 36)
        #expect(a == a.lowercased())
        let parts = a.split(separator: "-").map(\.count)
        #expect(parts == [8, 4, 4, 4, 12])
        #expect(Array(a)[14] == "5")
    }

    @Test("random ids are version 4 and differ")
    func random() {
        let a = RequestID.random()
        let b = RequestID.random()
        #expect(a != b)
        #expect(Array(a)[14] == "4")
        #expect("89ab".contains(Array(a)[19]))
    }

    @Test("time-ordered ids are version 7, carry the time, and sort by it as text")
    func timeOrdered() {
        let millis: Int64 = 1_764_000_000_123
        let a = RequestID.timeOrdered(unixMillis: millis)
        #expect(a.utf8.count == 36)
        #expect(Array(a)[14] == "7")
        #expect("89ab".contains(Array(a)[19]))
        // The first 48 bits are the time: 12 hex digits around the first dash.
        let hex = a.replacingOccurrences(of: "-", with: "").prefix(12)
        #expect(Int64(hex, radix: 16) == millis)
        #expect(a != RequestID.timeOrdered(unixMillis: millis), "74 random bits keep ids of one millisecond apart")
        let later = (1...50).map { RequestID.timeOrdered(unixMillis: millis + Int64($0)) }
        #expect(later.sorted() == later)
        #expect(later.allSatisfy { $0 > a })
        #expect(RequestID.timeOrdered(unixMillis: -5).hasPrefix("00000000-0000-7"), "a time before 1970 is clamped")
    }
}
