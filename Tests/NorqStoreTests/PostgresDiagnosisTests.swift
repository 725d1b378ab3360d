import NorqCore
import NorqStore
import Testing

@testable import NorqStorePostgres

/// Issue 33 (6): a refused connection says why (a wrong password was reported as "did not answer within 10 s").
@Suite struct PostgresRefusalTests {
    let configuration = PostgresStoreConfiguration()

    @Test func eachRefusalHasItsOwnCode() {
        let target = "PostgreSQL at db:5432"
        #expect(PostgresDeliveryStore.connectionRefusal(
            sqlState: "28P01", message: "password authentication failed for user \"norq\"", target: target,
            configuration: configuration)?.code == .storeAuthenticationFailed)
        #expect(PostgresDeliveryStore.connectionRefusal(
            sqlState: "3D000", message: "database \"nope\" does not exist", target: target,
            configuration: configuration)?.code == .storeDatabaseMissing)
        #expect(PostgresDeliveryStore.connectionRefusal(
            sqlState: "28000", message: "no pg_hba.conf entry for host \"10.0.0.1\", user \"norq\", database \"norq\", no encryption",
            target: target, configuration: configuration)?.code == .storeTLSRequired)
        #expect(PostgresDeliveryStore.connectionRefusal(
            sqlState: "28000", message: "role \"nobody\" is not permitted to log in", target: target,
            configuration: configuration)?.code == .storeAuthenticationFailed)
        #expect(PostgresDeliveryStore.connectionRefusal(sqlState: "57P03", message: "the database system is starting up",
                                                        target: target, configuration: configuration) == nil)
    }

    @Test func theMessageNeverShowsThePassword() {
        var withPassword = configuration
        withPassword.password = "s3cret-pw"
        let error = PostgresDeliveryStore.connectionRefusal(
            sqlState: "28P01", message: "password authentication failed for user \"norq\"", target: "PostgreSQL at db:5432",
            configuration: withPassword)
        #expect(error.map { !"\($0)".contains("s3cret-pw") } == true)
    }
}

@Suite(PostgresTestServer.enabled, .serialized) struct PostgresDiagnosisTests {
    @Test func aMissingDatabaseIsSaidAtOnceNotAsATimeout() async throws {
        var configuration = try PostgresTestServer.baseConfiguration()
        configuration.database = "norq_missing_\(UInt32.random(in: 0...UInt32.max))"
        let store = PostgresDeliveryStore(configuration: configuration,
                                          settings: DeliveryStoreSettings(callTimeout: .seconds(10)))
        let started = ContinuousClock.now
        await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await store.run() }
            do {
                try await store.migrate()
                Issue.record("migrate succeeded on a database that does not exist")
            } catch let error as NorqError {
                #expect(error.code == .storeDatabaseMissing, "\(error)")
                #expect(error.message.contains(configuration.database ?? "?"))
            } catch {
                Issue.record("not a NorqError: \(error)")
            }
            group.cancelAll()
        }
        #expect(started.duration(to: .now) < .seconds(5), "said at once, not after the 10 s call timeout")
    }
}
