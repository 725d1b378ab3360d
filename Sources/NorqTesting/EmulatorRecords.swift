/// What an emulator keeps of the requests it received: at most `limit` records, the newest ones. When full, the
/// oldest tenth is dropped at once (so an append stays cheap on average) and counted in `dropped`.
struct EmulatorRecords<Record: Sendable>: Sendable {
    /// The records kept, oldest first.
    private(set) var all: [Record] = []
    /// How many records were dropped to stay within the limit.
    private(set) var dropped = 0
    let limit: Int

    init(limit: Int) { self.limit = max(1, limit) }

    mutating func append(_ record: Record) {
        if all.count >= limit {
            let drop = min(all.count, max(1, limit / 10))
            all.removeFirst(drop)
            dropped += drop
        }
        all.append(record)
    }

    mutating func removeAll() {
        all.removeAll()
        dropped = 0
    }
}
