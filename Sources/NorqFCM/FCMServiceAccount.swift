public import NorqCore
import _CryptoExtras

/// A Google service account, from its JSON key file: the identity that signs OAuth assertions for FCM.
///
/// `description` names the account and key id only; the private key is never printed.
public struct FCMServiceAccount: Sendable, Hashable, CustomStringConvertible {
    /// `client_email`: the JWT `iss`.
    public var clientEmail: String
    /// `private_key_id`: the JWT header's `kid` when present.
    public var privateKeyID: String?
    /// `private_key`: PEM (PKCS#8 `BEGIN PRIVATE KEY`, or PKCS#1 `BEGIN RSA PRIVATE KEY`).
    public var privateKeyPEM: String
    /// `token_uri` (default `https://oauth2.googleapis.com/token`).
    public var tokenURI: String?
    /// `project_id`, when the file names one.
    public var projectID: String?

    public init(clientEmail: String, privateKeyPEM: String, privateKeyID: String? = nil, tokenURI: String? = nil,
                projectID: String? = nil) {
        self.clientEmail = clientEmail
        self.privateKeyPEM = privateKeyPEM
        self.privateKeyID = privateKeyID
        self.tokenURI = tokenURI
        self.projectID = projectID
    }

    public var description: String {
        "service account \(clientEmail)" + (privateKeyID.map { " (key id \($0.prefix(12))…)" } ?? "")
    }

    /// Parses a service-account JSON key. Errors name the missing or malformed field, never its value.
    ///
    /// - Parameter location: where the JSON came from, for error messages.
    public init(json text: String, location: SourceLocation? = nil) throws(NorqError) {
        let value: JSONValue
        do {
            value = try JSONValue(parsing: Array(text.utf8))
        } catch {
            throw NorqError(.fcmInvalidServiceAccount, "the service account is not valid JSON", at: location,
                            hint: "use the key file downloaded from the Firebase console (Project settings > Service accounts)")
        }
        guard case .object(let object) = value else {
            throw NorqError(.fcmInvalidServiceAccount, "the service account must be a JSON object", at: location)
        }
        if let type = object["type"]?.stringValue, type != "service_account" {
            throw NorqError(.fcmInvalidServiceAccount,
                            "the JSON has type \"\(type.prefix(30))\"; FCM needs a key of type \"service_account\"",
                            at: location)
        }
        func field(_ name: String) throws(NorqError) -> String {
            guard let text = object[name]?.stringValue, !text.isEmpty else {
                throw NorqError(.fcmInvalidServiceAccount, "the service account has no \"\(name)\" string", at: location)
            }
            return text
        }
        self.clientEmail = try field("client_email")
        self.privateKeyPEM = try field("private_key")
        self.privateKeyID = object["private_key_id"]?.stringValue
        self.tokenURI = object["token_uri"]?.stringValue
        self.projectID = object["project_id"]?.stringValue
        _ = try Self.rsaKey(privateKeyPEM, location: location)
    }

    /// The RSA signing key, or `fcm/invalid-private-key` (never printing the key).
    static func rsaKey(_ pem: String, location: SourceLocation? = nil) throws(NorqError) -> _RSA.Signing.PrivateKey {
        guard pem.contains("-----BEGIN") && pem.contains("PRIVATE KEY-----") else {
            throw NorqError(.fcmInvalidPrivateKey, "the service account's private_key is not a PEM private key",
                            at: location)
        }
        do {
            return try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw NorqError(.fcmInvalidPrivateKey,
                            "the service account's private_key is not an RSA private key of 2048 bits or more",
                            at: location, hint: "FCM assertions are RS256; EC and other keys are refused")
        }
    }
}
