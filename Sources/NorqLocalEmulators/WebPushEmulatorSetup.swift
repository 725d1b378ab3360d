import Crypto
import Foundation
package import NorqConfig
package import NorqCore
package import NorqTesting
import NorqWebPush

/// `norq send --emulator` for web tokens: starts the in-process push-service emulator and points the configuration's
/// Web Push providers at it (every endpoint's origin moved there, its CA trusted, private addresses allowed). The
/// recipients' web tokens are left as they are: the emulator adopts each under its own path, so a repeated durable
/// send with the same idempotency key is the same send (its fingerprint does not depend on the emulator's port).
package enum WebPushEmulatorSetup {
    /// The browser side of the demo subscription in examples/quickstart/recipients.json (published in
    /// examples/keys/README.md; **demo only**): the emulator decrypts messages to it with this key.
    package static let demoUserAgentPrivateKey = "T_d-EIcwYdjjZI9r_L-0k4fREM7ERCSvWukOh_ZDNac"
    package static let demoAuthSecret = "SCcgLAlycoK6hUuYKyV4MQ"

    package static func hasWebPush(_ configuration: NorqConfiguration) -> Bool {
        configuration.providers.contains { $0.configuration is WebPushConfiguration }
    }

    /// Starts the emulator when the configuration has a Web Push provider and the recipients a web token; returns
    /// the rewritten configuration. Every web token is adopted under its endpoint's path (and the last path segment
    /// of it as its id): the demo subscription with its published key (decrypted), others without keys (checked,
    /// not decrypted).
    package static func attach(to configuration: NorqConfiguration,
                       recipients: [Recipient]) async throws(NorqError) -> (NorqConfiguration, WebPushEmulator?) {
        guard hasWebPush(configuration), recipients.contains(where: { $0.tokens.contains { $0.platform == .web } }) else {
            return (configuration, nil)
        }
        let emulator = try await start(WebPushEmulator.Configuration())
        let rewritten = point(configuration, at: emulator)
        let demoKey = try? P256.KeyAgreement.PrivateKey(rawRepresentation: decode(demoUserAgentPrivateKey))
        let demoPublic = demoKey.map { encode(Array($0.publicKey.x963Representation)) }
        var adoptedPaths = Set<String>(), ids = Set<String>()
        for recipient in recipients {
            for (t, token) in recipient.tokens.enumerated() where token.platform == .web {
                // Tokens the provider refuses (no keys, not an https URL) are left to it: it reports them.
                guard let keys = token.keys, let endpoint = try? WebPushEndpoint(parsing: token.token),
                      adoptedPaths.insert(endpoint.path).inserted else { continue }
                var id = subscriptionID(of: token.token, index: t)
                if !ids.insert(id).inserted {
                    id += "-\(ids.count)"
                    ids.insert(id)
                }
                if let demoKey, keys.p256dh == demoPublic, keys.auth == demoAuthSecret {
                    _ = emulator.adopt(id: id, userAgentPrivateKey: demoKey, authSecret: decode(demoAuthSecret),
                                       path: endpoint.path)
                } else {
                    _ = emulator.adoptWithoutKeys(id: id, p256dh: keys.p256dh, auth: keys.auth, path: endpoint.path)
                }
            }
        }
        return (rewritten, emulator)
    }

    /// `norq serve --emulator`: the subscriptions arrive later, through the API, so the emulator accepts messages to
    /// any path (checked, not decrypted: `acceptUnknownSubscriptions`) and decrypts those to the quick start's demo
    /// subscription (`https://push.example.net/push/demo-web-1` with the published keys). Nil when the
    /// configuration has no Web Push provider.
    package static func startForServing(_ configuration: NorqConfiguration) async throws(NorqError) -> WebPushEmulator? {
        guard hasWebPush(configuration) else { return nil }
        var settings = WebPushEmulator.Configuration()
        settings.acceptUnknownSubscriptions = true
        let emulator = try await start(settings)
        if let demoKey = try? P256.KeyAgreement.PrivateKey(rawRepresentation: decode(demoUserAgentPrivateKey)) {
            _ = emulator.adopt(id: subscriptionID(of: demoSubscriptionPath, index: 0), userAgentPrivateKey: demoKey,
                               authSecret: decode(demoAuthSecret), path: demoSubscriptionPath)
        }
        return emulator
    }

    /// The path of the demo subscription's endpoint in examples/quickstart/recipients.json.
    package static let demoSubscriptionPath = "/push/demo-web-1"

    private static func start(_ settings: WebPushEmulator.Configuration) async throws(NorqError) -> WebPushEmulator {
        do {
            let emulator = try WebPushEmulator(configuration: settings)
            try await emulator.start()
            return emulator
        } catch {
            throw NorqError(.cliEmulatorFailed, "the Web Push emulator could not start: \(error)")
        }
    }

    /// `configuration` with every Web Push provider pointed at `emulator` (every endpoint's origin moved there, its
    /// CA trusted, private addresses allowed): at start, and again for a configuration reloaded while it runs.
    package static func point(_ configuration: NorqConfiguration, at emulator: WebPushEmulator) -> NorqConfiguration {
        var rewritten = configuration
        for index in rewritten.providers.indices {
            guard var web = rewritten.providers[index].configuration as? WebPushConfiguration else { continue }
            web.allowPrivateEndpoints = true
            web.allowedHosts = nil
            web.additionalTrustRootsPEM = emulator.caCertificatePEM
            web.caPath = "(in-process emulator CA)"
            web.originOverride = WebPushOriginOverride(host: "127.0.0.1", port: emulator.port)
            rewritten.providers[index].configuration = web
        }
        return rewritten
    }

    /// The last path segment of an endpoint (URL-safe characters only), or `web-<index>`.
    package static func subscriptionID(of endpoint: String, index: Int) -> String {
        let last = endpoint.split(separator: "?").first?.split(separator: "/").last.map(String.init) ?? ""
        let safe = last.filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
        return safe.isEmpty ? "web-\(index)" : String(safe.prefix(64))
    }

    package static func decode(_ text: String) -> [UInt8] {
        var b64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b64.count % 4 != 0 { b64.append("=") }
        return Data(base64Encoded: b64).map(Array.init) ?? []
    }

    package static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

import Foundation
