import Foundation
import NorqConfig
import NorqCore
import Testing

enum Fixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures").path
    static func path(_ name: String) -> String { directory + "/" + name }
}

func loader(_ environment: [String: String] = [:]) -> ConfigurationLoader {
    ConfigurationLoader(registry: .testTypes, environment: environment, workingDirectory: "/tmp")
}

/// The error `body` throws, or nil.
func error(_ body: () throws -> Void) -> NorqError? {
    do {
        try body()
    } catch let error as NorqError {
        return error
    } catch {
        Issue.record("not a NorqError: \(error)")
    }
    return nil
}

@Suite struct ErrorFixtureTests {
    /// fixture file -> (code, line, column)
    static let cases: [(String, String, Int, Int)] = [
        ("unknown-key.yaml", "config/unknown-key", 1, 1),
        ("missing-key.yaml", "config/missing-key", 4, 7),
        ("invalid-type.yaml", "config/invalid-type", 1, 12),
        ("invalid-value.yaml", "config/invalid-value", 5, 16),
        ("invalid-yaml.yaml", "config/invalid-yaml", 3, 1),
        ("unset-variable.yaml", "config/unset-variable", 4, 23),
        ("invalid-interpolation.yaml", "config/invalid-interpolation", 1, 16),
        ("unknown-provider.yaml", "config/unknown-provider", 5, 9),
        ("unknown-provider-type.yaml", "config/unknown-provider-type", 3, 11),
        ("routing-platform-mismatch.yaml", "config/routing-platform-mismatch", 5, 17),
        ("conflicting-keys.yaml", "config/conflicting-keys", 7, 10),
    ]

    @Test(arguments: cases)
    func fixtureTriggersCode(file: String, code: String, line: Int, column: Int) throws {
        let path = Fixtures.path(file)
        let thrown = try #require(error { _ = try loader().load(path: path) }, "\(file) loaded without error")
        #expect(thrown.code.rawValue == code, "\(thrown)")
        #expect(thrown.location?.file == path)
        #expect(thrown.location?.line == line, "\(thrown)")
        #expect(thrown.location?.column == column, "\(thrown)")
        #expect(thrown.description.hasPrefix("\(path):\(line):\(column): error[\(code)]: "))
    }

    @Test func unknownKeySuggestsTheClosestKey() throws {
        let thrown = try #require(error { _ = try loader().load(path: Fixtures.path("unknown-key.yaml")) })
        #expect(thrown.hint == "did you mean \"providers\"?")
        let nested = try #require(error {
            _ = try loader().load(yaml: "providers:\n  fake:\n    confg: {}\n", file: "n.yaml", baseDirectory: "/x")
        })
        #expect(nested.code == .configUnknownKey)
        #expect(nested.hint == "did you mean \"config\"?")
        #expect(nested.location == SourceLocation(file: "n.yaml", line: 3, column: 5))
    }

    @Test func unsetVariableIsNamedWithItsLine() throws {
        let thrown = try #require(error { _ = try loader().load(path: Fixtures.path("unset-variable.yaml")) })
        #expect(thrown.message.contains("NORQ_TEST_SURELY_UNSET"))
        #expect(thrown.message.contains("line 4"))
    }

    @Test func suggestionsForProvidersAndTypes() throws {
        let provider = try #require(error { _ = try loader().load(path: Fixtures.path("unknown-provider.yaml")) })
        #expect(provider.hint == "did you mean \"fake\"?")
        let type = try #require(error { _ = try loader().load(path: Fixtures.path("unknown-provider-type.yaml")) })
        #expect(type.hint == "did you mean \"fake\"?")
    }

    @Test func notFound() throws {
        let missing = try #require(error { _ = try loader().load(path: "/nonexistent/norq.yaml") })
        #expect(missing.code == .configNotFound)
        #expect(missing.message.contains("/nonexistent/norq.yaml"))
        let directory = try #require(error { _ = try loader().load(path: Fixtures.directory) })
        #expect(directory.code == .configNotFound)
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("norq-empty-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: empty) }
        // Walking up from a temp dir finds nothing (unless someone left a norq.yaml in / or /tmp).
        if ConfigurationLoader.find(from: empty.path) == nil {
            let none = try #require(error { _ = try loader().discover(from: empty.path) })
            #expect(none.code == .configNotFound)
        }
    }

    @Test func invalidUTF8IsInvalidYAML() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("norq-bad-\(UUID().uuidString).yaml")
        try Data([0x74, 0x3A, 0x20, 0xFF, 0xFE, 0x0A]).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let thrown = try #require(error { _ = try loader().load(path: file.path) })
        #expect(thrown.code == .configInvalidYAML)
    }
}

@Suite struct LoadingTests {
    @Test func validFileWithDefaultsAndEscape() throws {
        let configuration = try loader().load(path: Fixtures.path("valid.yaml"))
        #expect(configuration.file == Fixtures.path("valid.yaml"))
        #expect(configuration.templatesDirectory == Fixtures.directory + "/./templates")
        #expect(configuration.providers.map(\.name) == ["fake", "droid"])
        #expect(configuration.providers.map(\.typeName) == ["fake", "fake-android"])
        let fake = try #require(configuration.providers.first?.configuration as? FakeConfiguration)
        #expect(fake == FakeConfiguration(apiKey: "default-key", region: "${literal}"))
        let retry = configuration.providers[0].retry
        #expect(retry.retries == 3)
        #expect(retry.backoff == .milliseconds(250))
        #expect(retry.maxBackoff == .seconds(4))
        #expect(retry.retryOn == Set([429]).union(500...599))
        #expect(configuration.providers[0].maxInFlight == 16)
        #expect(configuration.providers[1].retry == .default)
        #expect(configuration.providers[0].origin == .file(SourceLocation(file: Fixtures.path("valid.yaml"), line: 4, column: 3)))
    }

    @Test func interpolationUsesTheEnvironment() throws {
        let configuration = try loader(["NORQ_TEST_KEY": "from-env"]).load(path: Fixtures.path("valid.yaml"))
        #expect((configuration.providers[0].configuration as? FakeConfiguration)?.apiKey == "from-env")
    }

    @Test func bothRoutingFormsAreEquivalent() throws {
        let flat = try loader().load(path: Fixtures.path("valid.yaml"))
        let nested = try loader().load(path: Fixtures.path("nested-routing.yaml"))
        let expected = RoutingTable(defaultProvider: "fake", byPlatform: [.ios: "fake", .android: "droid"])
        #expect(flat.routing == expected)
        #expect(nested.routing == expected)
        #expect(flat.routing.provider(for: .web) == "fake")
        #expect(flat.routing.provider(for: .android) == "droid")
        #expect(nested.providers.map(\.name) == flat.providers.map(\.name))
        #expect(nested.providers[0].retry == flat.providers[0].retry)
    }

    @Test func emptyDocumentIsAnEmptyConfiguration() throws {
        for text in ["", "# only a comment\n", "---\n", "~\n"] {
            let configuration = try loader().load(yaml: text, file: nil, baseDirectory: ".")
            #expect(configuration.providers.isEmpty)
            #expect(configuration.routing.isEmpty)
        }
    }

    @Test func retryValidation() throws {
        func code(_ retry: String) -> String? {
            error {
                _ = try loader().load(yaml: "providers:\n  fake:\n    config: {apiKey: k}\n    retry: \(retry)\n",
                                      file: nil, baseDirectory: ".")
            }?.code.rawValue
        }
        #expect(code("{on: [600]}") == "config/invalid-value")
        #expect(code("{on: {a: 1}}") == "config/invalid-type")
        #expect(code("{retries: many}") == "config/invalid-type")
        #expect(code("{retries: 99}") == "config/invalid-value")
        #expect(code("{backoff: 2s, max_backoff: 1s}") == "config/invalid-value")
        #expect(code("{tries: 2}") == "config/unknown-key")
        #expect(code("{on: [], retries: 0}") == nil)
    }

    @Test func instanceNamesAndMaxInFlight() {
        #expect(error { _ = try loader().load(yaml: "providers:\n  \"a b\": {type: fake}\n", file: nil, baseDirectory: ".") }?
            .code == .configInvalidValue)
        #expect(error {
            _ = try loader().load(yaml: "providers:\n  fake: {config: {apiKey: k}, maxInFlight: 0}\n", file: nil, baseDirectory: ".")
        }?.code == .configInvalidValue)
    }

    @Test func discoveryWalksUpAndExplicitPathWins() throws {
        let start = Fixtures.path("discovery/a/b/c")
        #expect(ConfigurationLoader.find(from: start) == URL(fileURLWithPath: Fixtures.path("discovery/norq.config.yaml")).standardizedFileURL.path)
        let discovered = try loader().discover(from: start)
        #expect((discovered.providers.first?.configuration as? FakeConfiguration)?.apiKey == "found")
        let explicit = try loader().load(path: Fixtures.path("valid.yaml"))
        #expect((explicit.providers.first?.configuration as? FakeConfiguration)?.apiKey == "default-key")
    }
}

@Suite struct EnvironmentFallbackTests {
    @Test func registersFromEnvironmentWhenNotDeclared() throws {
        let configuration = try loader(["NORQ_FAKE_API_KEY": "env-key", "NORQ_FAKE_REGION": "us"])
            .load(yaml: "routing:\n  push: fake\n", file: "env.yaml", baseDirectory: ".")
        #expect(configuration.providers.map(\.name) == ["fake"])
        #expect(configuration.providers[0].origin == .environment(prefix: "NORQ_FAKE_"))
        #expect(configuration.providers[0].origin.description == "env NORQ_FAKE_*")
        #expect(configuration.providers[0].configuration as? FakeConfiguration == FakeConfiguration(apiKey: "env-key", region: "us"))
        #expect(configuration.routing.defaultProvider == "fake")
    }

    @Test func declaredProviderWinsOverEnvironment() throws {
        let configuration = try loader(["NORQ_FAKE_API_KEY": "env-key"]).load(path: Fixtures.path("valid.yaml"))
        #expect(configuration.providers.map(\.name) == ["fake", "droid"])
        #expect((configuration.providers[0].configuration as? FakeConfiguration)?.apiKey == "default-key")
        if case .environment = configuration.providers[0].origin { Issue.record("declared provider lost to env") }
    }

    @Test func environmentOnlyDiscovery() throws {
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("norq-envonly-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: empty) }
        guard ConfigurationLoader.find(from: empty.path) == nil else { return }
        let configuration = try loader(["NORQ_FAKE_ANDROID_API_KEY": "k"]).discover(from: empty.path)
        #expect(configuration.file == nil)
        #expect(configuration.providers.map(\.name) == ["fake-android"])
    }

    @Test func routingMayNameEnvironmentProviders() throws {
        let thrown = error {
            _ = try loader().load(yaml: "routing:\n  push.android: fake-android\n", file: nil, baseDirectory: ".")
        }
        #expect(thrown?.code == .configUnknownProvider)
        let configuration = try loader(["NORQ_FAKE_ANDROID_API_KEY": "k"])
            .load(yaml: "routing:\n  push.android: fake-android\n", file: nil, baseDirectory: ".")
        #expect(configuration.routing.byPlatform == [.android: "fake-android"])
    }
}

@Suite struct InterpolationTests {
    let env = ["A": "alpha", "EMPTY": "", "PEM": "-----BEGIN X-----\nline: 2\n-----END X-----"]

    @Test func substitutions() throws {
        #expect(try Interpolation.apply("x${A}y", environment: env) == "xalphay")
        #expect(try Interpolation.apply("${MISSING:-fallback}", environment: env) == "fallback")
        #expect(try Interpolation.apply("${EMPTY:-fallback}", environment: env) == "fallback")
        #expect(try Interpolation.apply("${EMPTY}", environment: env) == "")
        #expect(try Interpolation.apply("${MISSING:-}", environment: env) == "")
        #expect(try Interpolation.apply("$${A}", environment: env) == "${A}")
        #expect(try Interpolation.apply("$$${A}", environment: env) == "$${A}")  // leftmost: "$" then the escape
        #expect(try Interpolation.apply("cost $5 and $A", environment: env) == "cost $5 and $A")
        #expect(try Interpolation.apply("${A}${A}", environment: env) == "alphaalpha")
    }

    @Test func errors() {
        func thrown(_ text: String) -> NorqError? { error { _ = try Interpolation.apply(text, environment: env,
                                                                                        location: SourceLocation(file: "f", line: 3, column: 5)) } }
        #expect(thrown("${NOPE}")?.code == .configUnsetVariable)
        #expect(thrown("ab${NOPE}")?.location == SourceLocation(file: "f", line: 3, column: 7))
        #expect(thrown("${A")?.code == .configInvalidInterpolation)
        #expect(thrown("${}")?.code == .configInvalidInterpolation)
        #expect(thrown("${A-B}")?.code == .configInvalidInterpolation)
    }

    @Test func substitutedValuesCannotChangeTheYAMLStructure() throws {
        let configuration = try loader(["PEM": env["PEM"]!, "INJECT": "k\nrouting: {push: evil}"])
            .load(yaml: "providers:\n  fake:\n    config:\n      apiKey: ${INJECT}\n      region: ${PEM}\n",
                  file: nil, baseDirectory: ".")
        let fake = try #require(configuration.providers.first?.configuration as? FakeConfiguration)
        #expect(fake.apiKey == "k\nrouting: {push: evil}")
        #expect(fake.region == env["PEM"])
        #expect(configuration.routing.isEmpty)
    }

    @Test func variablesInValuesOnlyNotKeys() throws {
        let thrown = error { _ = try loader(["K": "providers"]).load(yaml: "${K}: {}\n", file: nil, baseDirectory: ".") }
        #expect(thrown?.code == .configUnknownKey)
    }
}
