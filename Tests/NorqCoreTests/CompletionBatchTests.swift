import Dispatch
import NorqCore
import Synchronization
import Testing

@Suite("CompletionBatch: deferring wake-ups to the end of a batch")
struct CompletionBatchTests {
    /// Records the order in which actions ran (actions run on the thread that defers them: not Sendable).
    final class Log {
        var entries: [String] = []
    }

    @Test("outside a batch an action runs at once")
    func outsideABatch() {
        let log = Log()
        #expect(!CompletionBatch.isOpen)
        CompletionBatch.afterBatch { log.entries.append("now") }
        #expect(log.entries == ["now"])
    }

    @Test("inside a batch actions wait for its end and run in order")
    func deferredInOrder() {
        let log = Log()
        CompletionBatch.run {
            #expect(CompletionBatch.isOpen)
            CompletionBatch.afterBatch { log.entries.append("a") }
            CompletionBatch.afterBatch { log.entries.append("b") }
            log.entries.append("body")
        }
        #expect(log.entries == ["body", "a", "b"])
        #expect(!CompletionBatch.isOpen)
    }

    @Test("nested batches run their actions when the outermost one ends")
    func nesting() {
        let log = Log()
        CompletionBatch.begin()
        CompletionBatch.run {
            CompletionBatch.afterBatch { log.entries.append("inner") }
        }
        #expect(log.entries.isEmpty)
        CompletionBatch.end()
        #expect(log.entries == ["inner"])
    }

    @Test("an action that defers another runs it in the same end, without recursion")
    func actionDefersAnother() {
        let log = Log()
        var depth = 0
        func step(_ n: Int) {
            depth += 1
            log.entries.append("step \(n) depth \(depth)")
            if n < 3 { CompletionBatch.afterBatch { step(n + 1) } }
            depth -= 1
        }
        CompletionBatch.run { CompletionBatch.afterBatch { step(1) } }
        #expect(log.entries == ["step 1 depth 1", "step 2 depth 1", "step 3 depth 1"])
    }

    @Test("an end without a begin is ignored; run returns the body's value")
    func unmatchedEndAndValue() {
        CompletionBatch.end()
        #expect(!CompletionBatch.isOpen)
        #expect(CompletionBatch.run { 42 } == 42)
    }

    @Test("a batch is per thread: one open on another thread does not defer here")
    func perThread() {
        let opened = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let ended = DispatchSemaphore(value: 0)
        let deferredThere = Atomic<Int>(0)
        // A thread that opens a batch and blocks (never suspends) inside it.
        DispatchQueue(label: "norq.test.batch").async {
            CompletionBatch.run {
                CompletionBatch.afterBatch { deferredThere.add(1, ordering: .sequentiallyConsistent) }
                opened.signal()
                release.wait()
                #expect(deferredThere.load(ordering: .sequentiallyConsistent) == 0)
            }
            ended.signal()
        }
        opened.wait()
        // This thread is blocked in `opened.wait()` until then, so it is not the queue's thread.
        #expect(!CompletionBatch.isOpen)
        var ranHere = false
        CompletionBatch.afterBatch { ranHere = true }
        #expect(ranHere)
        release.signal()
        ended.wait()
        #expect(deferredThere.load(ordering: .sequentiallyConsistent) == 1)
    }
}
