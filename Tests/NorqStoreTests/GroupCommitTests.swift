import NorqCore
import Synchronization
import Testing
@testable import NorqStore

@Suite struct GroupCommitStateTests {
    typealias State = GroupCommitState<Int, String>
    func entry(_ id: UInt64, weight: Int = 1) -> State.Entry {
        State.Entry(id: id, request: Int(id), weight: weight, waiter: "w\(id)")
    }

    @Test func theFirstCallerLeadsAndLaterOnesWaitUntilTheBatchEnds() {
        var state = State(maxRequests: 10, maxWeight: 100)
        #expect(state.submit(entry(1)) == .lead)
        #expect(state.takeBatch().map(\.id) == [1])
        #expect(state.submit(entry(2)) == .wait)
        #expect(state.submit(entry(3)) == .wait)
        // The batch ends: the oldest waiter leads the next batch, which takes both.
        #expect(state.batchEnded()?.id == 2)
        #expect(state.running)
        #expect(state.takeBatch().map(\.id) == [2, 3])
        #expect(state.batchEnded() == nil)
        #expect(!state.running)
        #expect(state.submit(entry(4)) == .lead)
    }

    @Test func aBatchKeepsToItsBoundsButAlwaysTakesOne() {
        var state = State(maxRequests: 3, maxWeight: 10)
        _ = state.submit(entry(1, weight: 50))
        for id in 2...6 { #expect(state.submit(entry(UInt64(id), weight: 4)) == .wait) }
        #expect(state.takeBatch().map(\.id) == [1], "one request heavier than the bound goes alone")
        #expect(state.batchEnded()?.id == 2)
        #expect(state.takeBatch().map(\.id) == [2, 3], "a third would weigh 12 > 10")
        #expect(state.batchEnded()?.id == 4)
        #expect(state.takeBatch().map(\.id) == [4, 5])
        #expect(state.batchEnded()?.id == 6)
        #expect(state.takeBatch().map(\.id) == [6])
        #expect(state.pendingCount == 0)
        #expect(state.batchEnded() == nil)
    }
}

@Suite struct GroupCommitTests {
    /// Records the batches it runs; each request's answer is its double, 13 is refused.
    final class Runner: Sendable {
        let batches = Mutex<[[Int]]>([])
        func run(_ batch: [Int]) async -> [Result<Int, NorqError>] {
            batches.withLock { $0.append(batch) }
            // Long enough for the other callers to pile up behind this batch.
            try? await Task.sleep(for: .milliseconds(20))
            return batch.map { $0 == 13 ? .failure(NorqError(.storeFailed, "13")) : .success($0 * 2) }
        }
    }

    @Test func concurrentCallersShareBatchesAndEachGetsItsOwnAnswer() async throws {
        let group = GroupCommit<Int, Int>(maxRequests: 64, maxWeight: 1_000)
        let runner = Runner()
        let answers = await withTaskGroup(of: (Int, Result<Int, NorqError>).self) { tasks in
            for request in 0..<300 {
                tasks.addTask {
                    do throws(NorqError) {
                        return (request, .success(try await group.submit(request, weight: 1) { await runner.run($0) }))
                    } catch {
                        return (request, .failure(error))
                    }
                }
            }
            var answers: [Int: Result<Int, NorqError>] = [:]
            for await (request, answer) in tasks { answers[request] = answer }
            return answers
        }
        #expect(answers.count == 300)
        for request in 0..<300 where request != 13 { #expect((try? answers[request]?.get()) == request * 2) }
        #expect(throws: NorqError.self) { try answers[13]?.get() }
        let batches = runner.batches.withLock { $0 }
        #expect(batches.flatMap { $0 }.sorted() == Array(0..<300), "every request ran exactly once")
        #expect(batches.allSatisfy { $0.count <= 64 })
        #expect(batches.count < 300, "callers that arrived during a batch shared the next one (\(batches.count) batches)")
    }

    @Test func aCancelledLeaderStillCommitsTheBatchOfTheOthers() async throws {
        let group = GroupCommit<Int, Int>(maxRequests: 64, maxWeight: 1_000)
        let cancelledInBatch = Mutex(false)
        let started = AsyncStream<Void>.makeStream()
        let run: @Sendable ([Int]) async -> [Result<Int, NorqError>] = { batch in
            started.continuation.yield()
            try? await Task.sleep(for: .milliseconds(100))
            if Task.isCancelled { cancelledInBatch.withLock { $0 = true } }
            return batch.map { .success($0 * 2) }
        }
        // The first caller leads a batch of its own; the others pile up behind it and form the second batch,
        // led by the oldest of them, which is then cancelled while its batch runs.
        let first = Task { try await group.submit(1, weight: 1, run: run) }
        var iterator = started.stream.makeAsyncIterator()
        await iterator.next()
        let leader = Task { try await group.submit(2, weight: 1, run: run) }
        try await Task.sleep(for: .milliseconds(20))
        let others = (3...10).map { value in Task { try await group.submit(value, weight: 1, run: run) } }
        await iterator.next()  // the second batch started
        leader.cancel()
        #expect(try await first.value == 2)
        #expect(try await leader.value == 4, "the cancelled leader's own request was committed too")
        for (offset, task) in others.enumerated() { #expect(try await task.value == (offset + 3) * 2) }
        #expect(!cancelledInBatch.withLock { $0 }, "the batch did not see its leader's cancellation")
    }

    @Test func aLoneCallerCommitsAtOnce() async throws {
        let group = GroupCommit<Int, Int>(maxRequests: 64, maxWeight: 1_000)
        let runner = Runner()
        #expect(try await group.submit(4, weight: 1) { await runner.run($0) } == 8)
        #expect(try await group.submit(5, weight: 1) { await runner.run($0) } == 10)
        #expect(runner.batches.withLock { $0 } == [[4], [5]])
    }
}
