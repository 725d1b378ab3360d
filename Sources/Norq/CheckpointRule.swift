/// When a durable worker records the outcomes its batch has so far (a checkpoint), before the whole batch ends.
///
/// A batch of a fast provider ends within milliseconds and is recorded with one store call, as before; a batch that
/// waits on a slow service (or on a few slow tokens) records what finished every `maximumWait`, so a crash re-sends
/// at most the attempts in flight and those finished since the last checkpoint, never the whole batch. Pure: tested
/// without I/O.
struct CheckpointRule: Sendable, Hashable {
    /// Completions waiting that make a checkpoint due at once.
    var minimumCompletions: Int
    /// How long the oldest waiting completion may wait for its checkpoint.
    var maximumWait: Duration

    /// `batchSize`: the rows the batch claimed (a whole batch waiting is recorded when its last attempt ends).
    init(batchSize: Int, maximumWait: Duration = .milliseconds(250)) {
        self.minimumCompletions = max(1, min(batchSize, 1_000))
        self.maximumWait = maximumWait
    }

    func isDue(waiting: Int, oldestWaited: Duration) -> Bool {
        waiting > 0 && (waiting >= minimumCompletions || oldestWaited >= maximumWait)
    }
}
