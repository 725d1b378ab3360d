import Crypto
import Norq
import NorqAPNs
import NorqCore
import NorqTesting
import Synchronization

/// One set of APNs token credentials (a team and its key).
struct APNsCredentials: Sendable {
    let teamID: String
    let keyID: String
    let key = P256.Signing.PrivateKey()

    var authentication: APNsAuthentication {
        .token(keyID: keyID, teamID: teamID, privateKeyPEM: key.pemRepresentation, keySource: "test")
    }
}

enum EmulatorFixtures {
    /// Retries that do not really wait (the router's clock below does not sleep).
    static let fastRetry = RetryPolicy(retries: 3, backoff: .milliseconds(1), maxBackoff: .milliseconds(2))

    /// A started emulator accepting `credentials` (all of them when several, any team then).
    static func emulator(_ credentials: [APNsCredentials], name: String = "sandbox", faults: APNsEmulator.Faults = .init(),
                         configure: (inout APNsEmulator.Configuration) -> Void = { _ in }) async throws -> APNsEmulator {
        var keys: [String: String] = [:]
        for c in credentials { keys[c.keyID] = c.key.publicKey.pemRepresentation }
        var configuration = APNsEmulator.Configuration(
            environmentName: name, teamID: credentials.count == 1 ? credentials[0].teamID : nil,
            signingKeys: keys, faults: faults)
        configure(&configuration)
        let emulator = try APNsEmulator(configuration: configuration)
        try await emulator.start()
        return emulator
    }

    /// An APNs provider whose sandbox (and production) endpoints are the given emulators.
    static func provider(_ name: String, _ credentials: APNsCredentials, bundleID: String = "com.example.app",
                         sandbox: APNsEmulator, production: APNsEmulator? = nil, productionByDefault: Bool = false,
                         retry: RetryPolicy = fastRetry, maxInFlight: Int = 1000,
                         configure: (inout APNsConfiguration) -> Void = { _ in }) throws -> APNsProvider {
        var configuration = APNsConfiguration(authentication: credentials.authentication, bundleID: bundleID,
                                              production: productionByDefault)
        configuration.sandboxEndpoint = APNsEndpoint(host: "localhost", port: sandbox.port)
        var roots = sandbox.caCertificatePEM
        if let production {
            configuration.productionEndpoint = APNsEndpoint(host: "localhost", port: production.port)
            roots += production.caCertificatePEM
        }
        configuration.additionalTrustRootsPEM = roots
        configure(&configuration)
        return try APNsProvider(name: name, configuration: configuration,
                                policy: DeliveryPolicy(retry: retry, maxInFlight: maxInFlight),
                                tokenCache: APNsTokenCache())
    }

    /// A router clock whose sleeps only yield (retries stay fast, `Retry-After` included).
    static let noWait = RouterClock(sleep: { _ in await Task.yield() }, random: { 0.5 })

    /// The `kid` and `iss` of a recorded `authorization: bearer <jwt>` header.
    static func jwtIdentity(_ authorization: String?) -> (kid: String, iss: String)? {
        guard let authorization, authorization.hasPrefix("bearer ") else { return nil }
        let parts = authorization.dropFirst("bearer ".count).split(separator: ".")
        guard parts.count == 3, let header = decode(parts[0]), let claims = decode(parts[1]),
              let kid = header["kid"]?.stringValue, let iss = claims["iss"]?.stringValue else { return nil }
        return (kid, iss)
    }

    private static func decode(_ part: Substring) -> JSONValue? {
        var text = String(part).replacing("-", with: "+").replacing("_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        guard let bytes = base64Decode(text) else { return nil }
        return try? JSONValue(parsing: bytes)
    }

    private static func base64Decode(_ text: String) -> [UInt8]? {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var table = [UInt8: UInt32]()
        for (i, c) in alphabet.enumerated() { table[c] = UInt32(i) }
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for c in text.utf8 where c != UInt8(ascii: "=") {
            guard let v = table[c] else { return nil }
            buffer = (buffer << 6) | v
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((buffer >> UInt32(bits)) & 0xff))
            }
        }
        return out
    }
}

extension PushOutcome {
    var deliveredMessageID: String? {
        if case .delivered(let d) = result { return d.messageID }
        return nil
    }
    var failureCode: String? {
        switch result {
        case .failed(let error): error.code.rawValue
        case .skipped(let skipped): skipped.code.rawValue
        case .rejected(let rejected): rejected.reason
        default: nil
        }
    }
    var token: String? {
        if case .token(let t) = target { return t.token }
        return nil
    }
}
