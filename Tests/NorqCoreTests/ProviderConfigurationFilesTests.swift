import Foundation
import NorqCore
import Testing

/// The pieces every provider type's `config:` parser shares (files relative to the config file, `caPath` /
/// `caPem`, ranges, unknown env variables): one rule, one error code, whichever provider uses it.
@Suite struct ProviderConfigurationFilesTests {
    static let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

    /// A directory of its own with `ca.pem` (a PEM block) and `notes.txt` (none).
    static func directory() throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("norq-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        try Data(pem.utf8).write(to: url.appendingPathComponent("ca.pem"))
        try Data("no certificate here".utf8).write(to: url.appendingPathComponent("notes.txt"))
        return url.path
    }

    static func node(_ text: String, line: Int) -> ConfigNode {
        ConfigNode(.scalar(text, quoted: true), at: SourceLocation(file: "norq.yaml", line: line, column: 7))
    }

    static func code(_ body: () throws -> Void) -> NorqError.Code? {
        do { try body(); return nil } catch { return (error as? NorqError)?.code ?? "not a NorqError" }
    }

    @Test func relativePathsResolveAgainstTheConfigFilesDirectory() {
        let context = ProviderConfigurationContext(instanceName: "p", baseDirectory: "/etc/norq", file: "norq.yaml")
        #expect(context.resolve("ca.pem") == "/etc/norq/ca.pem")
        #expect(context.resolve("/abs/ca.pem") == "/abs/ca.pem")
        #expect(ProviderConfigurationContext(instanceName: "p", baseDirectory: "/etc/norq/").resolve("a") == "/etc/norq/a")
        #expect(ProviderConfigurationContext(instanceName: "p", baseDirectory: ".").resolve("a") == "a")
    }

    @Test func trustRootsFromAFileOrInline() throws {
        let context = ProviderConfigurationContext(instanceName: "p", baseDirectory: try Self.directory())
        #expect(try context.trustRoots([:], path: "c") == nil)
        let fromFile = try #require(try context.trustRoots(["caPath": Self.node("ca.pem", line: 4)], path: "c"))
        #expect(fromFile.label == "ca.pem" && fromFile.pem == Self.pem)
        let inline = try #require(try context.trustRoots(["caPem": Self.node(Self.pem, line: 4)], path: "c"))
        #expect(inline.label == "caPem (inline)" && inline.pem == Self.pem)
    }

    @Test func trustRootErrorsAreTheSameForEveryProvider() throws {
        let context = ProviderConfigurationContext(instanceName: "p", baseDirectory: try Self.directory())
        #expect(Self.code { _ = try context.trustRoots(["caPath": Self.node("missing.pem", line: 4)], path: "c") }
                == .configFileNotFound)
        #expect(Self.code { _ = try context.trustRoots(["caPath": Self.node("notes.txt", line: 4)], path: "c") }
                == .configInvalidCertificate)
        #expect(Self.code { _ = try context.trustRoots(["caPem": Self.node("hello", line: 4)], path: "c") }
                == .configInvalidCertificate)
        do {
            _ = try context.trustRoots(["caPath": Self.node("ca.pem", line: 4), "caPem": Self.node(Self.pem, line: 5)],
                                       path: "c")
            Issue.record("caPath with caPem was accepted")
        } catch {
            #expect(error.code == .configConflictingKeys)
            #expect(error.location?.line == 5)
            #expect(error.message.contains("line 4"))
        }
    }

    @Test func readingAFileNamesItButNeverPrintsItsContent() throws {
        let directory = try Self.directory()
        let context = ProviderConfigurationContext(instanceName: "p", baseDirectory: directory)
        #expect(try context.readText("notes.txt", node: Self.node("notes.txt", line: 4), what: "CA file") == "no certificate here")
        do {
            _ = try context.readBytes(".", node: Self.node(".", line: 4), missing: "config/key-not-found", what: "key file")
            Issue.record("a directory was read")
        } catch {
            #expect(error.code == "config/key-not-found")
            #expect(error.message == "key file \(directory)/. cannot be read")
        }
    }

    @Test func rangesNameTheBoundsInTheConfigFilesNotation() throws {
        #expect(try Self.node("4", line: 4).int(path: "c.connections", in: 1...64) == 4)
        #expect(Self.code { _ = try Self.node("65", line: 4).int(path: "c.connections", in: 1...64) } == .configInvalidValue)
        #expect(try Self.node("2s", line: 4).duration(path: "c.timeout", in: .milliseconds(1)...(.seconds(3600))) == .seconds(2))
        do {
            _ = try Self.node("2h", line: 4).duration(path: "c.timeout", in: .milliseconds(1)...(.seconds(3600)))
            Issue.record("2h was accepted")
        } catch {
            #expect(error.code == .configInvalidValue)
            #expect(error.message == "c.timeout must be between 1ms and 1h, found \"2h\"")
        }
        do {
            _ = try Self.node("5m", line: 4).duration(path: "c.vapidLifetime", in: .seconds(600)...(.seconds(90_000)))
            Issue.record("5m was accepted")
        } catch {
            #expect(error.message == "c.vapidLifetime must be between 10m and 25h, found \"5m\"")
        }
    }

    @Test func anUnknownVariableOfTheFallbackIsRefusedWithTheClosestName() {
        do {
            try ProviderConfigurationContext.rejectUnknownVariables(
                in: ["NORQ_X_KEY_PAT": "a", "OTHER": "b"], prefix: "NORQ_X_", known: ["NORQ_X_KEY_PATH", "NORQ_X_TEAM_ID"])
            Issue.record("accepted")
        } catch {
            #expect(error.code == .configUnknownKey)
            #expect(error.hint == "did you mean NORQ_X_KEY_PATH?")
        }
        #expect(Self.code {
            try ProviderConfigurationContext.rejectUnknownVariables(in: ["NORQ_X_TEAM_ID": "a"], prefix: "NORQ_X_",
                                                                    known: ["NORQ_X_TEAM_ID"])
        } == nil)
    }
}
