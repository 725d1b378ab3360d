import SQLiteNIO

/// Raw SQL against a store's file, for tests that simulate another (newer) norq.
enum SQLiteTestSupport {
    static func execute(path: String, _ sql: String) async throws {
        let connection = try await SQLiteConnection.open(storage: .file(path: path))
        _ = try await connection.query(sql)
        try await connection.close()
    }
}
