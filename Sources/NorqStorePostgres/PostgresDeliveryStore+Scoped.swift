import NorqStore
extension PostgresDeliveryStore {
    /// Runs the store's connection pool (`run()`) while the schema migrations are applied and `body` runs; the pool
    /// stops when `body` returns or throws. For a store that is not a `Service` of a service group.
    public func withMigrated<T: Sendable>(_ body: @escaping @Sendable (PostgresDeliveryStore) async throws -> T)
        async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                try await self.run()
                return nil
            }
            defer { group.cancelAll() }
            try await migrate()
            return try await body(self)
        }
    }
}
