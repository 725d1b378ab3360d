@testable import NorqAPNs
import Testing

@Suite("Connection choice")
struct APNsConnectionPickTests {
    @Test("round robin over the connections on the calling event loop when there are any, else over all")
    func prefersLocalConnections() {
        let ready = [10, 11, 20, 21, 22]  // tens digit: the event loop
        let onLoop2 = (0..<6).map { APNsConnectionPool.pick(from: ready, turn: $0) { $0 / 10 == 2 } }
        #expect(onLoop2 == [20, 21, 22, 20, 21, 22])
        let elsewhere = (0..<5).map { APNsConnectionPool.pick(from: ready, turn: $0) { _ in false } }
        #expect(elsewhere == ready)
        #expect(APNsConnectionPool.pick(from: [7], turn: 3) { _ in false } == 7)
        // A wrapped (negative) turn counter still picks a valid index.
        #expect(ready.contains(APNsConnectionPool.pick(from: ready, turn: Int.min + 1) { _ in false }))
    }
}
