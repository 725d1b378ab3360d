import NIOCore
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

    /// A duration as a NIO `TimeAmount` (0 when negative).
    static func timeAmount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return .zero }
        let nanos = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return nanos.overflow ? .nanoseconds(.max) : .nanoseconds(nanos.partialValue &+ attoseconds / 1_000_000_000)
    }
}
