public import NorqCore
public import Crypto

/// RFC 8291 message encryption (`Content-Encoding: aes128gcm`, RFC 8188 with one record), swift-crypto only.
///
/// Per message: a fresh ephemeral P-256 key pair and a random 16-byte salt (both injectable for the RFC 8291
/// Appendix A test vector), ECDH with the subscription's key, the RFC 8291 key combination with the auth secret,
/// the RFC 8188 key schedule, then one AES-128-GCM record: `plaintext || 0x02 || padding zeros`.
/// The body is the 86-byte header (`salt || rs || idlen=65 || as_public`) followed by the record and its tag.
public enum WebPushEncryption {
    /// What push services must accept (RFC 8030 §7.2): the whole body, header included.
    public static let maxBodyBytes = 4096
    /// `salt (16) + rs (4) + idlen (1) + as_public (65)`.
    public static let headerBytes = 86
    /// 16-byte GCM tag and the 1-byte padding delimiter.
    public static let overheadBytes = headerBytes + 16 + 1
    /// 3,993: the most plaintext that fits one 4,096-byte body without padding.
    public static let maxPlaintextBytes = maxBodyBytes - overheadBytes
    /// The record size written in the header (as in the RFC's example; larger than any single record we write).
    public static let recordSize: UInt32 = 4096

    /// Encrypts `plaintext` for one subscription.
    ///
    /// - Parameters:
    ///   - paddingBytes: zeros added after the delimiter to hide the length (reduced when the body would exceed
    ///     4,096 bytes).
    ///   - ephemeralKey, salt: for tests only (the RFC vector); a fresh key and random salt otherwise. Reusing
    ///     either across messages breaks the encryption's guarantees.
    /// - Throws: `webpush/payload-too-large` when `plaintext` is over 3,993 bytes.
    public static func encrypt(_ plaintext: [UInt8], keys: WebPushSubscriptionKeys, paddingBytes: Int = 0,
                               ephemeralKey: P256.KeyAgreement.PrivateKey? = nil,
                               salt: [UInt8]? = nil) throws(NorqError) -> [UInt8] {
        guard plaintext.count <= maxPlaintextBytes else {
            throw NorqError(.webPushPayloadTooLarge,
                            "web push payload is \(plaintext.count) bytes, \(plaintext.count - maxPlaintextBytes) over the \(maxPlaintextBytes) that fit the 4,096-byte encrypted body")
        }
        let padding = max(0, min(paddingBytes, maxPlaintextBytes - plaintext.count))
        let ephemeral = ephemeralKey ?? freshEphemeralKey()
        let salt = salt ?? randomBytes(16)
        let asPublic = Array(ephemeral.publicKey.x963Representation)
        let sharedSecret: SharedSecret
        do {
            sharedSecret = try ephemeral.sharedSecretFromKeyAgreement(with: keys.userAgentPublicKey)
        } catch {
            throw NorqError(.webPushInvalidP256DH, "ECDH with keys.p256dh failed (not a usable P-256 public key)")
        }
        let ecdhSecret = sharedSecret.withUnsafeBytes { Array($0) }
        let (cek, nonce) = deriveKeys(ecdhSecret: ecdhSecret, authSecret: keys.authSecret,
                                      userAgentPublic: keys.userAgentPublicKeyBytes, serverPublic: asPublic, salt: salt)

        var record = plaintext
        record.reserveCapacity(plaintext.count + 1 + padding)
        record.append(0x02)
        if padding > 0 { record.append(contentsOf: repeatElement(0, count: padding)) }

        var body: [UInt8] = []
        body.reserveCapacity(headerBytes + record.count + 16)
        body.append(contentsOf: salt)
        body.append(UInt8(recordSize >> 24 & 0xff))
        body.append(UInt8(recordSize >> 16 & 0xff))
        body.append(UInt8(recordSize >> 8 & 0xff))
        body.append(UInt8(recordSize & 0xff))
        body.append(UInt8(asPublic.count))
        body.append(contentsOf: asPublic)
        do {
            let sealed = try AES.GCM.seal(record, using: SymmetricKey(data: cek), nonce: AES.GCM.Nonce(data: nonce))
            body.append(contentsOf: sealed.ciphertext)
            body.append(contentsOf: sealed.tag)
        } catch {
            // A 16-byte key and a 12-byte nonce cannot be rejected; should it happen, nothing is sent.
            throw NorqError(.webPushInvalidP256DH, "AES-128-GCM sealing with the keys derived from keys.p256dh failed")
        }
        return body
    }

    /// The RFC 8291 §3.4 key combination and RFC 8188 §2.2-2.3 key schedule: the content-encryption key (16 bytes)
    /// and nonce (12 bytes).
    static func deriveKeys(ecdhSecret: [UInt8], authSecret: [UInt8], userAgentPublic: [UInt8], serverPublic: [UInt8],
                           salt: [UInt8]) -> (cek: [UInt8], nonce: [UInt8]) {
        // PRK_key = HMAC-SHA-256(auth_secret, ecdh_secret)
        let prkKey = hmac(key: authSecret, ecdhSecret)
        // IKM = HMAC-SHA-256(PRK_key, "WebPush: info" || 0x00 || ua_public || as_public || 0x01)
        var keyInfo: [UInt8] = Array("WebPush: info".utf8)
        keyInfo.append(0)
        keyInfo.append(contentsOf: userAgentPublic)
        keyInfo.append(contentsOf: serverPublic)
        keyInfo.append(1)
        let ikm = hmac(key: prkKey, keyInfo)
        // PRK = HMAC-SHA-256(salt, IKM)
        let prk = hmac(key: salt, ikm)
        let cek = Array(hmac(key: prk, cekInfo).prefix(16))
        let nonce = Array(hmac(key: prk, nonceInfo).prefix(12))
        return (cek, nonce)
    }

    /// `"Content-Encoding: aes128gcm" || 0x00 || 0x01`.
    static let cekInfo: [UInt8] = Array("Content-Encoding: aes128gcm".utf8) + [0, 1]
    /// `"Content-Encoding: nonce" || 0x00 || 0x01`.
    static let nonceInfo: [UInt8] = Array("Content-Encoding: nonce".utf8) + [0, 1]

    /// HMAC-SHA-256 (RFC 2104) over two SHA-256 passes: every key here (auth secret, salt, PRKs) is at most 32
    /// bytes, under the 64-byte block, so it is padded, never hashed. (`HMAC<SHA256>` with a `SymmetricKey` made per
    /// call cost about twice as much; five of these run per message.)
    static func hmac(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        guard key.count <= 64 else {
            return Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
        }
        var pad = [UInt8](repeating: 0x36, count: 64)
        for index in key.indices { pad[index] ^= key[index] }
        var inner = SHA256()
        inner.update(data: pad)
        inner.update(data: message)
        let innerDigest = inner.finalize()
        for index in pad.indices { pad[index] ^= 0x36 ^ 0x5c }
        var outer = SHA256()
        outer.update(data: pad)
        innerDigest.withUnsafeBytes { outer.update(bufferPointer: $0) }
        return outer.finalize().withUnsafeBytes { Array($0) }
    }

    /// `count` bytes from the system CSPRNG (`SystemRandomNumberGenerator`: getrandom on Linux), 8 per call
    /// (a call per byte cost a system call per byte).
    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 7)
        while bytes.count < count {
            withUnsafeBytes(of: generator.next() as UInt64) { bytes.append(contentsOf: $0) }
        }
        bytes.removeLast(bytes.count - count)
        return bytes
    }

    /// A fresh ephemeral key: a private scalar uniform in [1, n-1] (32 bytes from the system CSPRNG, drawn again
    /// in the rare case, about 2^-32, that it is 0 or not below the group order n, which the key's initializer
    /// refuses) and its public point, one fixed-base multiplication.
    ///
    /// `P256.KeyAgreement.PrivateKey()` makes the same kind of key but then runs BoringSSL's FIPS pairwise
    /// consistency test on it (`EC_KEY_check_fips`: the public key recomputed, an ECDSA signature made and
    /// verified): four more scalar multiplications, which made key generation cost twice the ECDH itself. A key used
    /// for one ECDH and thrown away gains nothing from that self-test.
    static func freshEphemeralKey() -> P256.KeyAgreement.PrivateKey {
        for _ in 0..<64 {
            if let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: randomBytes(32)) { return key }
        }
        // Unreachable in practice (64 draws outside [1, n-1] in a row); the library's own generator then.
        return P256.KeyAgreement.PrivateKey()
    }
}
