public import NorqCore
import Crypto
import _CryptoExtras

/// The wall clock the provider reads (assertion `iat`, token expiry). Injectable so tests can simulate hours.
public struct FCMClock: Sendable {
    /// Current UNIX time in seconds.
    public var epochSeconds: @Sendable () -> Int64

    public init(epochSeconds: @escaping @Sendable () -> Int64) {
        self.epochSeconds = epochSeconds
    }

    /// The system wall clock.
    public static let system = FCMClock { FCMWallClock.now() }
}

/// The OAuth 2.0 JWT-bearer assertion of a service account: RS256 over
/// `{"alg":"RS256","typ":"JWT","kid":…}.{"iss":…,"scope":…,"aud":…,"iat":…,"exp":…}`, base64url without padding.
public struct FCMAssertionSigner: Sendable {
    /// The scope FCM's HTTP v1 API requires.
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// Lifetime of an assertion (Google accepts at most one hour).
    public static let lifetime: Int64 = 3600

    public let clientEmail: String
    public let keyID: String?
    /// The `aud` claim: the token endpoint the assertion is exchanged at.
    public let audience: String
    private let privateKey: _RSA.Signing.PrivateKey
    private let encodedHeader: String

    public init(serviceAccount: FCMServiceAccount, audience: String) throws(NorqError) {
        self.clientEmail = serviceAccount.clientEmail
        self.keyID = serviceAccount.privateKeyID
        self.audience = audience
        self.privateKey = try FCMServiceAccount.rsaKey(serviceAccount.privateKeyPEM)
        var header: [UInt8] = Array(#"{"alg":"RS256","typ":"JWT""#.utf8)
        if let keyID = serviceAccount.privateKeyID {
            header.append(contentsOf: #","kid":"#.utf8)
            JSONValue.writeString(keyID, into: &header)
        }
        header.append(UInt8(ascii: "}"))
        self.encodedHeader = Base64URL.encode(header)
    }

    /// A signed assertion issued at `issuedAt` (epoch seconds), valid for one hour.
    public func sign(issuedAt: Int64) throws(NorqError) -> String {
        var claims: [UInt8] = Array(#"{"iss":"#.utf8)
        JSONValue.writeString(clientEmail, into: &claims)
        claims.append(contentsOf: #","scope":"#.utf8)
        JSONValue.writeString(Self.scope, into: &claims)
        claims.append(contentsOf: #","aud":"#.utf8)
        JSONValue.writeString(audience, into: &claims)
        claims.append(contentsOf: #","iat":\#(issuedAt),"exp":\#(issuedAt + Self.lifetime)}"#.utf8)
        let signingInput = encodedHeader + "." + Base64URL.encode(claims)
        do {
            let signature = try privateKey.signature(for: Array(signingInput.utf8), padding: .insecurePKCS1v1_5)
            return signingInput + "." + Base64URL.encode(Array(signature.rawRepresentation))
        } catch {
            throw NorqError(.fcmInvalidPrivateKey, "signing the OAuth assertion of \(clientEmail) failed")
        }
    }

    /// The form body of the token request: `grant_type=urn:…:jwt-bearer&assertion=<jwt>`.
    public static func tokenRequestBody(assertion: String) -> [UInt8] {
        // The JWT is base64url and dots: nothing to percent-encode.
        Array("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)".utf8)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

enum FCMWallClock {
    /// Whole seconds only: the coarse clock (the time of the last tick, a few milliseconds old) is enough and costs
    /// far less than the precise one, read twice per push.
    static func now() -> Int64 {
        var spec = timespec()
        #if os(Linux)
        clock_gettime(CLOCK_REALTIME_COARSE, &spec)
        #else
        clock_gettime(CLOCK_REALTIME, &spec)
        #endif
        return Int64(spec.tv_sec)
    }
}
