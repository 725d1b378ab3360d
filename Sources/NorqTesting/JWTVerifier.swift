import Crypto
import Foundation

/// Verifies APNs provider tokens (ES256 JWT). Pure apart from the keys it holds; the caller caches verdicts.
struct JWTVerifier: Sendable {
    /// A verified token: its identity claims, kept so expiry can be re-checked cheaply on every request.
    struct Verified: Sendable, Equatable {
        var keyID: String
        var teamID: String
        var issuedAt: Int64
    }

    enum Failure: Error, Equatable {
        /// Malformed, bad signature, unknown key, wrong team: 403 InvalidProviderToken.
        case invalid(String)
    }

    let keys: [String: P256.Signing.PublicKey]
    let teamID: String?

    init(keysPEM: [String: String], teamID: String?) throws {
        var keys: [String: P256.Signing.PublicKey] = [:]
        for (kid, pem) in keysPEM {
            keys[kid] = try P256.Signing.PublicKey(pemRepresentation: pem)
        }
        self.keys = keys
        self.teamID = teamID
    }

    /// Checks the structure, header, claims and signature of `jwt` (no time checks).
    func verify(_ jwt: Substring) -> Result<Verified, Failure> {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return .failure(.invalid("not three parts")) }
        guard let headerBytes = Self.base64URLDecode(parts[0]),
              let claimsBytes = Self.base64URLDecode(parts[1]),
              let signature = Self.base64URLDecode(parts[2])
        else { return .failure(.invalid("bad base64url")) }
        guard let header = (try? JSONSerialization.jsonObject(with: Data(headerBytes))) as? [String: Any],
              let claims = (try? JSONSerialization.jsonObject(with: Data(claimsBytes))) as? [String: Any]
        else { return .failure(.invalid("bad JSON")) }
        guard header["alg"] as? String == "ES256" else { return .failure(.invalid("alg is not ES256")) }
        guard let kid = header["kid"] as? String else { return .failure(.invalid("no kid")) }
        guard let key = keys[kid] else { return .failure(.invalid("unknown kid")) }
        guard let iss = claims["iss"] as? String else { return .failure(.invalid("no iss")) }
        if let teamID, iss != teamID { return .failure(.invalid("iss is not the team id")) }
        // iat must be a JSON number (not a string).
        guard let iatNumber = claims["iat"] as? NSNumber, !(claims["iat"] is String)
        else { return .failure(.invalid("iat is not a number")) }
        guard signature.count == 64,
              let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
        else { return .failure(.invalid("bad signature encoding")) }
        let signingInput = Array(jwt.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard key.isValidSignature(ecdsa, for: signingInput) else { return .failure(.invalid("bad signature")) }
        return .success(Verified(keyID: kid, teamID: iss, issuedAt: iatNumber.int64Value))
    }

    static func base64URLDecode(_ s: Substring) -> [UInt8]? {
        var b64 = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b64.count % 4 != 0 { b64.append("=") }
        guard let data = Data(base64Encoded: b64) else { return nil }
        return Array(data)
    }
}
