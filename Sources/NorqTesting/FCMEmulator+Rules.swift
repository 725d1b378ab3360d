import Foundation
import Crypto
import _CryptoExtras

/// What the emulator answers to one request.
struct FCMEmulatorAnswer: Error, EmulatorHTTP2Answer {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]
    var errorCode: String?
    var messageName: String?
    /// The valid message answered (for the records).
    var message: FCMEmulatorRules.ValidMessage? = nil
}

/// FCM's validation of `messages:send` and of the OAuth token endpoint, as pure functions of the request.
enum FCMEmulatorRules {
    static let fcmErrorType = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
    static let payloadLimit = 4096
    /// FCM's limit for topic and condition messages.
    static let topicPayloadLimit = 2048
    static let maximumTTLSeconds = 2_419_200.0
    static let scopes = ["https://www.googleapis.com/auth/firebase.messaging", "https://www.googleapis.com/auth/cloud-platform"]

    /// FCM's error body: `{"error": {"code", "message", "status", "details": [FcmError{errorCode}, BadRequest?]}}`.
    static func error(_ status: Int, errorCode: String?, message: String, field: String? = nil,
                      retryAfter: Int? = nil) -> FCMEmulatorAnswer {
        var details: [[String: Any]] = []
        if let errorCode { details.append(["@type": fcmErrorType, "errorCode": errorCode]) }
        if let field {
            details.append(["@type": "type.googleapis.com/google.rpc.BadRequest",
                            "fieldViolations": [["field": field, "description": message]]])
        }
        var error: [String: Any] = ["code": status, "message": message, "status": FCMEmulator.canonical(status)]
        if !details.isEmpty { error["details"] = details }
        var headers = [("content-type", "application/json; charset=UTF-8")]
        if let retryAfter { headers.append(("retry-after", String(retryAfter))) }
        return FCMEmulatorAnswer(status: status, headers: headers, body: json(["error": error]),
                                 errorCode: errorCode ?? FCMEmulator.canonical(status))
    }

    static func invalid(_ message: String, field: String? = nil) -> FCMEmulatorAnswer {
        error(400, errorCode: "INVALID_ARGUMENT", message: message, field: field)
    }

    static func json(_ object: [String: Any]) -> [UInt8] {
        Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data())
    }

    /// A valid message's target and blocks, or the answer refusing it.
    struct ValidMessage: Sendable {
        var targetKind: String
        var target: String
        var blocks: [String]
        var validateOnly: Bool
    }

    /// Checks a `messages:send` body the way FCM does: one object with `message`, exactly one target, `data`
    /// maps of strings without reserved keys, `android.priority` `NORMAL`/`HIGH`, `android.ttl` a duration
    /// string within four weeks, and a message (without target) of at most 4,096 bytes.
    static func validate(body: [UInt8]) -> Result<ValidMessage, FCMEmulatorAnswer> {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            return .failure(invalid("Invalid JSON payload received."))
        }
        for key in object.keys where key != "message" && key != "validate_only" && key != "validateOnly" {
            return .failure(invalid("Invalid JSON payload received. Unknown name \"\(key)\": Cannot find field."))
        }
        guard var message = object["message"] as? [String: Any] else {
            return .failure(invalid("Request contains an invalid argument.", field: "message"))
        }
        let targets = ["token", "topic", "condition"].filter { message[$0] != nil }
        guard targets.count == 1, let kind = targets.first, let target = message[kind] as? String, !target.isEmpty else {
            return .failure(invalid("Exactly one of token, topic or condition must be set.", field: "message"))
        }
        if kind == "token", !target.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: "/") }) {
            return .failure(invalid("The registration token is not a valid FCM registration token", field: "message.token"))
        }
        let known: Set<String> = ["token", "topic", "condition", "name", "data", "notification", "android", "apns",
                                  "webpush", "fcm_options", "fcmOptions"]
        for key in message.keys where !known.contains(key) {
            return .failure(invalid("Invalid JSON payload received. Unknown name \"\(key)\" at 'message'."))
        }
        if let failure = checkData(message["data"], field: "message.data") { return .failure(failure) }
        var blocks: [String] = []
        if let android = message["android"] {
            blocks.append("android")
            guard let android = android as? [String: Any] else {
                return .failure(invalid("Invalid value at 'message.android'", field: "message.android"))
            }
            if let failure = checkData(android["data"], field: "message.android.data") { return .failure(failure) }
            if let priority = android["priority"] {
                guard let text = priority as? String, text == "NORMAL" || text == "HIGH" else {
                    return .failure(invalid("Invalid value at 'message.android.priority'", field: "message.android.priority"))
                }
            }
            if let ttl = android["ttl"] {
                guard let text = ttl as? String, text.hasSuffix("s"), let seconds = Double(text.dropLast()),
                      seconds >= 0, seconds <= maximumTTLSeconds else {
                    return .failure(invalid("Invalid value at 'message.android.ttl'", field: "message.android.ttl"))
                }
            }
        }
        if let apns = message["apns"] {
            blocks.append("apns")
            guard let apns = apns as? [String: Any], apns["payload"] == nil || apns["payload"] is [String: Any] else {
                return .failure(invalid("Invalid value at 'message.apns.payload'", field: "message.apns.payload"))
            }
        }
        if message["webpush"] != nil { blocks.append("webpush") }
        message.removeValue(forKey: kind)
        let size = json(message).count
        let limit = kind == "token" ? payloadLimit : topicPayloadLimit
        if size > limit {
            return .failure(invalid("Message is too big: \(size) bytes (\(limit) allowed)", field: "message"))
        }
        let validateOnly = (object["validate_only"] as? Bool) ?? (object["validateOnly"] as? Bool) ?? false
        return .success(ValidMessage(targetKind: kind, target: target, blocks: blocks, validateOnly: validateOnly))
    }

    /// `data` must be a map of strings without keys FCM reserves (`from`, `message_type`, `google*`, `gcm*`).
    static func checkData(_ value: Any?, field: String) -> FCMEmulatorAnswer? {
        guard let value else { return nil }
        guard let map = value as? [String: Any] else { return invalid("Invalid value at '\(field)'", field: field) }
        for (key, item) in map {
            let lower = key.lowercased()
            if lower == "from" || lower == "message_type" || lower.hasPrefix("google") || lower.hasPrefix("gcm") {
                return invalid("Invalid data payload key: \(key)", field: field)
            }
            guard item is String else {
                return invalid("Invalid value at '\(field)[\(key)]' (TYPE_STRING)", field: "\(field)[\(key)]")
            }
        }
        return nil
    }

    // MARK: OAuth

    /// A verified assertion: the service account it names.
    struct Assertion {
        var clientEmail: String
    }

    /// Google's token-endpoint refusal: 400 `{"error": "invalid_grant", "error_description": ...}`.
    static func grantError(_ description: String, error: String = "invalid_grant") -> FCMEmulatorAnswer {
        FCMEmulatorAnswer(status: 400, headers: [("content-type", "application/json; charset=utf-8")],
                          body: json(["error": error, "error_description": description]), errorCode: error)
    }

    /// Checks a token request: a form body with the JWT-bearer grant type and an RS256 assertion signed by a
    /// trusted service account, with a firebase.messaging scope, an `aud` ending in `/token`, and valid times.
    static func verifyTokenRequest(body: [UInt8], keys: [String: _RSA.Signing.PublicKey], now: Int64,
                                   futureSkew: Int64) -> Result<Assertion, FCMEmulatorAnswer> {
        var form: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let value = String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            form[String(parts[0])] = value
        }
        guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" else {
            return .failure(grantError("Invalid grant_type", error: "unsupported_grant_type"))
        }
        guard let assertion = form["assertion"] else { return .failure(grantError("Missing assertion")) }
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = base64URL(parts[0]), let claimsData = base64URL(parts[1]),
              let signature = base64URL(parts[2]),
              let header = (try? JSONSerialization.jsonObject(with: headerData)) as? [String: Any],
              let claims = (try? JSONSerialization.jsonObject(with: claimsData)) as? [String: Any] else {
            return .failure(grantError("Invalid JWT: malformed"))
        }
        guard header["alg"] as? String == "RS256" else { return .failure(grantError("Invalid JWT: alg must be RS256")) }
        guard let email = claims["iss"] as? String, let key = keys[email] else {
            return .failure(grantError("Invalid JWT: unknown service account", error: "invalid_client"))
        }
        let input = Array(parts[0].utf8) + [UInt8(ascii: ".")] + Array(parts[1].utf8)
        guard key.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: input,
                                   padding: .insecurePKCS1v1_5) else {
            return .failure(grantError("Invalid JWT Signature."))
        }
        let scope = (claims["scope"] as? String ?? "").split(separator: " ").map(String.init)
        guard scopes.contains(where: scope.contains) else { return .failure(grantError("Invalid JWT: scope", error: "invalid_scope")) }
        guard let audience = claims["aud"] as? String, audience.hasSuffix("/token") else {
            return .failure(grantError("Invalid JWT: aud"))
        }
        guard let iat = (claims["iat"] as? NSNumber)?.int64Value, let exp = (claims["exp"] as? NSNumber)?.int64Value else {
            return .failure(grantError("Invalid JWT: iat and exp are required"))
        }
        guard iat <= now + futureSkew, exp > now, exp - iat <= 3600, exp > iat else {
            return .failure(grantError("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."))
        }
        return .success(Assertion(clientEmail: email))
    }

    static func base64URL(_ text: Substring) -> Data? {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        return Data(base64Encoded: s)
    }
}
