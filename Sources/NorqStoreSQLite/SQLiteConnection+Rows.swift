import Synchronization
import SQLiteNIO

/// The store's ways to run a statement, each one job on SQLite's thread pool and one resumption of the caller.
///
/// They call `SQLiteConnection`'s own `query(_:_:_:)`, which hands each row to a closure on the pool thread as
/// SQLite steps. `SQLiteDatabase`'s `query(_:_:)` (the one returning `[SQLiteRow]`, which a plain
/// `connection.query(sql, binds)` resolves to) goes through the protocol's futures-based `query` instead, which
/// submits every row to the connection's event loop as a task of its own (a closure, a promise and a future per
/// row, and a wake-up of the loop) and then waits for all of those futures (`Benchmarks/README.md`, "SQLite store
/// CPU, stop 26").
extension SQLiteConnection {
    /// Runs `sql` and returns `decode` of each row, decoded on SQLite's thread as it is stepped.
    func rows<T: Sendable>(_ sql: String, _ binds: [SQLiteData] = [],
                           _ decode: @escaping @Sendable (SQLiteRow) -> T) async throws -> [T] {
        let sink = RowSink<T>()
        try await query(sql, binds) { row in
            let value = decode(row)
            sink.rows.withLock { $0.append(value) }
        }
        return sink.rows.withLock { $0 }
    }

    /// Runs `sql` and returns its rows.
    func rows(_ sql: String, _ binds: [SQLiteData] = []) async throws -> [SQLiteRow] {
        try await rows(sql, binds) { $0 }
    }

    /// Runs `sql`, ignoring any row it returns.
    func run(_ sql: String, _ binds: [SQLiteData] = []) async throws {
        try await query(sql, binds) { _ in }
    }

    /// Runs `sql` and returns how many rows it returned.
    func count(_ sql: String, _ binds: [SQLiteData] = []) async throws -> Int {
        let sink = RowSink<Void>()
        try await query(sql, binds) { _ in sink.count.withLock { $0 += 1 } }
        return sink.count.withLock { $0 }
    }
}

/// What the row closure of one statement gathers. The closure runs on SQLite's pool thread and the caller reads
/// the result after the query returned, so the lock is never contended; it makes the hand-over safe.
private final class RowSink<T: Sendable>: Sendable {
    let rows = Mutex<[T]>([])
    let count = Mutex(0)
}
