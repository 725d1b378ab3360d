import NIOSSL
import NorqCore

/// TLS client settings shared by the HTTP/2 and HTTP/1.1 transports.
enum WebPushTLS {
    /// TLS 1.2+, system roots plus the configuration's `caPath` certificates.
    static func clientConfiguration(_ configuration: WebPushConfiguration) throws(NorqError) -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if let pem = configuration.additionalTrustRootsPEM {
            do {
                tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMBytes(Array(pem.utf8)))]
            } catch {
                throw NorqError("config/invalid-certificate",
                                "the CA file \(configuration.caPath ?? "(given in code)") does not parse as PEM certificates")
            }
        }
        return tls
    }
}
