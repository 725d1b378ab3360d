import NorqCore
import NIOSSL

/// The TLS context of the APNs connections (kept in this file for history: the transport itself is APNsTransport.swift).
extension APNsTransport {
    static func makeSSLContext(_ configuration: APNsConfiguration) throws(NorqError) -> NIOSSLContext {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        tls.certificateVerification = .fullVerification
        if let pem = configuration.additionalTrustRootsPEM {
            do {
                // Bundles concatenated without a trailing newline are common; keep each block on its own lines.
                let normalized = pem.replacing("-----END CERTIFICATE-----", with: "-----END CERTIFICATE-----\n")
                let certificates = try NIOSSLCertificate.fromPEMBytes(Array(normalized.utf8))
                guard !certificates.isEmpty else { throw NorqError(.apnsInvalidTrustRoots, "no certificate") }
                tls.additionalTrustRoots = [.certificates(certificates)]
            } catch {
                throw NorqError(.apnsInvalidTrustRoots,
                                "the extra CA certificates\(configuration.caPath.map { " (\($0))" } ?? "") are not PEM certificates")
            }
        }
        if case .certificate(let credentials) = configuration.authentication {
            do {
                switch credentials.material {
                case .pem(let chainPEM, let keyPEM):
                    let chain = try NIOSSLCertificate.fromPEMBytes(Array(chainPEM.utf8))
                    guard !chain.isEmpty else { throw NorqError(.apnsInvalidCertificate, "empty chain") }
                    let key: NIOSSLPrivateKey
                    if let passphrase = credentials.passphrase {
                        let bytes = Array(passphrase.utf8)
                        key = try NIOSSLPrivateKey(bytes: Array(keyPEM.utf8), format: .pem) { provide in provide(bytes) }
                    } else {
                        key = try NIOSSLPrivateKey(bytes: Array(keyPEM.utf8), format: .pem)
                    }
                    tls.certificateChain = chain.map { .certificate($0) }
                    tls.privateKey = .privateKey(key)
                case .pkcs12(let bytes):
                    let bundle = try NIOSSLPKCS12Bundle(buffer: bytes, passphrase: credentials.passphrase.map { Array($0.utf8) })
                    tls.certificateChain = bundle.certificateChain.map { .certificate($0) }
                    tls.privateKey = .privateKey(bundle.privateKey)
                }
            } catch {
                throw NorqError(.apnsInvalidCertificate,
                                "cannot load the APNs client certificate from \(credentials.source): wrong format or passphrase")
            }
        }
        do {
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw NorqError(.apnsInvalidCertificate, "cannot build the TLS context: \(error)")
        }
    }
}
