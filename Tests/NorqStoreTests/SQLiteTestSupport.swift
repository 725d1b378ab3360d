import SQLiteNIO

/// Raw SQL against a store's file, for tests that simulate another (newer) norq.
enum SQLiteTestSupport {
    static func execute(path: String, _ sql: String) async throws {
        let connection = try await SQLiteConnection.open(storage: .file(path: path))
        _ = try await connection.query(sql)
        try await connection.close()
    }

    /// The first column of every row `sql` returns, as text.
    static func query(path: String, _ sql: String) async throws -> [String] {
        let connection = try await SQLiteConnection.open(storage: .file(path: path))
        let rows = try await connection.query(sql)
        try await connection.close()
        return rows.compactMap { $0.columns.first?.data.string }
    }
}

extension SQLiteTestSupport {
    /// The details of SQLite's query plan for `sql` (bound with `count` text parameters).
    static func queryPlan(path: String, _ sql: String, parameters count: Int) async throws -> [String] {
        let connection = try await SQLiteConnection.open(storage: .file(path: path))
        let rows = try await connection.query("EXPLAIN QUERY PLAN " + sql,
                                              (0..<count).map { SQLiteData.text("p\($0)") })
        try await connection.close()
        return rows.compactMap { $0.column("detail")?.string }
    }
}
