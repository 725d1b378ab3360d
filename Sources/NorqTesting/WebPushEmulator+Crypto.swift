import Crypto
import Foundation

/// The user agent's side of RFC 8291 and the push service's side of RFC 8292, written independently of the
/// provider (the emulator must not trust the code it tests).
enum WebPushCrypto {
    enum Failure: Error, Equatable, CustomStringConvertible {
        case malformed(String)
        var description: String {
            switch self { case .malformed(let why): why }
        }
    }

    /// Decrypts an `aes128gcm` body (RFC 8188 header, one record) with the subscription's private key and auth
    /// secret; returns the plaintext without the delimiter and padding.
    static func decrypt(body: [UInt8], userAgentPrivateKey: P256.KeyAgreement.PrivateKey,
                        authSecret: [UInt8]) throws(Failure) -> [UInt8] {
        guard body.count >= 21 else { throw .malformed("body shorter than the aes128gcm header") }
        let salt = Array(body[0..<16])
        let rs = UInt32(body[16]) << 24 | UInt32(body[17]) << 16 | UInt32(body[18]) << 8 | UInt32(body[19])
        let idlen = Int(body[20])
        guard idlen == 65, body.count >= 21 + idlen + 17 else { throw .malformed("keyid is not a 65-byte P-256 key") }
        let serverPublicBytes = Array(body[21..<(21 + idlen)])
        let record = Array(body[(21 + idlen)...])
        guard rs >= 18, record.count <= Int(rs) else { throw .malformed("record larger than rs or rs below 18") }
        let serverPublic: P256.KeyAgreement.PublicKey
        do {
            serverPublic = try P256.KeyAgreement.PublicKey(x963Representation: serverPublicBytes)
        } catch { throw .malformed("keyid is not a point on P-256") }
        let secret: [UInt8]
        do {
            secret = try userAgentPrivateKey.sharedSecretFromKeyAgreement(with: serverPublic).withUnsafeBytes { Array($0) }
        } catch { throw .malformed("ECDH failed") }
        let userAgentPublic = Array(userAgentPrivateKey.publicKey.x963Representation)
        // HKDF written with swift-crypto's HKDF (the provider uses raw HMAC steps): two implementations must agree.
        let ikm = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: secret), salt: authSecret,
                                         info: Array("WebPush: info".utf8) + [0] + userAgentPublic + serverPublicBytes,
                                         outputByteCount: 32)
        let cek = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt,
                                         info: Array("Content-Encoding: aes128gcm".utf8) + [0], outputByteCount: 16)
        let nonce = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt,
                                           info: Array("Content-Encoding: nonce".utf8) + [0], outputByteCount: 12)
        let plain: [UInt8]
        do {
            let box = try AES.GCM.SealedBox(combined: nonce.withUnsafeBytes { Array($0) } + record)
            plain = Array(try AES.GCM.open(box, using: cek))
        } catch { throw .malformed("AES-GCM authentication failed (wrong keys or a corrupted body)") }
        guard let last = plain.lastIndex(where: { $0 != 0 }) else { throw .malformed("no padding delimiter") }
        guard plain[last] == 0x02 else { throw .malformed("padding delimiter is not 0x02 (not a single final record)") }
        return Array(plain[..<last])
    }

    /// A verified VAPID token's claims.
    struct VAPIDClaims: Sendable, Equatable {
        var audience: String
        var expiresAt: Int64
        var subject: String?
        /// `k=`, base64url.
        var publicKey: String
    }

    /// Parses `vapid t=<jwt>, k=<key>` and verifies the ES256 signature with `k`, `aud`, `exp` (after `now`, at
    /// most 24 h ahead) and `sub` (mailto:/https: when present).
    static func verifyVAPID(_ authorization: String, audience: String, now: Int64) throws(Failure) -> VAPIDClaims {
        guard authorization.lowercased().hasPrefix("vapid ") else { throw .malformed("not the vapid scheme") }
        var t: Substring?
        var k: Substring?
        for parameter in authorization.dropFirst(6).split(separator: ",") {
            let trimmed = parameter.drop(while: { $0 == " " })
            if trimmed.hasPrefix("t=") { t = trimmed.dropFirst(2) }
            if trimmed.hasPrefix("k=") { k = trimmed.dropFirst(2) }
        }
        guard let t, let k else { throw .malformed("missing t or k") }
        guard let keyBytes = base64URLDecode(k), keyBytes.count == 65,
              let key = try? P256.Signing.PublicKey(x963Representation: keyBytes) else {
            throw .malformed("k is not a P-256 public key")
        }
        let parts = t.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = base64URLDecode(parts[0]), let claimBytes = base64URLDecode(parts[1]),
              let signatureBytes = base64URLDecode(parts[2]) else { throw .malformed("JWT is not three base64url parts") }
        guard let header = (try? JSONSerialization.jsonObject(with: Data(headerBytes))) as? [String: Any],
              let claims = (try? JSONSerialization.jsonObject(with: Data(claimBytes))) as? [String: Any] else {
            throw .malformed("JWT parts are not JSON objects")
        }
        guard header["alg"] as? String == "ES256" else { throw .malformed("alg is not ES256") }
        guard signatureBytes.count == 64, let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
              key.isValidSignature(signature, for: Array(t.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))) else {
            throw .malformed("bad signature")
        }
        guard let aud = claims["aud"] as? String else { throw .malformed("no aud") }
        guard aud == audience else { throw .malformed("aud \(aud) is not this push service's origin \(audience)") }
        guard let expNumber = claims["exp"] as? NSNumber, !(claims["exp"] is String) else { throw .malformed("no numeric exp") }
        let exp = expNumber.int64Value
        guard exp > now else { throw .malformed("expired") }
        guard exp <= now + 24 * 3600 + 60 else { throw .malformed("exp more than 24 hours ahead") }
        let sub = claims["sub"] as? String
        if let sub, !(sub.hasPrefix("mailto:") || sub.hasPrefix("https:")) || sub.contains(" ") {
            throw .malformed("sub is not a mailto: or https: URI")
        }
        return VAPIDClaims(audience: aud, expiresAt: exp, subject: sub, publicKey: String(k))
    }

    static func base64URLDecode(_ s: Substring) -> [UInt8]? {
        guard s.utf8.allSatisfy({ c in
            (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c == 45 || c == 95
        }) else { return nil }
        var b64 = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b64.count % 4 != 0 { b64.append("=") }
        guard let data = Data(base64Encoded: b64) else { return nil }
        return Array(data)
    }

    static func base64URLEncode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
