import Norq
import NorqCore
import Synchronization
import Testing

@Suite("Streaming outcomes: back-pressure and termination")
struct PushOutcomeStreamTests {
    @Test("a consumer that falls behind makes the send wait instead of buffering every outcome")
    func backPressure() async throws {
        let apns = FakeProvider(name: "apns", maxInFlight: 4)
        let r = try NotificationRouter(providers: [apns])
        let buffer = r.outcomeBufferSize
        let total = buffer * 4
        let tokens = (0..<total).map { ios(hexToken($0)) }
        let stream = try r.sendStreaming(content: PushContent(title: "t"), to: recipients(tokens))
        // Nobody reads yet: the send stops after the buffer is full plus what the workers hold.
        // Waits until the count has not moved for 100 ms (at most 5 s).
        var sentWhileIdle = 0
        var unchanged = 0
        for _ in 0..<1_000 {
            try await Task.sleep(for: .milliseconds(5))
            let now = apns.requests.count
            unchanged = (now == sentWhileIdle && now > 0) ? unchanged + 1 : 0
            sentWhileIdle = now
            if unchanged >= 20 { break }
        }
        #expect(sentWhileIdle >= buffer)
        #expect(sentWhileIdle <= buffer + 4 + 1)
        // Reading everything lets the rest through: exactly one outcome per token.
        var seen: Set<DeliveryTarget> = []
        for await outcome in stream {
            #expect(seen.insert(outcome.target).inserted)
        }
        #expect(seen.count == total)
        #expect(apns.requests.count == total)
    }

    /// How many requests the provider has had once the count has not moved for 100 ms (at most 5 s).
    static func settled(_ provider: FakeProvider) async throws -> Int {
        var last = -1
        var unchanged = 0
        for _ in 0..<1_000 {
            try await Task.sleep(for: .milliseconds(5))
            let now = provider.requests.count
            unchanged = now == last ? unchanged + 1 : 0
            last = now
            if unchanged >= 20 { break }
        }
        return last
    }

    @Test("a full buffer takes the send back only once the consumer has read it down to half (a low watermark), not after every outcome read")
    func lowWatermark() async throws {
        let apns = FakeProvider(name: "apns", maxInFlight: 4)
        let r = try NotificationRouter(providers: [apns])
        let buffer = r.outcomeBufferSize
        let total = buffer * 3
        let stream = try r.sendStreaming(content: PushContent(title: "t"), to: recipients((0..<total).map { ios(hexToken($0)) }))
        var iterator = stream.makeAsyncIterator()
        let stalled = try await Self.settled(apns)
        #expect(stalled >= buffer && stalled <= buffer + 5)
        // Read to just above half: still full, nothing new is sent (before, each outcome read let one more through).
        var seen: Set<DeliveryTarget> = []
        for _ in 0..<(buffer / 2 - 10) {
            if let outcome = await iterator.next() { seen.insert(outcome.target) }
        }
        #expect(try await Self.settled(apns) == stalled)
        // Read past half: the send goes on until the buffer is full again.
        for _ in 0..<20 {
            if let outcome = await iterator.next() { seen.insert(outcome.target) }
        }
        let resumed = try await Self.settled(apns)
        #expect(resumed > stalled + buffer / 4)
        while let outcome = await iterator.next() { #expect(seen.insert(outcome.target).inserted) }
        #expect(seen.count == total && apns.requests.count == total)
    }

    @Test("leaving the loop early cancels the rest of the send")
    func earlyExitCancels() async throws {
        let apns = FakeProvider(name: "apns", maxInFlight: 2)
        let r = try NotificationRouter(providers: [apns])
        let tokens = (0..<50_000).map { ios(hexToken($0)) }
        var read = 0
        for await _ in try r.sendStreaming(content: PushContent(title: "t"), to: recipients(tokens)) {
            read += 1
            if read == 5 { break }
        }
        try await Task.sleep(for: .milliseconds(200))
        let sent = apns.requests.count
        try await Task.sleep(for: .milliseconds(200))
        #expect(apns.requests.count == sent, "the send went on after the consumer left")
        #expect(sent < 50_000)
    }

    @Test("dropping the stream unread cancels the send")
    func droppedUnread() async throws {
        let apns = FakeProvider(name: "apns", maxInFlight: 2)
        let r = try NotificationRouter(providers: [apns])
        let tokens = (0..<50_000).map { ios(hexToken($0)) }
        _ = try r.sendStreaming(content: PushContent(title: "t"), to: recipients(tokens))
        try await Task.sleep(for: .milliseconds(200))
        let sent = apns.requests.count
        try await Task.sleep(for: .milliseconds(200))
        #expect(apns.requests.count == sent)
        #expect(sent < 50_000)
    }

    @Test("cancelling the consuming task ends the iteration and the send")
    func consumerCancelled() async throws {
        let apns = FakeProvider(name: "apns", maxInFlight: 1) { _, _ throws(NorqError) in
            try? await Task.sleep(for: .milliseconds(20))
            return FakeProvider.ok()
        }
        let r = try NotificationRouter(providers: [apns])
        let tokens = (0..<1_000).map { ios(hexToken($0)) }
        let stream = try r.sendStreaming(content: PushContent(title: "t"), to: recipients(tokens))
        let consumer = Task {
            var count = 0
            for await _ in stream { count += 1 }
            return count
        }
        try await Task.sleep(for: .milliseconds(100))
        consumer.cancel()
        let count = await consumer.value
        #expect(count < 1_000)
    }
}
