public import Logging
import NorqCore
public import NorqStore

extension SQLiteDeliveryStore {
    /// Opens the database at `path`, applies the schema migrations, runs `body` with the store and closes it,
    /// whether `body` returns or throws.
    public static func withMigrated<T: Sendable>(path: String, settings: DeliveryStoreSettings = DeliveryStoreSettings(),
                                                 logger: Logger = Logger(label: "norq.store.sqlite"),
                                                 _ body: (SQLiteDeliveryStore) async throws -> T) async throws -> T {
        let store = try await open(path: path, settings: settings, logger: logger)
        do {
            try await store.migrate()
            let value = try await body(store)
            await store.close()
            return value
        } catch {
            await store.close()
            throw error
        }
    }
}
