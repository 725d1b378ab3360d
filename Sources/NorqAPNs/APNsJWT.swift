public import NorqCore
import Crypto
import Synchronization

/// Signs APNs provider tokens: ES256 over `{"alg":"ES256","kid":…}.{"iss":…,"iat":…}`, raw r||s, base64url.
///
/// Its parts live in one immutable object, so a copy of the signer (one per request, where the provider reads its
/// token) is one retain.
public struct APNsJWTSigner: Sendable {
    private final class Storage: Sendable {
        let keyID: String
        let teamID: String
        let privateKey: P256.Signing.PrivateKey
        let encodedHeader: String
        let cacheKey: APNsTokenCache.Key

        init(keyID: String, teamID: String, privateKey: P256.Signing.PrivateKey) {
            self.keyID = keyID
            self.teamID = teamID
            self.privateKey = privateKey
            var header: [UInt8] = []
            header.append(contentsOf: #"{"alg":"ES256","kid":"#.utf8)
            JSONValue.writeString(keyID, into: &header)
            header.append(UInt8(ascii: "}"))
            self.encodedHeader = Base64URL.encode(header)
            self.cacheKey = APNsTokenCache.Key(teamID: teamID, keyID: keyID,
                                               publicKey: Array(privateKey.publicKey.rawRepresentation))
        }
    }
    private let storage: Storage

    public var keyID: String { storage.keyID }
    public var teamID: String { storage.teamID }
    var privateKey: P256.Signing.PrivateKey { storage.privateKey }
    private var encodedHeader: String { storage.encodedHeader }
    /// The token cache's key, computed once: deriving the public key's bytes is a P-256 point
    /// conversion, far too slow for every request.
    var cacheKey: APNsTokenCache.Key { storage.cacheKey }

    /// - Parameter privateKeyPEM: the `.p8` file's text (PKCS#8 PEM).
    public init(keyID: String, teamID: String, privateKeyPEM: String) throws(NorqError) {
        let privateKey: P256.Signing.PrivateKey
        do {
            privateKey = try P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM)
        } catch {
            throw NorqError(.apnsInvalidKey, "the APNs signing key (key id \(keyID)) is not a PKCS#8 PEM P-256 private key")
        }
        self.storage = Storage(keyID: keyID, teamID: teamID, privateKey: privateKey)
    }

    /// The public key, to verify tokens (emulators, tests).
    var publicKey: P256.Signing.PublicKey { privateKey.publicKey }

    /// A signed token issued at `issuedAt` (epoch seconds).
    public func sign(issuedAt: Int64) -> String {
        var claims: [UInt8] = []
        claims.append(contentsOf: #"{"iss":"#.utf8)
        JSONValue.writeString(teamID, into: &claims)
        claims.append(contentsOf: #","iat":"#.utf8)
        claims.append(contentsOf: String(issuedAt).utf8)
        claims.append(UInt8(ascii: "}"))
        let signingInput = encodedHeader + "." + Base64URL.encode(claims)
        let signature: [UInt8]
        do {
            signature = Array(try privateKey.signature(for: Array(signingInput.utf8)).rawRepresentation)
        } catch {
            // Signing with a valid P-256 key does not fail; an empty signature makes APNs answer InvalidProviderToken.
            signature = []
        }
        return signingInput + "." + Base64URL.encode(signature)
    }
}

/// A current provider token.
public struct APNsProviderToken: Sendable, Hashable {
    /// The JWT.
    public var jwt: String
    /// `bearer <jwt>`: the `authorization` header value.
    public var headerValue: String
    /// `iat`, epoch seconds.
    public var issuedAt: Int64
}

/// One provider token per (team, key), shared by every connection and provider instance of the process.
public final class APNsTokenCache: Sendable {
    /// The process-wide cache.
    public static let shared = APNsTokenCache()

    struct Key: Hashable {
        var teamID: String
        var keyID: String
        var publicKey: [UInt8]
    }

    struct Entry {
        var token: APNsProviderToken
        var reportedExpired: Bool
        var renewals: Int
    }

    /// The token state of one (team, key). A provider looks its slot up once and then reads it without hashing
    /// the key on every request.
    final class Slot: Sendable {
        private let entry = Mutex<Entry?>(nil)

        /// The current token, minted or renewed when the policy says so.
        func token(signer: APNsJWTSigner, policy: JWTRefreshPolicy, now: Int64) -> APNsProviderToken {
            entry.withLock { entry in
                // Read in place: a copy of the entry retained its strings once more per request.
                switch policy.decide(issuedAt: entry?.token.issuedAt, now: now,
                                     reportedExpired: entry?.reportedExpired ?? false) {
                case .reuse:
                    if let token = entry?.token { return token }
                    fallthrough
                case .renew:
                    let jwt = signer.sign(issuedAt: now)
                    let token = APNsProviderToken(jwt: jwt, headerValue: "bearer " + jwt, issuedAt: now)
                    entry = Entry(token: token, reportedExpired: false, renewals: (entry?.renewals ?? -1) + 1)
                    return token
                }
            }
        }

        func reportExpired(_ jwt: String) {
            entry.withLock { entry in
                if entry?.token.jwt == jwt { entry?.reportedExpired = true }
            }
        }

        var renewals: Int { entry.withLock { $0?.renewals ?? 0 } }
    }

    private let slots = Mutex<[Key: Slot]>([:])

    public init() {}

    /// The slot of this signer's (team, key), created on first use.
    func slot(for signer: APNsJWTSigner) -> Slot {
        let key = signer.cacheKey
        return slots.withLock { slots in
            if let slot = slots[key] { return slot }
            let slot = Slot()
            slots[key] = slot
            return slot
        }
    }

    /// The current token for this signer, minted or renewed when the policy says so.
    public func token(for signer: APNsJWTSigner, policy: JWTRefreshPolicy, now: Int64) -> APNsProviderToken {
        slot(for: signer).token(signer: signer, policy: policy, now: now)
    }

    /// APNs answered `ExpiredProviderToken` for `jwt`: renew at the next request, once, if it is still current.
    public func reportExpired(_ jwt: String, signer: APNsJWTSigner) {
        slot(for: signer).reportExpired(jwt)
    }

    /// How many times the token of this signer was renewed (not counting the first), for tests and metrics.
    public func renewals(for signer: APNsJWTSigner) -> Int {
        slot(for: signer).renewals
    }
}
