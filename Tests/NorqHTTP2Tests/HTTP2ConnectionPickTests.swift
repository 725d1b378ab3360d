import NorqHTTP2
import Testing

@Suite("Connection choice")
struct HTTP2ConnectionPickTests {
    static func pick(_ ready: [Int], turn: Int, capacity: Int = 100, loads: [Int: Int] = [:],
                     isLocal: (Int) -> Bool) -> Int {
        HTTP2PoolStateMachine.pick(from: ready, turn: turn, capacity: capacity, isLocal: isLocal,
                                load: { loads[$0, default: 0] })
    }

    @Test("a pool's connections spread evenly over the group's event loops, and a closed one's loop is reused first")
    func connectionsSpreadOverEventLoops() {
        var placement: [Int: Int] = [:]
        for id in 1...4 { placement[id] = HTTP2ConnectionPool.leastUsedLoop(placement, loops: 2) }
        #expect(placement == [1: 0, 2: 1, 3: 0, 4: 1])
        placement[3] = nil  // connection 3 (loop 0) closed: its replacement goes to loop 0
        #expect(HTTP2ConnectionPool.leastUsedLoop(placement, loops: 2) == 0)
        #expect(HTTP2ConnectionPool.leastUsedLoop([1: 0, 2: 0, 3: 2], loops: 3) == 1)
        #expect(HTTP2ConnectionPool.leastUsedLoop([1: 0], loops: 1) == 0)
        // The group's suggestion wins among the least used (pools of one connection each still spread), not over them.
        #expect(HTTP2ConnectionPool.leastUsedLoop([:], loops: 2, preferring: 1) == 1)
        #expect(HTTP2ConnectionPool.leastUsedLoop([1: 1], loops: 2, preferring: 1) == 0)
        #expect(HTTP2ConnectionPool.leastUsedLoop([1: 0, 2: 1], loops: 2, preferring: 1) == 1)
    }

    @Test("round robin over the connections on the calling event loop while they have room")
    func prefersLocalConnections() {
        let ready = [10, 11, 20, 21, 22]  // tens digit: the event loop
        let onLoop2 = (0..<6).map { Self.pick(ready, turn: $0) { $0 / 10 == 2 } }
        #expect(onLoop2.sorted() == [20, 20, 21, 21, 22, 22])
        #expect(Set(onLoop2.prefix(3)) == [20, 21, 22])
        #expect(Self.pick([7], turn: 3) { _ in false } == 7)
        // A wrapped (negative) turn counter still picks a valid index.
        #expect(ready.contains(Self.pick(ready, turn: Int.min + 1) { _ in false }))
    }

    @Test("with no local connection, or none with room, the least loaded connection of all")
    func leastLoadedWhenLocalOnesAreFull() {
        let ready = [10, 11, 20, 21]
        let loads = [10: 130, 11: 100, 20: 40, 21: 7]
        #expect(Self.pick(ready, turn: 0, loads: loads) { $0 / 10 == 1 } == 21)
        #expect(Self.pick(ready, turn: 3, loads: loads) { _ in false } == 21)
        // One local connection still has room: it wins over a less loaded remote one.
        #expect(Self.pick(ready, turn: 0, loads: [10: 100, 11: 99, 20: 0, 21: 0]) { $0 / 10 == 1 } == 11)
        // Equal loads: round robin from the turn, so requests still spread.
        let spread = Set((0..<4).map { Self.pick(ready, turn: $0, loads: [:]) { _ in false } })
        #expect(spread == Set(ready))
    }
}
