import Logging
import NIOSSL
import NorqCore
import NorqStore
import PostgresNIO

extension PostgresDeliveryStore {
    /// What a refused connection means, from the server's SQLSTATE (and message): a wrong password or user, a
    /// database that does not exist, a server that takes only TLS connections; nil for anything else. Pure.
    static func connectionRefusal(sqlState: String?, message: String, target: String,
                                  configuration: PostgresStoreConfiguration) -> NorqError? {
        switch sqlState {
        case "28P01":
            return NorqError(.storeAuthenticationFailed,
                             "\(target) refused the password of user \"\(configuration.username)\": \(message)",
                             hint: "check the password in store.postgres (or the URL); it is never printed")
        case "28000":
            // pg_hba.conf: no entry for this host/user/database with or without encryption.
            if message.contains("no encryption") || message.contains("SSL off") {
                return NorqError(.storeTLSRequired,
                                 "\(target) accepts this user only over TLS: \(message)",
                                 hint: "set sslmode=require in store.postgres (it is \(configuration.tls.rawValue))")
            }
            return NorqError(.storeAuthenticationFailed, "\(target) does not let user \"\(configuration.username)\" in: \(message)")
        case "3D000":
            return NorqError(.storeDatabaseMissing,
                             "\(target) has no database \"\(configuration.database ?? configuration.username)\": \(message)",
                             hint: "create it (createdb) or fix store.postgres's database")
        default:
            return nil
        }
    }

    /// Opens one connection directly (not through the pool, whose lease would only time out) and closes it, so that a
    /// wrong password, a missing database or a server requiring TLS is reported as such at once, not as "did not
    /// answer within the call timeout". An unreachable server is `store/unreachable`; anything else (a slow server)
    /// is left to the calls that follow. Bounded by the call timeout.
    func diagnoseConnection() async throws(NorqError) {
        let target = "PostgreSQL at \(configuration.host):\(configuration.port)"
        let tls: PostgresConnection.Configuration.TLS
        do {
            switch configuration.tls {
            case .disable: tls = .disable
            case .require: tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            default: tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
            }
        } catch {
            throw NorqError(.storeUnreachable, "\(target): TLS could not be set up: \(error)")
        }
        var connectionConfiguration = PostgresConnection.Configuration(
            host: configuration.host, port: configuration.port, username: configuration.username,
            password: configuration.password, database: configuration.database, tls: tls)
        connectionConfiguration.options.connectTimeout = .init(settings.callTimeout)
        let attempt = connectionConfiguration
        let logger = self.logger
        let timeout = settings.callTimeout
        let result: Result<Void, any Error>? = await withTaskGroup(of: Result<Void, any Error>?.self) { group in
            group.addTask {
                do {
                    let connection = try await PostgresConnection.connect(configuration: attempt,
                                                                          id: 0, logger: logger)
                    try? await connection.close()
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        guard case .failure(let error)? = result else { return }
        if let psql = error as? PSQLError {
            if let refusal = Self.connectionRefusal(sqlState: psql.serverInfo?[.sqlState],
                                                    message: psql.serverInfo?[.message] ?? "\(psql.code)",
                                                    target: target, configuration: configuration) {
                throw refusal
            }
            switch psql.code {
            case .sslUnsupported:
                throw NorqError(.storeTLSRequired, "\(target) does not offer TLS, and store.postgres requires it",
                                hint: "use sslmode=prefer or disable, or enable ssl on the server")
            case .connectionError, .serverClosedConnection, .uncleanShutdown:
                throw NorqError(.storeUnreachable, "cannot reach \(target): \(Self.describe(error))",
                                hint: "is the server running and the address right? (\(configuration))")
            default:
                return
            }
        }
    }
}
