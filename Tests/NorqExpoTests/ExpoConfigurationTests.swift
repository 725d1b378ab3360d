import Foundation
import NorqBuiltIns
import NorqConfig
import NorqCore
@testable import NorqExpo
import Testing

@Suite("Expo configuration")
struct ExpoConfigurationTests {
    static let directory: String = {
        let path = NSTemporaryDirectory() + "norq-expo-config-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }()

    func load(_ yaml: String, environment: [String: String] = [:]) throws(NorqError) -> NorqConfiguration {
        try ConfigurationLoader(registry: .builtIn, environment: environment, workingDirectory: Self.directory)
            .load(yaml: yaml, file: "norq.yaml", baseDirectory: Self.directory)
    }

    func expo(_ configuration: NorqConfiguration, _ name: String = "expo") throws -> ExpoConfiguration {
        try #require(configuration.providers.first { $0.name == name }?.configuration as? ExpoConfiguration)
    }

    @Test("routing: push: expo is served by the built-in registry, with Expo's defaults")
    func routedAndDefaults() throws {
        let configuration = try load("""
            providers:
              expo:
                config: {}
            routing:
              push: expo
            """)
        #expect(configuration.routing.defaultProvider == "expo")
        #expect(configuration.unservedProviders.isEmpty)
        let expo = try expo(configuration)
        #expect(expo.accessToken == nil)
        #expect(expo.endpoint == .expo)
        #expect(expo.receiptDelay == .seconds(900))
        #expect(expo.rateLimit == 600)
        #expect(expo.maxConcurrentRequests == 6)
        #expect(expo.gzipThreshold == 1024)
        #expect(expo.summary.first?.value == "anonymous (no access token)")
    }

    @Test("every key; the access token inline, from a file, never printed")
    func everyKey() throws {
        let secret = "expo-secret-token-0123456789abcdefABCDEF"
        let configuration = try load("""
            providers:
              expo:
                config:
                  accessToken: \(secret)
                  endpoint: https://127.0.0.1:8443
                  receiptDelay: 30s
                  rateLimit: 0
                  maxConcurrentRequests: 2
                  timeout: 5s
                  gzip: false
            routing:
              push.ios: expo
            """)
        let expo = try expo(configuration)
        #expect(expo.accessToken == secret)
        #expect(expo.accessTokenSource == "inline")
        #expect(expo.endpoint == ExpoURL(host: "127.0.0.1", port: 8443))
        #expect(expo.receiptDelay == .seconds(30))
        #expect(expo.rateLimit == 0)
        #expect(expo.maxConcurrentRequests == 2)
        #expect(expo.requestTimeout == .seconds(5))
        #expect(expo.gzipThreshold == nil)
        #expect(!expo.description.contains(secret))
        #expect(!expo.summary.map(\.value).joined().contains(secret))

        let file = Self.directory + "/expo-token.txt"
        try Data((secret + "\n").utf8).write(to: URL(fileURLWithPath: file))
        let fromFile = try self.expo(load("providers:\n  expo:\n    config:\n      accessToken: ./expo-token.txt\nrouting:\n  push: expo\n"))
        #expect(fromFile.accessToken == secret)
        #expect(fromFile.accessTokenSource == "./expo-token.txt")
    }

    @Test("invalid values are typed errors at load")
    func invalidValues() {
        func code(_ yaml: String) -> NorqError.Code? {
            do { _ = try load(yaml); return nil } catch { return error.code }
        }
        let head = "providers:\n  expo:\n    config:\n"
        #expect(code(head + "      accessToken: \"bad token\"\n") == .expoInvalidAccessToken)
        #expect(code(head + "      accessToken: ./missing-token.txt\n") == .configFileNotFound)
        #expect(code(head + "      endpoint: http://exp.host\n") == .configInvalidValue)
        #expect(code(head + "      endpoint: https://exp.host/path\n") == .configInvalidValue)
        #expect(code(head + "      rateLimit: -1\n") != nil)
        #expect(code(head + "      maxConcurrentRequests: 0\n") != nil)
        #expect(code(head + "      projectId: x\n") == .configUnknownKey)
        #expect(code(head + "      caPem: not a pem\n") == .configInvalidCertificate)
    }

    @Test("env fallback: NORQ_EXPO_ACCESS_TOKEN, NORQ_EXPO_ENABLED, and neither")
    func environmentFallback() throws {
        let type = ExpoProviderType()
        let context = ProviderConfigurationContext(instanceName: "expo", baseDirectory: Self.directory)
        #expect(try type.configurationFromEnvironment([:], context: context) == nil)
        let anonymous = try #require(try type.configurationFromEnvironment(["NORQ_EXPO_ENABLED": "1"], context: context)
                                     as? ExpoConfiguration)
        #expect(anonymous.accessToken == nil)
        #expect(anonymous.origin == "env")
        let authenticated = try #require(try type.configurationFromEnvironment(
            ["NORQ_EXPO_ACCESS_TOKEN": "tok_123", "NORQ_EXPO_ENDPOINT": "https://localhost:9999"], context: context)
            as? ExpoConfiguration)
        #expect(authenticated.accessToken == "tok_123")
        #expect(authenticated.accessTokenSource == "env NORQ_EXPO_ACCESS_TOKEN")
        #expect(authenticated.endpoint.port == 9999)
        #expect(throws: NorqError.self) {
            try type.configurationFromEnvironment(["NORQ_EXPO_ENDPOINT": "https://localhost:9999"], context: context)
        }
        do {
            _ = try type.configurationFromEnvironment(["NORQ_EXPO_ACCES_TOKEN": "x"], context: context)
            Issue.record("a misspelt variable was accepted")
        } catch {
            #expect(error.code == .configUnknownKey)
        }
        // Through the loader: no providers block, the env registers `expo`.
        let configuration = try load("routing:\n  push: expo\n", environment: ["NORQ_EXPO_ENABLED": "yes"])
        #expect(configuration.providers.map(\.name).contains("expo"))
    }
}
