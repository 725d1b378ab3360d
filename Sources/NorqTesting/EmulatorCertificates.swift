import Crypto
import Foundation
import SwiftASN1
import X509

/// A self-signed certificate authority generated in memory, plus the server certificate it signs
/// (SANs `127.0.0.1`, `::1` and `localhost`). Client certificates for mTLS mode are signed by the same CA.
package struct EmulatorCertificates: Sendable {
    let caKey: P256.Signing.PrivateKey
    let caCertificate: Certificate
    package let caCertificatePEM: String
    package let serverCertificatePEM: String
    package let serverPrivateKeyPEM: String

    package init() throws {
        let caKey = P256.Signing.PrivateKey()
        let now = Date()
        let notBefore = now.addingTimeInterval(-3600)
        let notAfter = now.addingTimeInterval(3600 * 24 * 365)
        let caName = try DistinguishedName {
            // A unique name per emulator, so that trusting several emulators at once works (OpenSSL looks
            // issuers up by name).
            CommonName("Norq APNs Emulator CA \(UInt64.random(in: 1...UInt64.max))")
            OrganizationName("Norq")
        }
        let caCert = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(caKey.publicKey),
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: caName,
            subject: caName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(digitalSignature: true, keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: Certificate.PublicKey(caKey.publicKey))
            },
            issuerPrivateKey: .init(caKey)
        )
        let serverKey = P256.Signing.PrivateKey()
        let serverName = try DistinguishedName { CommonName("localhost") }
        let serverCert = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(serverKey.publicKey),
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: caName,
            subject: serverName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([
                    .dnsName("localhost"),
                    .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
                    .ipAddress(ASN1OctetString(contentBytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])),
                ])
            },
            issuerPrivateKey: .init(caKey)
        )
        self.caKey = caKey
        self.caCertificate = caCert
        self.caCertificatePEM = try caCert.serializeAsPEM().pemString
        self.serverCertificatePEM = try serverCert.serializeAsPEM().pemString
        self.serverPrivateKeyPEM = serverKey.pemRepresentation
    }

    /// A client certificate (extended key usage `clientAuth`) signed by the CA.
    func makeClientCertificate(commonName: String) throws -> (certificatePEM: String, privateKeyPEM: String) {
        let key = P256.Signing.PrivateKey()
        let now = Date()
        let cert = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(3600 * 24 * 365),
            issuer: caCertificate.subject,
            subject: try DistinguishedName { CommonName(commonName) },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.clientAuth])
            },
            issuerPrivateKey: .init(caKey)
        )
        return (try cert.serializeAsPEM().pemString, key.pemRepresentation)
    }
}
