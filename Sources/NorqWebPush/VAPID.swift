public import NorqCore
public import Crypto
import Synchronization

/// A VAPID key pair (RFC 8292): the application server's long-term P-256 signing key and its public key.
/// Its description never shows the private key.
public struct VAPIDKeyPair: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    public let privateKey: P256.Signing.PrivateKey
    /// The 65-byte uncompressed public key.
    public let publicKeyBytes: [UInt8]
    /// `k=` of the `Authorization` header (and the browser's `applicationServerKey`): base64url of `publicKeyBytes`.
    public let publicKeyBase64URL: String

    /// A pair from a private key; when `publicKey` is given it must be the private key's public key
    /// (`webpush/invalid-vapid-key` otherwise).
    public init(privateKey: P256.Signing.PrivateKey, publicKey: [UInt8]? = nil) throws(NorqError) {
        let derived = Array(privateKey.publicKey.x963Representation)
        if let publicKey, publicKey != derived {
            throw NorqError(.webPushInvalidVAPIDKey,
                            "vapidPublicKey does not belong to vapidPrivateKey (the pair does not match)")
        }
        self.privateKey = privateKey
        self.publicKeyBytes = derived
        self.publicKeyBase64URL = Base64URL.encode(derived)
    }

    /// A new random pair (`norq` demos and tests).
    public static func generate() -> VAPIDKeyPair {
        // A fresh key's own public key always matches.
        let key = P256.Signing.PrivateKey()
        let derived = Array(key.publicKey.x963Representation)
        return VAPIDKeyPair(unchecked: key, publicKeyBytes: derived)
    }

    private init(unchecked privateKey: P256.Signing.PrivateKey, publicKeyBytes: [UInt8]) {
        self.privateKey = privateKey
        self.publicKeyBytes = publicKeyBytes
        self.publicKeyBase64URL = Base64URL.encode(publicKeyBytes)
    }

    /// base64url of the 32-byte private scalar (the form web-push tools print). A secret: never log it.
    public var privateKeyBase64URL: String { Base64URL.encode(Array(privateKey.rawRepresentation)) }

    public static func == (lhs: VAPIDKeyPair, rhs: VAPIDKeyPair) -> Bool { lhs.publicKeyBytes == rhs.publicKeyBytes }
    public func hash(into hasher: inout Hasher) { hasher.combine(publicKeyBytes) }
    public var description: String { "VAPIDKeyPair(public: \(publicKeyBase64URL.prefix(12))…, private: <redacted>)" }
    public var debugDescription: String { description }
}

/// Signs VAPID JWTs: ES256 over `{"typ":"JWT","alg":"ES256"}.{"aud":…,"exp":…,"sub":…}`, raw r||s, base64url.
public struct VAPIDSigner: Sendable {
    public let keys: VAPIDKeyPair
    /// `mailto:` or `https:` contact URI.
    public let subject: String
    private let encodedHeader: String

    public init(keys: VAPIDKeyPair, subject: String) {
        self.keys = keys
        self.subject = subject
        self.encodedHeader = Base64URL.encode(Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8))
    }

    /// A JWT for `audience` (the push service origin, `https://host[:port]`) expiring at `expiresAt` (epoch s).
    public func sign(audience: String, expiresAt: Int64) -> String {
        var claims: [UInt8] = []
        claims.append(contentsOf: #"{"aud":"#.utf8)
        JSONValue.writeString(audience, into: &claims)
        claims.append(contentsOf: #","exp":"#.utf8)
        claims.append(contentsOf: String(expiresAt).utf8)
        claims.append(contentsOf: #","sub":"#.utf8)
        JSONValue.writeString(subject, into: &claims)
        claims.append(UInt8(ascii: "}"))
        let signingInput = encodedHeader + "." + Base64URL.encode(claims)
        let signature = (try? keys.privateKey.signature(for: Array(signingInput.utf8)).rawRepresentation).map(Array.init) ?? []
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// `vapid t=<jwt>, k=<public key>`: the `Authorization` header value (RFC 8292 §3).
    public func authorization(jwt: String) -> String {
        "vapid t=" + jwt + ", k=" + keys.publicKeyBase64URL
    }
}

/// When to mint a new VAPID token. Pure: the caller passes the time.
public struct VAPIDRenewalPolicy: Sendable, Hashable {
    /// `exp - now` of a new token; at most 24 hours (RFC 8292 §2). Default 12 hours.
    public var lifetime: Duration
    /// A token is replaced this long before its `exp` (so none is sent close to expiry, clock skew included).
    /// Default 1 hour.
    public var renewBefore: Duration

    public init(lifetime: Duration = .seconds(12 * 3600), renewBefore: Duration = .seconds(3600)) {
        self.lifetime = min(lifetime, .seconds(24 * 3600))
        self.renewBefore = min(renewBefore, self.lifetime / 2)
    }

    /// The `exp` of a token minted at `now` (epoch seconds).
    public func expiry(mintedAt now: Int64) -> Int64 { now + lifetime.components.seconds }

    /// Whether a token expiring at `expiresAt` must be replaced at `now`: when there is none, when it is within
    /// `renewBefore` of its expiry, or when its `exp` is further than 24 hours ahead (a clock that went back).
    public func needsRenewal(expiresAt: Int64?, now: Int64) -> Bool {
        guard let expiresAt else { return true }
        if expiresAt - now > 24 * 3600 { return true }
        return now >= expiresAt - renewBefore.components.seconds
    }
}

/// VAPID tokens cached per origin (one JWT serves every endpoint of a push service), renewed by
/// ``VAPIDRenewalPolicy``. Bounded: at most `capacity` origins; when full, expired-or-due entries are dropped
/// first, then the whole cache (the next request per origin signs again).
public final class VAPIDTokenCache: Sendable {
    public struct Token: Sendable, Hashable {
        public var jwt: String
        /// The `Authorization` header value.
        public var headerValue: String
        public var expiresAt: Int64
        /// What a dry run prints for the header: the audience and expiry, never the signed token.
        public var redactedHeaderValue: String = ""
    }

    private let signer: VAPIDSigner
    private let policy: VAPIDRenewalPolicy
    private let capacity: Int
    private let tokens = Mutex<[String: Token]>([:])

    public init(signer: VAPIDSigner, policy: VAPIDRenewalPolicy = VAPIDRenewalPolicy(), capacity: Int = 1024) {
        self.signer = signer
        self.policy = policy
        self.capacity = max(1, capacity)
    }

    /// The current token for `origin` at `now` (epoch seconds), signed when missing or due.
    public func token(forOrigin origin: String, now: Int64) -> Token {
        if let cached = tokens.withLock({ $0[origin] }), !policy.needsRenewal(expiresAt: cached.expiresAt, now: now) {
            return cached
        }
        let expiresAt = policy.expiry(mintedAt: now)
        let jwt = signer.sign(audience: origin, expiresAt: expiresAt)
        let token = Token(jwt: jwt, headerValue: signer.authorization(jwt: jwt), expiresAt: expiresAt,
                          redactedHeaderValue: "vapid t=<redacted ES256 JWT aud=\(origin) exp=\(expiresAt)>, k=\(signer.keys.publicKeyBase64URL)")
        tokens.withLock { cache in
            if cache[origin] == nil, cache.count >= capacity {
                cache = cache.filter { !policy.needsRenewal(expiresAt: $0.value.expiresAt, now: now) }
                if cache.count >= capacity { cache.removeAll(keepingCapacity: true) }
            }
            cache[origin] = token
        }
        return token
    }

    /// Origins cached now.
    public var count: Int { tokens.withLock { $0.count } }
}
