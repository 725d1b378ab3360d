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
}
