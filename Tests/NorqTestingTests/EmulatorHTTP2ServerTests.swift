import NIOCore
import NorqTesting
import Synchronization
import Testing

/// A service of the generic emulator HTTP/2 handler, for its tests: `/echo` answers 200 with the method, path, a
/// header and the body's length; `/slow` answers after 50 ms; `/silent` never answers; bodies over 1 KiB get 413.
private final class EchoService: EmulatorHTTP2Service, Sendable {
    struct Answer: EmulatorHTTP2Answer {
        var status: Int
        var headers: [(String, String)]
        var body: [UInt8]
    }
    struct Record: Sendable {
        var path: String
        var status: Int?
        var answered: Bool
        var connectionID: Int
        var bodyCount: Int
    }
    let records = Mutex<[Record]>([])
    let opened = Mutex(0)
    /// The ids of closed connections, as they close.
    let closed = AsyncStream<Int>.makeStream()

    var maxRequestBodyBytes: Int { 1024 }
    var recordsRequests: Bool { true }

    func payloadTooLarge() -> Answer { Answer(status: 413, headers: [], body: Array("too large".utf8)) }

    func handle(_ request: EmulatorHTTP2Request) -> EmulatorHTTP2Decision<Answer> {
        switch request.path {
        case "/silent":
            return .silent
        case "/slow":
            return .answer(Answer(status: 202, headers: [], body: Array("slow".utf8)), latency: .milliseconds(50))
        default:
            let text = "\(request.method) \(request.path) \(request.header("x-test") ?? "-") \(request.body.readableBytes)"
            return .answer(Answer(status: 200, headers: [("x-echo", "yes")], body: Array(text.utf8)), latency: .zero)
        }
    }

    func connectionOpened(_ channel: any Channel) -> Int {
        opened.withLock { $0 += 1; return $0 }
    }

    func connectionClosed(_ id: Int) { closed.continuation.yield(id) }

    func record(_ request: EmulatorHTTP2Request, answer: Answer?, answered: Bool, connectionID: Int) {
        records.withLock {
            $0.append(Record(path: request.path, status: answer?.status, answered: answered, connectionID: connectionID,
                             bodyCount: request.body.readableBytes))
        }
    }
}

@Suite("The generic emulator HTTP/2 handler and server", .timeLimit(.minutes(1)))
struct EmulatorHTTP2ServerTests {
    @Test("a service answers at once or after its latency, 413 above its body bound, and records each request")
    func answersAndRecords() async throws {
        let service = EchoService()
        let server = try EmulatorHTTP2Server(service: service)
        try await server.start()
        #expect(server.port > 0)
        let client = try await TestH2Client.connect(port: server.port, caCertificatePEM: server.caCertificatePEM)
        let echo = try await client.send(path: "/echo", headers: [("x-test", "hi")], body: Array(repeating: 7, count: 900))
        #expect(echo.status == 200)
        #expect(echo.body == "POST /echo hi 900")
        #expect(echo.headers["x-echo"] == "yes")
        let slow = try await client.send(path: "/slow", headers: [], body: [1])
        #expect(slow.status == 202)
        #expect(slow.body == "slow")
        let large = try await client.send(path: "/echo", headers: [], body: Array(repeating: 1, count: 2000))
        #expect(large.status == 413)
        // A silent request is recorded unanswered when the connection closes.
        _ = await client.sendAll([(method: "POST", path: "/silent", headers: [], body: [1])], timeout: .milliseconds(100))
        await client.close()
        var closedIDs = service.closed.stream.makeAsyncIterator()
        #expect(await closedIDs.next() == 1)
        #expect(service.opened.withLock { $0 } == 1)
        let records = service.records.withLock { $0 }
        #expect(records.map(\.path) == ["/echo", "/slow", "/echo", "/silent"])
        #expect(records.map(\.status) == [200, 202, 413, nil])
        #expect(records.map(\.answered) == [true, true, true, false])
        #expect(records.allSatisfy { $0.connectionID == 1 })
        #expect(records[0].bodyCount == 900)
        await server.shutdown()
    }
}
