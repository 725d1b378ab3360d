import NorqConfig
import NorqCore
import Testing

/// 1,000+ generated Norq-project configs (mutations of a `norq.config.yaml` with `notifications:`, other
/// channels' providers and routes, a custom HTTP provider, Norq keys): each loads or fails with a `config/`
/// code and a location in the file, never a crash or a hang.
@Suite struct NorqProjectFuzzTests {
    static let base = """
    notifications: ./notifications
    brand: ./brand.yaml
    providers:
      fake:
        config: {apiKey: "${KEY:-k}"}
      resend:
        config: {apiKey: re_1, fromAddress: a@example.com}
      twilio:
        config: {accountSid: AC1}
      mailer:
        channels: [email, sms]
        auth: {type: bearer, token: "{{secrets.key}}"}
        send: {email: {method: POST, url: "https://x.example"}}
    routing:
      push: fake
      push.ios: fake
      email: resend
      sms: twilio
    """

    static let replacements = [
        "notifications", "templates", "brand", "codegen", "providers", "routing", "channels", "[push]", "[email]",
        "resend", "twilio", "expo", "console", "fcm", "suprsend", "custom", "email", "sms", "slack", "push",
        "push.web", "push.android", "{}", "[]", "~", ":", "-", "[", "{", "\"", "'", "${", "${X}", "\n", "  ", "&a",
        "*a", "!!str", "\u{0}", "é",
    ]

    @Test func generatedNorqProjectConfigsNeverCrash() {
        var rng = SplitMix64(state: 0x4E4F_5251)
        var documents: [String] = ["notifications: ./n\ntemplates: ./t\n", "routing:\n  email: nobody\n",
                                   "providers:\n  x:\n    channels: [push]\n", "providers:\n  expo: {}\nrouting: {push: expo}\n"]
        let lines = Self.base.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        while documents.count < 1000 {
            var mutated = lines
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let index = Int.random(in: 0..<mutated.count, using: &rng)
                let token = Self.replacements.randomElement(using: &rng)!
                switch Int.random(in: 0..<4, using: &rng) {
                case 0:
                    if let colon = mutated[index].firstIndex(of: ":") {
                        mutated[index] = String(mutated[index][...colon]) + " " + token
                    }
                case 1:
                    let indent = mutated[index].prefix { $0 == " " }
                    mutated[index] = indent + token + ":" + (mutated[index].split(separator: ":", maxSplits: 1).dropFirst().first.map { ":" + $0 } ?? "")
                case 2: mutated.remove(at: index); if mutated.isEmpty { mutated = ["x: y"] }
                default: mutated.insert(String(repeating: " ", count: Int.random(in: 0..<6, using: &rng)) + token, at: index)
                }
            }
            documents.append(mutated.joined(separator: "\n"))
        }
        let loader = ConfigurationLoader(registry: .testTypes, environment: [:], workingDirectory: "/tmp")
        var loaded = 0
        var failed: [String: Int] = [:]
        for document in documents {
            do {
                let configuration = try loader.load(yaml: document, file: "norq.config.yaml", baseDirectory: "/p")
                loaded += 1
                for provider in configuration.unservedProviders { #expect(!provider.channels.isEmpty) }
            } catch {
                failed[error.code.rawValue, default: 0] += 1
                #expect(error.code.area == "config", "\(error)")
                #expect(error.location?.file != nil, "error without location: \(error)")
            }
        }
        #expect(documents.count == 1000)
        #expect(loaded > 0 && failed.count >= 4, "loaded \(loaded), failed \(failed)")
    }
}
