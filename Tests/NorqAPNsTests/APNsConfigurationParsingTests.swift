import Foundation
import NorqAPNs
import NorqCore
import Testing

/// Builds config nodes by hand (this target does not depend on the YAML loader).
enum Node {
    static func map(_ pairs: KeyValuePairs<String, String>, file: String = "norq.yaml") -> ConfigNode {
        var line = 1
        var entries: [(key: ConfigNode, value: ConfigNode)] = []
        for (key, value) in pairs {
            line += 1
            let location = SourceLocation(file: file, line: line, column: 7)
            let valueNode = ConfigNode(.scalar(value, quoted: false),
                                       at: SourceLocation(file: file, line: line, column: 9 + key.count))
            entries.append((ConfigNode(.scalar(key, quoted: false), at: location), valueNode))
        }
        return ConfigNode(.mapping(entries), at: SourceLocation(file: file, line: 2, column: 7))
    }
}

enum Paths {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let demoKey = root + "/examples/keys/AuthKey_DEMO000000.p8"
    static let context = ProviderConfigurationContext(instanceName: "apns", baseDirectory: root, file: "norq.yaml")

    static func temporaryFile(_ contents: String) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("norq-apns-\(UUID().uuidString).pem")
        try Data(contents.utf8).write(to: url)
        return url.path
    }
}

func parse(_ pairs: KeyValuePairs<String, String>) throws(NorqError) -> APNsConfiguration {
    try APNsConfiguration.parse(Node.map(pairs), context: Paths.context)
}

func thrown(_ pairs: KeyValuePairs<String, String>) -> NorqError? {
    do { _ = try parse(pairs) } catch { return error }
    return nil
}

let p384PKCS8 = """
-----BEGIN PRIVATE KEY-----
MIG2AgEAMBAGByqGSM49AgEGBSuBBAAiBIGeMIGbAgEBBDCQ3ByUpn/lok5u5EGg
TxxbUqQERcJBO5oK897nNE4U5LG08Z9ZXaG4znENMGQFON2hZANiAAR4Mt4TTACz
ak3VHFnlrHtpGWMPJJ/JMb+LMoWoCb2aDiuhORf8b4aY2k5GjPRJcY1+ENvA2dw0
QmbIFipp+snIAWycgYOQPqYcBuFyxTjKL9QVPLZB70oOMfGwT2yIRY8=
-----END PRIVATE KEY-----
"""
let fakeCertificate = "-----BEGIN CERTIFICATE-----\nMIIBczCCARmgAwIBAgIU\n-----END CERTIFICATE-----\n"
let fakeKey = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49\n-----END PRIVATE KEY-----\n"

@Suite struct APNsTokenConfigurationTests {
    @Test func validTokenConfiguration() throws {
        let configuration = try parse([
            "keyId": "DEMO000000", "teamId": "TEAM123ABC", "bundleId": "com.example.MyApp",
            "keyPath": "examples/keys/AuthKey_DEMO000000.p8", "production": "true",
        ])
        guard case .token(let keyID, let teamID, let pem, let source) = configuration.authentication else {
            Issue.record("expected token auth")
            return
        }
        #expect(keyID == "DEMO000000")
        #expect(teamID == "TEAM123ABC")
        #expect(pem.contains("BEGIN PRIVATE KEY"))
        #expect(source == "examples/keys/AuthKey_DEMO000000.p8")
        #expect(configuration.bundleID == "com.example.MyApp")
        #expect(configuration.production)
        #expect(configuration.sandboxEndpoint == .sandbox)
        #expect(configuration.origin == "config")
        let summary = configuration.summary.map { "\($0.key)=\($0.value)" }.joined(separator: "\n")
        #expect(summary.contains("keyId=DEMO000000"))
        #expect(!summary.contains("PRIVATE KEY"), "the summary must never print key material")
    }

    @Test func inlineKeyPem() throws {
        let pem = try String(contentsOfFile: Paths.demoKey, encoding: .utf8)
        let configuration = try APNsConfiguration.parse(
            Node.map(["keyId": "DEMO000000", "teamId": "TEAM123ABC", "bundleId": "b.c", "keyPem": pem]), context: Paths.context)
        #expect(configuration.authentication.isToken)
        #expect(!configuration.summary.contains { $0.value.contains("BEGIN") })
    }

    @Test func identifiersMustBeTenUppercaseAlphanumerics() {
        for bad in ["DEMO00000", "DEMO0000000", "demo000000", "DEMO-00000", "DEMO00000É"] {
            let error = thrown(["keyId": bad, "teamId": "TEAM123ABC", "bundleId": "b", "keyPath": Paths.demoKey])
            #expect(error?.code.rawValue == "config/invalid-key-id", "\(bad)")
            #expect(error?.location?.line == 2)
        }
        let team = thrown(["keyId": "DEMO000000", "teamId": "team123abc", "bundleId": "b", "keyPath": Paths.demoKey])
        #expect(team?.code.rawValue == "config/invalid-team-id")
        #expect(team?.location == SourceLocation(file: "norq.yaml", line: 3, column: 15))
    }

    @Test func requiredKeys() {
        #expect(thrown(["keyId": "DEMO000000", "teamId": "TEAM123ABC", "keyPath": Paths.demoKey])?.code == .configMissingKey)
        #expect(thrown(["teamId": "TEAM123ABC", "bundleId": "b", "keyPath": Paths.demoKey])?.code == .configMissingKey)
        #expect(thrown(["keyId": "DEMO000000", "teamId": "TEAM123ABC", "bundleId": "b"])?.code == .configMissingKey)
    }

    @Test func unknownKeySuggestsTheRightOne() {
        let error = thrown(["keyID": "DEMO000000", "teamId": "TEAM123ABC", "bundleId": "b", "keyPath": Paths.demoKey])
        #expect(error?.code.rawValue == "config/unknown-key")
        #expect(error?.hint == "did you mean \"keyId\"?")
    }

    @Test func conflictingKeys() {
        let both = thrown(["keyId": "DEMO000000", "teamId": "TEAM123ABC", "bundleId": "b",
                           "keyPath": Paths.demoKey, "keyPem": "x"])
        #expect(both?.code.rawValue == "config/conflicting-keys")
        let mixed = thrown(["keyId": "DEMO000000", "teamId": "TEAM123ABC", "bundleId": "b",
                            "keyPath": Paths.demoKey, "certPem": fakeCertificate])
        #expect(mixed?.code.rawValue == "config/conflicting-keys")
    }

    @Test func keyFileErrorsNameThePathNeverTheKey() throws {
        let missing = thrown(["keyId": "DEMO000000", "teamId": "TEAM123ABC", "bundleId": "b", "keyPath": "secrets/nope.p8"])
        #expect(missing?.code.rawValue == "config/key-not-found")
        #expect(missing?.message.contains("secrets/nope.p8") == true)

        let garbage = try Paths.temporaryFile("-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWJ5dGVz\n-----END PRIVATE KEY-----\n")
        let p384 = try Paths.temporaryFile(p384PKCS8)
        let sec1 = try Paths.temporaryFile("-----BEGIN EC PRIVATE KEY-----\nc2VjcmV0LWJ5dGVz\n-----END EC PRIVATE KEY-----\n")
        defer { for path in [garbage, p384, sec1] { try? FileManager.default.removeItem(atPath: path) } }
        for path in [garbage, p384, sec1] {
            let error = thrown(["keyId": "DEMO000000", "teamId": "TEAM123ABC", "bundleId": "b", "keyPath": path])
            #expect(error?.code.rawValue == "config/invalid-private-key", "\(path)")
            #expect(error?.message.contains(path) == true)
            #expect(error?.description.contains("c2VjcmV0") == false, "key material leaked")
            #expect(error?.description.contains("MIG2") == false, "key material leaked")
        }
        let directory = thrown(["keyId": "DEMO000000", "teamId": "TEAM123ABC", "bundleId": "b", "keyPath": "/tmp"])
        #expect(directory?.code.rawValue == "config/key-not-found")
    }

    @Test func typedOptions() throws {
        func with(_ key: String, _ value: String) throws(NorqError) -> APNsConfiguration {
            var entries: [(key: ConfigNode, value: ConfigNode)] = []
            for (k, v) in [("keyId", "DEMO000000"), ("teamId", "TEAM123ABC"), ("bundleId", "b.c"),
                           ("keyPath", Paths.demoKey), (key, value)] as [(String, String)] {
                entries.append((ConfigNode(.scalar(k, quoted: false)), ConfigNode(.scalar(v, quoted: false))))
            }
            return try APNsConfiguration.parse(ConfigNode(.mapping(entries)), context: Paths.context)
        }
        func code(_ key: String, _ value: String) -> String? {
            do { _ = try with(key, value) } catch { return error.code.rawValue }
            return nil
        }
        #expect(code("production", "maybe") == "config/invalid-type")
        let endpoint = try with("endpoint", "https://127.0.0.1:8443")
        #expect(endpoint.sandboxEndpoint == APNsEndpoint(host: "127.0.0.1", port: 8443))
        #expect(endpoint.productionEndpoint == APNsEndpoint(host: "127.0.0.1", port: 8443))
        #expect(try with("sandboxEndpoint", "https://[::1]:9000").sandboxEndpoint == APNsEndpoint(host: "::1", port: 9000))
        #expect(try with("productionEndpoint", "https://gw.example").productionEndpoint == APNsEndpoint(host: "gw.example", port: 443))
        #expect(try with("managementEndpoint", "https://m.example:2197").managementSandboxEndpoint.port == 2197)
        #expect(code("endpoint", "http://127.0.0.1:8443") == "config/invalid-value")
        #expect(code("endpoint", "https://host:99999") == "config/invalid-value")
        #expect(code("endpoint", "https://:443") == "config/invalid-value")
        #expect(try with("proxy", "http://proxy.internal:3128").proxy == APNsEndpoint(host: "proxy.internal", port: 3128))
        #expect(code("proxy", "socks5://p:1") == "config/invalid-value")
        #expect(try with("connections", "4").connectionsPerEndpoint == 4)
        #expect(code("connections", "0") == "config/invalid-value")
        #expect(code("connections", "many") == "config/invalid-type")
        #expect(try with("timeout", "2500ms").requestTimeout == .milliseconds(2500))
        #expect(try with("tokenRefresh", "30m").tokenRefreshInterval == .seconds(1800))
        #expect(code("tokenRefresh", "10m") == "config/invalid-value")
        #expect(code("tokenRefresh", "56m") == "config/invalid-value")
        #expect(try with("pingInterval", "15s").pingInterval == .seconds(15))
        #expect(try with("maxConcurrentStreams", "100").maxConcurrentStreamsPerConnection == 100)
        #expect(code("bundleId", "com example") == "config/invalid-value")
    }

    @Test func caPath() throws {
        let ca = try Paths.temporaryFile(fakeCertificate)
        let notCA = try Paths.temporaryFile("hello")
        defer { try? FileManager.default.removeItem(atPath: ca); try? FileManager.default.removeItem(atPath: notCA) }
        let configuration = try parse(["keyId": "DEMO000000", "teamId": "TEAM123ABC", "bundleId": "b", "keyPath": Paths.demoKey,
                                       "caPath": ca])
        #expect(configuration.additionalTrustRootsPEM == fakeCertificate)
        #expect(configuration.caPath == ca)
        #expect(thrown(["keyId": "DEMO000000", "teamId": "TEAM123ABC", "bundleId": "b", "keyPath": Paths.demoKey,
                        "caPath": "/nonexistent/ca.pem"])?.code.rawValue == "config/file-not-found")
        #expect(thrown(["keyId": "DEMO000000", "teamId": "TEAM123ABC", "bundleId": "b", "keyPath": Paths.demoKey,
                        "caPath": notCA])?.code.rawValue == "config/invalid-certificate")
    }
}

@Suite struct APNsCertificateConfigurationTests {
    @Test func pemPair() throws {
        let configuration = try parse(["bundleId": "b", "certPem": fakeCertificate, "certKeyPem": fakeKey, "passphrase": "pw"])
        guard case .certificate(let credentials) = configuration.authentication else {
            Issue.record("expected certificate auth")
            return
        }
        #expect(credentials.passphrase == "pw")
        #expect(credentials.material == .pem(certificateChainPEM: fakeCertificate, privateKeyPEM: fakeKey))
        #expect(!configuration.summary.contains { $0.value.contains("pw") || $0.value.contains("BEGIN") })
    }

    @Test func combinedPemFileAndPaths() throws {
        let combined = try Paths.temporaryFile(fakeCertificate + fakeKey)
        defer { try? FileManager.default.removeItem(atPath: combined) }
        let configuration = try parse(["bundleId": "b", "certPath": combined])
        guard case .certificate(let credentials) = configuration.authentication else {
            Issue.record("expected certificate auth")
            return
        }
        #expect(credentials.source == combined)
    }

    @Test func pkcs12() throws {
        let pfx = try Paths.temporaryFile("\u{30}\u{82}binary")
        defer { try? FileManager.default.removeItem(atPath: pfx) }
        let configuration = try parse(["bundleId": "b", "pfxPath": pfx, "passphrase": "pw"])
        guard case .certificate(let credentials) = configuration.authentication,
              case .pkcs12(let bytes) = credentials.material else {
            Issue.record("expected PKCS#12 credentials")
            return
        }
        #expect(!bytes.isEmpty)
        #expect(thrown(["bundleId": "b", "pfxPath": "/nonexistent.p12"])?.code.rawValue == "config/file-not-found")
        #expect(thrown(["bundleId": "b", "pfxPath": pfx, "certPem": fakeCertificate])?.code.rawValue == "config/conflicting-keys")
    }

    @Test func certificateErrors() {
        #expect(thrown(["bundleId": "b", "certPem": "not a cert", "certKeyPem": fakeKey])?.code.rawValue == "config/invalid-certificate")
        #expect(thrown(["bundleId": "b", "certPem": fakeCertificate, "certKeyPem": "nope"])?.code.rawValue == "config/invalid-private-key")
        #expect(thrown(["bundleId": "b", "certPem": fakeCertificate])?.code.rawValue == "config/missing-key")
        #expect(thrown(["bundleId": "b", "certPath": "/nonexistent/cert.pem", "certKeyPem": fakeKey])?.code.rawValue == "config/file-not-found")
        #expect(thrown(["bundleId": "b", "certPem": fakeCertificate, "certKeyPath": "/nonexistent/k.pem"])?.code.rawValue == "config/key-not-found")
        #expect(thrown(["bundleId": "b", "certPem": fakeCertificate, "certPath": "/x", "certKeyPem": fakeKey])?.code.rawValue == "config/conflicting-keys")
    }
}

@Suite struct APNsEnvironmentFallbackTests {
    let type = APNsProviderType()
    let context = ProviderConfigurationContext(instanceName: "apns", baseDirectory: Paths.root)

    func load(_ environment: [String: String]) throws(NorqError) -> APNsConfiguration? {
        try type.configurationFromEnvironment(environment, context: context) as? APNsConfiguration
    }

    @Test func providerTypeDescription() {
        #expect(type.typeName == "apns")
        #expect(type.environmentPrefix == "NORQ_APNS_")
        #expect(type.platforms == [.ios])
    }

    @Test func noVariablesIsNil() throws {
        #expect(try load(["HOME": "/root", "NORQ_OTHER": "x"]) == nil)
    }

    @Test func fullEnvironment() throws {
        let configuration = try #require(try load([
            "NORQ_APNS_KEY_ID": "DEMO000000", "NORQ_APNS_TEAM_ID": "TEAM123ABC", "NORQ_APNS_BUNDLE_ID": "com.example.App",
            "NORQ_APNS_KEY_PATH": "examples/keys/AuthKey_DEMO000000.p8", "NORQ_APNS_PRODUCTION": "1",
            "NORQ_APNS_ENDPOINT": "https://127.0.0.1:9443",
        ]))
        #expect(configuration.origin == "env")
        #expect(configuration.production)
        #expect(configuration.bundleID == "com.example.App")
        #expect(configuration.sandboxEndpoint == APNsEndpoint(host: "127.0.0.1", port: 9443))
        let zero = try #require(try load([
            "NORQ_APNS_KEY_ID": "DEMO000000", "NORQ_APNS_TEAM_ID": "TEAM123ABC", "NORQ_APNS_BUNDLE_ID": "b",
            "NORQ_APNS_KEY_PATH": Paths.demoKey, "NORQ_APNS_PRODUCTION": "0",
        ]))
        #expect(!zero.production)
    }

    @Test func keyPemWithEscapedNewlines() throws {
        let pem = try String(contentsOfFile: Paths.demoKey, encoding: .utf8).replacingOccurrences(of: "\n", with: "\\n")
        let configuration = try #require(try load([
            "NORQ_APNS_KEY_ID": "DEMO000000", "NORQ_APNS_TEAM_ID": "TEAM123ABC", "NORQ_APNS_BUNDLE_ID": "b",
            "NORQ_APNS_KEY_PEM": pem,
        ]))
        #expect(configuration.authentication.isToken)
    }

    @Test func environmentErrors() {
        func code(_ environment: [String: String]) -> (String, String?)? {
            do { _ = try load(environment) } catch { return (error.code.rawValue, error.location?.file) }
            return nil
        }
        let good = ["NORQ_APNS_KEY_ID": "DEMO000000", "NORQ_APNS_TEAM_ID": "TEAM123ABC", "NORQ_APNS_BUNDLE_ID": "b",
                    "NORQ_APNS_KEY_PATH": Paths.demoKey]
        #expect(code(good) == nil)
        #expect(code(good.merging(["NORQ_APNS_KEY_ID": "short"]) { $1 })! == ("config/invalid-key-id", "env NORQ_APNS_KEY_ID"))
        #expect(code(good.filter { $0.key != "NORQ_APNS_TEAM_ID" })! == ("config/missing-key", "env NORQ_APNS_TEAM_ID"))
        #expect(code(good.merging(["NORQ_APNS_KEY_PEM": "x"]) { $1 })?.0 == "config/conflicting-keys")
        #expect(code(good.filter { $0.key != "NORQ_APNS_KEY_PATH" })?.0 == "config/missing-key")
        #expect(code(good.merging(["NORQ_APNS_PRODUCTION": "maybe"]) { $1 })?.0 == "config/invalid-type")
        #expect(code(good.merging(["NORQ_APNS_KEY_PATH": "/nonexistent.p8"]) { $1 })?.0 == "config/key-not-found")
        #expect(code(good.merging(["NORQ_APNS_KEYID": "DEMO000000"]) { $1 })?.0 == "config/unknown-key")
    }
}
