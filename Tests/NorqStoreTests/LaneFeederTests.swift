@testable import Norq
import PropertyBased
import Testing

/// The durable worker's lane feeder (`DurableWorker.LaneFeeder`, stop 34): the window carries over from one claimed
/// batch to the next, at most `claimBatchSize` rows are taken and not recorded (what a crash can re-send), a batch
/// whose last queued row was taken is asked to write its completions, and the lane is woken to claim when the queue
/// runs low.
@Suite struct LaneFeederTests {
    struct Item: DurableWorker.LaneItem {
        let batch: DurableWorker.AttemptBatch
        let id: Int
    }

    typealias Feeder = DurableWorker.LaneFeeder<Item>

    static func batch(_ ids: Range<Int>) -> (DurableWorker.AttemptBatch, [Item]) {
        let batch = DurableWorker.AttemptBatch(rows: ids.count, minimum: ids.count)
        return (batch, ids.map { Item(batch: batch, id: $0) })
    }

    /// Takes every row the feeder hands out from `first` on (as `DurableWorker.drain` does), with the signals.
    static func drain(_ feeder: Feeder, _ first: (Item?, DurableWorker.LaneSignal)) -> ([Int], [DurableWorker.LaneSignal]) {
        var (next, signal) = first
        var ids: [Int] = [], signals = [signal]
        while let item = next {
            ids.append(item.id)
            (next, signal) = feeder.next()
            signals.append(signal)
        }
        return (ids, signals)
    }

    static func flushed(_ signals: [DurableWorker.LaneSignal]) -> [[ObjectIdentifier]] {
        signals.compactMap { if case .flush(let batches) = $0 { batches.map(ObjectIdentifier.init) } else { nil } }
    }

    @Test func theWindowCarriesOverToTheNextBatch() {
        let feeder = Feeder(window: 4, unrecordedLimit: 100)
        let (a, rowsA) = Self.batch(0..<3)
        let (first, signalsA) = Self.drain(feeder, feeder.append(rowsA, held: 3, batch: a))
        #expect(first == [0, 1, 2])
        #expect(Self.flushed(signalsA).isEmpty, "far from the bound: no early write")
        // One start is still owed: the next batch's first row takes it at once.
        let (b, rowsB) = Self.batch(3..<8)
        #expect(Self.drain(feeder, feeder.append(rowsB, held: 5, batch: b)).0 == [3])
        // Each attempt that ends starts one more.
        #expect(Self.drain(feeder, feeder.owe(1)).0 == [4])
        #expect(Self.drain(feeder, feeder.owe(2)).0 == [5, 6])
        #expect(Self.drain(feeder, feeder.owe(5)).0 == [7])
        #expect(Self.drain(feeder, feeder.owe(1)).0.isEmpty, "nothing queued")
    }

    @Test func atMostTheLimitIsTakenWithoutBeingRecorded() {
        let feeder = Feeder(window: 4, unrecordedLimit: 10)  // the batches write from 8 unrecorded on
        #expect(feeder.flushAt == 8)
        let (a, rows) = Self.batch(0..<14)
        let (started, quiet) = Self.drain(feeder, feeder.append(rows, held: 14, batch: a))
        #expect(started == [0, 1, 2, 3])
        #expect(Self.flushed(quiet).isEmpty)
        let (more, stillQuiet) = Self.drain(feeder, feeder.owe(2))
        #expect(more == [4, 5])
        #expect(Self.flushed(stillQuiet).isEmpty)
        // Four more answers, nothing written yet: the eighth unrecorded asks the lane's batches to write, the tenth
        // reaches the bound.
        let (upTo, signals) = Self.drain(feeder, feeder.owe(4))
        #expect(upTo == [6, 7, 8, 9])
        #expect(Self.flushed(signals) == [[ObjectIdentifier(a)]])
        // At the bound the starts wait (and the write is not asked again).
        let (none, again) = Self.drain(feeder, feeder.owe(4))
        #expect(none.isEmpty, "10 taken and not recorded: nothing starts")
        #expect(Self.flushed(again).isEmpty)
        // Four completions written: four more rows, and the write is asked again after the checkpoint.
        let (after, next) = Self.drain(feeder, feeder.recorded(4))
        #expect(after == [10, 11, 12, 13])
        #expect(Self.flushed(next) == [[ObjectIdentifier(a)]])
        #expect(feeder.held == 10)
    }

    @Test func theWindowIsAtMostTheBound() {
        let feeder = Feeder(window: 500, unrecordedLimit: 16)
        let (a, rows) = Self.batch(0..<40)
        #expect(Self.drain(feeder, feeder.append(rows, held: 40, batch: a)).0 == Array(0..<16))
    }

    @Test func theLaneIsWokenWhenTheQueueRunsLow() async {
        let feeder = Feeder(window: 4, unrecordedLimit: 100)  // low at 2 rows queued
        let (a, rows) = Self.batch(0..<10)
        #expect(Self.drain(feeder, feeder.append(rows, held: 10, batch: a)).0 == [0, 1, 2, 3])
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await feeder.waitUntilLow() }
            // 6 queued: the lane waits; the ends of attempts take them down to 2.
            for _ in 0..<4 {
                await Task.yield()
                _ = Self.drain(feeder, feeder.owe(1))
            }
            await group.waitForAll()
        }
        await feeder.waitUntilLow()  // already low: returns at once
    }

    /// Random runs: a window, a bound, and a sequence of operations (claims, attempts that end, checkpoints).
    static let runs = Generator<(Int, Int, [UInt64]), Shrink.None<(Int, Int, [UInt64])>>(run: { rng in
        let window = Int.random(in: 1...8, using: &rng)
        let limit = window + Int.random(in: 0...12, using: &rng)
        return (window, limit, (0..<Int.random(in: 0...600, using: &rng)).map { _ in UInt64.random(in: 0...UInt64.max, using: &rng) })
    }, shrink: { _ in Shrink.None() })

    /// Random runs of claims, attempts that end and checkpoints: the window and the unrecorded bound hold at every
    /// step, every row is taken once, in claim order, and nothing is left behind.
    @Test func randomRunsKeepBothBounds() async {
        await propertyCheck(count: 200, input: Self.runs) { run in
            let (window, limit, operations) = run
            let feeder = Feeder(window: window, unrecordedLimit: limit)
            var nextID = 0, taken: [Int] = [], inFlight = 0, completed = 0, unrecorded = 0, claimed = 0
            func take(_ result: (Item?, DurableWorker.LaneSignal)) {
                let ids = Self.drain(feeder, result).0
                taken += ids
                inFlight += ids.count
                unrecorded += ids.count
                #expect(inFlight <= window)
                #expect(unrecorded <= limit)
            }
            for operation in operations {
                switch operation % 3 {
                case 0 where claimed - taken.count <= window / 2:
                    let size = Int(operation / 3 % 20) + 1
                    let (batch, rows) = Self.batch(nextID..<(nextID + size))
                    nextID += size
                    claimed += size
                    take(feeder.append(rows, held: size, batch: batch))
                case 1 where inFlight > 0:
                    let ended = Int(operation / 3 % UInt64(inFlight)) + 1
                    inFlight -= ended
                    completed += ended
                    take(feeder.owe(ended))
                case 2 where completed > 0:
                    let written = completed
                    completed = 0
                    unrecorded -= written
                    take(feeder.recorded(written))
                default:
                    continue
                }
            }
            // Finish: every attempt ends and is recorded until the queue is empty (bounded: a stall is a failure).
            var rounds = 0
            while taken.count < claimed || inFlight > 0 || completed > 0 {
                rounds += 1
                guard rounds <= 10_000 else {
                    Issue.record("the feeder stalled: \(taken.count) of \(claimed) taken")
                    break
                }
                let ended = inFlight
                inFlight = 0
                completed += ended
                take(feeder.owe(ended))
                let written = completed
                completed = 0
                unrecorded -= written
                take(feeder.recorded(written))
            }
            #expect(taken == Array(0..<claimed))
            #expect(feeder.held == 0)
        }
    }
}
