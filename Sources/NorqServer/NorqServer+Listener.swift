import HummingbirdCore
import Logging
import NIOCore
import NIOSSL
public import NorqConfig
public import NorqCore

/// The listener: HTTP/1.1, or HTTPS with `server.tls`, with the connection timeouts. (In a file of its own:
/// HummingbirdCore has a `ServerConfiguration` of its own.)
extension NorqServer {
    /// Every connection: Hummingbird's idle timeout (between requests, and a head trickled in: it counts whole HTTP
    /// parts) and our deadline on each request body (`BodyDeadline`); TLS around it when configured, with the
    /// context a SIGHUP may swap (returned: nil for plain HTTP).
    static func serverBuilder(_ settings: NorqConfig.ServerConfiguration,
                              logger: Logger) throws(NorqError) -> (HTTPServerBuilder, ServerTLSContext?) {
        let limits = settings.limits
        let http1 = HTTP1Channel.Configuration(
            additionalChannelHandlers: [BodyDeadlineHandler(timeout: limits.bodyTimeout, logger: logger)],
            idleTimeout: .seconds(max(1, limits.idleTimeout.components.seconds)))
        guard let tls = settings.tls else { return (.http1(configuration: http1), nil) }
        let holder = ServerTLSContext(try makeTLSContext(tls))
        let builder = HTTPServerBuilder { responder in
            ReloadableTLSChannel(base: HTTP1Channel(responder: responder, configuration: http1), tls: holder)
        }
        return (builder, holder)
    }

    /// Loads `server.tls` (certificate chain and private key, PEM) into a server TLS configuration (TLS 1.2+,
    /// HTTP/1.1 over ALPN); `server/invalid-tls` when a file is missing, unreadable or not PEM.
    public static func checkTLS(_ settings: NorqConfig.ServerConfiguration) throws(NorqError) {
        if let tls = settings.tls { _ = try makeTLSContext(tls) }
    }

    /// Reads the certificate chain and the key of `server.tls` and makes the server's TLS context (TLS 1.2+,
    /// HTTP/1.1 over ALPN); `server/invalid-tls` when a file is missing, unreadable or not PEM, or the key is not
    /// the certificate's.
    static func makeTLSContext(_ tls: NorqConfig.ServerConfiguration.TLS) throws(NorqError) -> NIOSSLContext {
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(tls.certificatePath)
        } catch {
            throw NorqError(.serverInvalidTLS, "server.tls.certPath \(tls.certificatePath): not a readable PEM certificate chain (\(error))")
        }
        guard !chain.isEmpty else {
            throw NorqError(.serverInvalidTLS, "server.tls.certPath \(tls.certificatePath) holds no certificate")
        }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: tls.keyPath, format: .pem)
        } catch {
            // The error names the file only: a key's bytes never reach a message.
            throw NorqError(.serverInvalidTLS, "server.tls.keyPath \(tls.keyPath): not a readable PEM private key")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) },
                                                                     privateKey: .privateKey(key))
        configuration.minimumTLSVersion = .tlsv12
        configuration.applicationProtocols = ["http/1.1"]
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw NorqError(.serverInvalidTLS, "server.tls: the certificate and the key do not make a TLS context (\(error))",
                            hint: "is the key the certificate's own?")
        }
    }
}
