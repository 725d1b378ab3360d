@testable import NorqStoreSQLite
import SQLiteNIO
import Testing

/// The store's statement helpers (`SQLiteConnection+Rows`): every row, in SQLite's order, decoded on the pool thread.
@Suite struct SQLiteConnectionRowsTests {
    @Test func rowsCountAndRunSeeEveryRowInOrder() async throws {
        let connection = try await SQLiteConnection.open(storage: .memory)
        do {
            try await connection.run("CREATE TABLE t (n INTEGER PRIMARY KEY, s TEXT)")
            // More rows than one claim or completion returns, text with quotes and non-ASCII, and NULLs.
            try await connection.run("""
                WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 1200)
                INSERT INTO t (n, s) SELECT n, CASE WHEN n % 3 = 0 THEN NULL ELSE 'r''' || n || ' é' END FROM c
                """)
            let decoded = try await connection.rows("SELECT n, s FROM t WHERE n > ? ORDER BY n", [.integer(0)]) { row in
                (row.column("n")?.integer ?? -1, row.column("s")?.string)
            }
            #expect(decoded.map(\.0) == Array(1...1200))
            #expect(decoded[0].1 == "r'1 é" && decoded[2].1 == nil)
            #expect(try await connection.rows("SELECT s FROM t WHERE n <= 2").compactMap { $0.column("s")?.string }
                    == ["r'1 é", "r'2 é"])
            #expect(try await connection.count("SELECT n FROM t WHERE n % 2 = 0") == 600)
            #expect(try await connection.count("DELETE FROM t WHERE n > 1000 RETURNING n") == 200)
            #expect(try await connection.count("SELECT n FROM t WHERE n > 1000") == 0)
            #expect(try await connection.rows("SELECT n FROM t WHERE n < 0").isEmpty)
            // An error surfaces from each helper.
            await #expect(throws: SQLiteError.self) { try await connection.run("SELECT * FROM missing") }
            await #expect(throws: SQLiteError.self) { try await connection.count("SELECT * FROM missing") }
        } catch {
            try await connection.close()
            throw error
        }
        try await connection.close()
    }
}
