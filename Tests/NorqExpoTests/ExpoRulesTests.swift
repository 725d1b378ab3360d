import NorqCore
@testable import Norq
@testable import NorqExpo
import Testing

@Suite("Expo rules without I/O")
struct ExpoRulesTests {
    @Test("rate limit: one second's worth goes at once, then 600/s per project; projects are separate; 0 is off")
    func rateLimit() {
        var limiter = ExpoRateLimiter(rate: 600)
        let start = ContinuousClock.now
        #expect(limiter.reserve(600, project: "a", now: start) == .zero)
        #expect(limiter.reserve(60, project: "a", now: start) == .milliseconds(100))
        #expect(limiter.reserve(100, project: "b", now: start) == .zero)
        // A second later the first 600 are paid for: the 60 booked ahead still count.
        #expect(limiter.reserve(600, project: "a", now: start + .seconds(1)) == .milliseconds(100))
        var off = ExpoRateLimiter(rate: 0)
        #expect(off.reserve(1_000_000, project: "a", now: start) == .zero)
    }

    @Test("rate limit: a booking given back (a request refused unprocessed) is not counted when the group is sent again")
    func rateLimitRelease() {
        var limiter = ExpoRateLimiter(rate: 600)
        let start = ContinuousClock.now
        #expect(limiter.reserve(600, project: "", now: start) == .zero)
        // Refused as mixing projects: given back, then each group books under its own project.
        limiter.release(600, project: "", now: start)
        #expect(limiter.reserve(60, project: "", now: start) == .zero, "the 600 given back no longer count")
        #expect(limiter.reserve(600, project: "a", now: start) == .zero)
        // Without the release, the same 660 in one project would wait: the rule still counts real sends.
        var counted = ExpoRateLimiter(rate: 600)
        _ = counted.reserve(600, project: "", now: start)
        #expect(counted.reserve(60, project: "", now: start) == .milliseconds(100))
        // Giving back more than was booked leaves nothing booked, never a credit.
        limiter.release(10_000, project: "", now: start)
        #expect(limiter.reserve(600, project: "", now: start) == .zero)
        #expect(limiter.reserve(60, project: "", now: start) == .milliseconds(100))
    }

    @Test("rate limit keeps at most maxProjects projects")
    func rateLimitBound() {
        var limiter = ExpoRateLimiter(rate: 1)
        let start = ContinuousClock.now
        for index in 0..<(ExpoRateLimiter.maxProjects + 50) {
            _ = limiter.reserve(5, project: "p\(index)", now: start)
        }
        #expect(limiter.trackedProjects <= ExpoRateLimiter.maxProjects)
    }

    @Test("project memory remembers tokens up to its limit, forgetting the oldest")
    func projectMemory() {
        var memory = ExpoProjectMemory(limit: 3)
        for index in 0..<5 { memory.remember("t\(index)", project: "p\(index % 2)") }
        #expect(memory.count == 3)
        #expect(memory.project(of: "t0") == nil)
        #expect(memory.project(of: "t4") == "p0")
        #expect(memory.project(of: "t3") == "p1")
    }

    @Test("batching: a full group leaves at once; a partial one when its linger ends, never after a deadline")
    func accumulator() {
        var batches = BatchAccumulator<Int>(maxBatchSize: 3, linger: .milliseconds(5))
        let now = ContinuousClock.now
        let far = now + .seconds(10)
        guard case .arm(let key, let generation, let at) = batches.add(1, key: "p", deadline: far, now: now) else {
            Issue.record("the first entry arms no timer"); return
        }
        #expect(key == "p" && at == now + .milliseconds(5))
        guard case .wait = batches.add(2, key: "p", deadline: far, now: now) else { Issue.record("second"); return }
        guard case .flush(let full) = batches.add(3, key: "p", deadline: far, now: now) else { Issue.record("full"); return }
        #expect(full == [1, 2, 3])
        // The timer armed for the flushed group finds nothing.
        guard case .wait = batches.expire(key: "p", generation: generation, now: now + .milliseconds(5)) else {
            Issue.record("a stale timer flushed"); return
        }
        // Another key is its own group; an entry due before the linger ends re-arms earlier.
        guard case .arm(_, _, _) = batches.add(10, key: "q", deadline: far, now: now) else { Issue.record("q"); return }
        guard case .arm(_, let soon, let soonAt) = batches.add(11, key: "q", deadline: now + .milliseconds(1), now: now) else {
            Issue.record("an earlier deadline did not re-arm"); return
        }
        #expect(soonAt == now + .milliseconds(1))
        #expect(batches.pending == 2)
        guard case .flush(let due) = batches.expire(key: "q", generation: soon, now: now + .milliseconds(1)) else {
            Issue.record("the deadline did not flush"); return
        }
        #expect(due == [10, 11])
        #expect(batches.pending == 0)
    }

    @Test("batching: a group still being filled is not cut at its linger, but leaves at maxHold")
    func accumulatorQuietRule() {
        var batches = BatchAccumulator<Int>(maxBatchSize: 100, linger: .milliseconds(2), maxHold: .milliseconds(10))
        let start = ContinuousClock.now
        let far = start + .seconds(10)
        guard case .arm(_, var generation, var at) = batches.add(0, key: "", deadline: far, now: start) else {
            Issue.record("no timer"); return
        }
        // Entries keep coming every millisecond: each expiry re-arms, until maxHold.
        var added = 1
        var flushed: [Int] = []
        while flushed.isEmpty && added < 50 {
            _ = batches.add(added, key: "", deadline: far, now: start + .milliseconds(added))
            added += 1
            guard at <= start + .milliseconds(added) else { continue }
            switch batches.expire(key: "", generation: generation, now: at) {
            case .flush(let entries): flushed = entries
            case .arm(_, let next, let nextAt): (generation, at) = (next, nextAt)
            case .wait: Issue.record("the current timer found nothing"); return
            }
        }
        #expect(at <= start + .milliseconds(10))
        #expect(flushed.count >= 9 && flushed.count <= 11, "\(flushed.count)")
        // A quiet group leaves at its linger.
        guard case .arm(_, let quiet, let quietAt) = batches.add(7, key: "q", deadline: far, now: start) else {
            Issue.record("q"); return
        }
        guard case .flush(let alone) = batches.expire(key: "q", generation: quiet, now: quietAt) else {
            Issue.record("a quiet group was held"); return
        }
        #expect(alone == [7])
    }

    @Test("chunked splits into bounded chunks")
    func chunks() {
        #expect(chunked(Array(0..<250), size: 100).map(\.count) == [100, 100, 50])
        #expect(chunked([Int](), size: 100).isEmpty)
    }
}

@Suite("Receipt polling")
struct ReceiptPollingTests {
    @Test("the first poll waits the first delay, then it doubles up to the cap")
    func backoff() {
        #expect(ReceiptPolling.delay(beforePoll: 0, first: .seconds(1), maximum: .seconds(60)) == .seconds(1))
        #expect(ReceiptPolling.delay(beforePoll: 1, first: .seconds(1), maximum: .seconds(60)) == .seconds(2))
        #expect(ReceiptPolling.delay(beforePoll: 3, first: .seconds(1), maximum: .seconds(60)) == .seconds(8))
        #expect(ReceiptPolling.delay(beforePoll: 10, first: .seconds(1), maximum: .seconds(60)) == .seconds(60))
        #expect(ReceiptPolling.delay(beforePoll: 1_000_000, first: .seconds(1), maximum: .seconds(60)) == .seconds(60))
    }
}

@Suite("Expo batch body")
struct ExpoBatchBodyTests {
    @Test("messages of different contents stay apart in a batch body, each its prepared message with `to` an array")
    func batchBody() async throws {
        let provider = try ExpoProvider(name: "expo", configuration: ExpoConfiguration())
        let requests = try (0..<3).map {
            try provider.prepare(PushContent(title: "T\($0)", data: ["n": .int(Int64($0))]),
                                 for: PushToken(token: "ExpoPushToken[b\($0)]", platform: $0 == 1 ? .android : .ios),
                                 options: SendOptions())
        }
        let body = ExpoProvider.batchBody(requests)
        guard case .array(let messages) = try JSONValue(parsing: body) else { Issue.record("not an array"); return }
        #expect(messages.count == 3)
        for (index, (message, request)) in zip(messages, requests).enumerated() {
            guard case .array(let prepared) = try JSONValue(parsing: request.body), case .object(var one)? = prepared.first,
                  case .object(var got) = message else { Issue.record("not objects"); continue }
            #expect(got["to"] == .array([.string("ExpoPushToken[b\(index)]")]))
            got["to"] = nil
            one["to"] = nil
            #expect(got == one)
        }
        #expect(ExpoProvider.batchBody([requests[0]]) == requests[0].body)
        await provider.shutdown()
    }

    @Test("a batch body: the tokens of one content share one message whose `to` is their array; other contents, alone")
    func sharedMessages() async throws {
        let provider = try ExpoProvider(name: "expo", configuration: ExpoConfiguration())
        var options = SendOptions()
        options.contentID = 7
        var hello = PushContent(title: "Hello")
        hello.ios.badge = 1  // an iOS field: iOS tokens get another message than Android ones
        let a = try provider.prepare(hello, for: PushToken(token: "ExponentPushToken[a]", platform: .android), options: options)
        let b = try provider.prepare(hello, for: PushToken(token: "ExponentPushToken[b]", platform: .android), options: options)
        let ios = try provider.prepare(hello, for: PushToken(token: "ExponentPushToken[c]", platform: .ios), options: options)
        let d = try provider.prepare(PushContent(title: "Other", body: "x"), for: PushToken(token: "ExponentPushToken[d]", platform: .android),
                                     options: SendOptions())
        let body = String(decoding: ExpoProvider.batchBody([a, b, ios, d]), as: UTF8.self)
        #expect(body == #"[{"to":["ExponentPushToken[a]","ExponentPushToken[b]"],"title":"Hello"},{"to":["ExponentPushToken[c]"],"title":"Hello","badge":1},{"to":["ExponentPushToken[d]"],"title":"Other","body":"x"}]"#)
        // Valid JSON, and one request keeps its own body.
        #expect((try? JSONValue(parsing: Array(body.utf8))) != nil)
        #expect(ExpoProvider.batchBody([a]) == a.body)
        // Equal tails in different storage merge too.
        let e = try provider.prepare(hello, for: PushToken(token: "ExponentPushToken[e]", platform: .android), options: SendOptions())
        let f = try provider.prepare(hello, for: PushToken(token: "ExponentPushToken[f]", platform: .android), options: SendOptions())
        #expect(String(decoding: ExpoProvider.batchBody([e, f]), as: UTF8.self)
                == #"[{"to":["ExponentPushToken[e]","ExponentPushToken[f]"],"title":"Hello"}]"#)
        await provider.shutdown()
    }

    @Test("the per-batch path writes the same body as the prepared requests of its tokens, per platform's content")
    func sharedContentBody() async throws {
        let provider = try ExpoProvider(name: "expo", configuration: ExpoConfiguration())
        var hello = PushContent(title: "Hello")
        hello.ios.badge = 1
        let options = SendOptions()
        let android = try #require(try provider.prepareShared(hello, platform: .android, options: options))
        let ios = try #require(try provider.prepareShared(hello, platform: .ios, options: options))
        let tokens = [PushToken(token: "ExponentPushToken[a]", platform: .android),
                      PushToken(token: "ExponentPushToken[b]", platform: .android),
                      PushToken(token: "ExponentPushToken[c]", platform: .ios),
                      PushToken(token: "ExpoPushToken[d]", platform: .android)]
        let recipients = tokens.map { token -> ExpoRecipient in
            .token(token.token, tail: (token.platform == .ios ? ios : android).bytes)
        }
        let requests = try tokens.map { try provider.prepare(hello, for: $0, options: options) }
        let body = ExpoProvider.batchBody(recipients)
        #expect(body == ExpoProvider.batchBody(requests))
        #expect(String(decoding: body, as: UTF8.self)
                == #"[{"to":["ExponentPushToken[a]","ExponentPushToken[b]"],"title":"Hello"},{"to":["ExponentPushToken[c]"],"title":"Hello","badge":1},{"to":["ExpoPushToken[d]"],"title":"Hello"}]"#)
        // One recipient: the body `prepare` makes for it.
        #expect(ExpoProvider.batchBody([recipients[0]]) == requests[0].body)
        // Accepted: Expo tokens of the content's platform only; a native token takes the per-token path.
        #expect(provider.accepts(tokens[0], for: android))
        #expect(!provider.accepts(tokens[2], for: android))
        #expect(!provider.accepts(PushToken(token: String(repeating: "ab", count: 32), platform: .android), for: android))
        // Over Expo's limit: the same refusal as `prepare`.
        #expect(throws: NorqError.self) {
            try provider.prepareShared(PushContent(title: String(repeating: "x", count: 5_000)), platform: .ios,
                                       options: options)
        }
        await provider.shutdown()
    }
}
