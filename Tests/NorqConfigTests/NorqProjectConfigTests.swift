import Foundation
import NorqConfig
import NorqCore
import Testing

/// A Norq project's `norq.config.yaml` loads unchanged (issue 17).
@Suite struct NorqProjectConfigTests {
    func load(_ yaml: String) throws -> NorqConfiguration {
        try loader().load(yaml: yaml, file: "norq.config.yaml", baseDirectory: "/project")
    }

    func failure(_ yaml: String) -> NorqError? {
        error { _ = try load(yaml) }
    }

    @Test func notificationsIsTheNorqNameOfTemplates() throws {
        let norq = try load("notifications: ./notifications\n")
        #expect(norq.templatesDirectory == "/project/./notifications")
        #expect(norq.templatesKey == .notifications)
        let ours = try load("templates: ./templates\n")
        #expect(ours.templatesKey == .templates)
        #expect(try load("providers: {}\n").templatesKey == nil)
    }

    @Test func bothKeysAtOnceIsAnError() throws {
        let both = try #require(failure("templates: ./t\nnotifications: ./n\n"))
        #expect(both.code == .configConflictingKeys)
        #expect(both.location?.file == "norq.config.yaml" && both.location?.line == 2)
        #expect(both.message.contains("line 1"))
    }

    @Test func otherChannelsProvidersAndRoutesLoadAsNotServed() throws {
        let configuration = try load("""
            notifications: ./notifications
            brand: ./brand.yaml
            providers:
              fake:
                config: {apiKey: k}
              resend:
                config: {apiKey: re_123, fromAddress: a@example.com}
              twilio:
                config: {accountSid: AC1}
              my-mailer:
                channels: [email]
                config: {domain: {required: true}}
                send: {email: {method: POST, url: "https://api.example.com"}}
            routing:
              push: fake
              email: resend
              sms: twilio

            """)
        #expect(configuration.providers.map(\.name) == ["fake"])
        #expect(configuration.unservedProviders.map(\.name) == ["resend", "twilio", "my-mailer"])
        #expect(configuration.unservedProviders.map(\.typeName) == ["resend", "twilio", "custom"])
        #expect(configuration.unservedProviders[0].channels == ["email"])
        #expect(configuration.unservedProviders[0].location.line == 6)
        #expect(configuration.routing.otherChannels == ["email": "resend", "sms": "twilio"])
        #expect(configuration.routing.defaultProvider == "fake")
        #expect(configuration.ignoredKeys == ["brand"])
    }

    @Test func pushRoutedToAProviderThisRouterDoesNotServe() throws {
        let thrown = try #require(failure("providers:\n  resend:\n    config: {}\nrouting:\n  push.ios: resend\n"))
        #expect(thrown.code == .configProviderNotServed)
        #expect(thrown.location?.line == 5)
        let expo = try #require(failure("providers:\n  expo:\n    config: {}\nrouting:\n  push: expo\n"))
        #expect(expo.code == .configProviderNotServed)
    }

    @Test func otherChannelRouteToAnUndeclaredProvider() throws {
        let thrown = try #require(failure("providers:\n  resend:\n    config: {}\nrouting:\n  email: resnd\n"))
        #expect(thrown.code == .configUnknownProvider)
        #expect(thrown.hint == "did you mean \"resend\"?")
    }

    @Test func customProviderForPushIsRefused() throws {
        let thrown = try #require(failure("providers:\n  mine:\n    channels: [push]\n"))
        #expect(thrown.code == .configInvalidValue)
        #expect(thrown.location?.line == 3)
    }

    @Test func unknownTypesStillFail() throws {
        // Not a Norq provider name: still an unknown provider type, with its did-you-mean.
        let thrown = try #require(failure("providers:\n  mine:\n    type: fakee\n"))
        #expect(thrown.code == .configUnknownProviderType)
    }

    // MARK: discovery

    static func tree(_ paths: [String]) throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("norq-discovery-\(UUID().uuidString)")
        for path in paths {
            let url = root.appendingPathComponent(path)
            if path.hasSuffix("/") {
                try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            } else {
                try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                try Data("providers:\n  fake:\n    config: {apiKey: \(path.replacingOccurrences(of: "/", with: "_"))}\n".utf8)
                    .write(to: url)
            }
        }
        return root
    }

    @Test func scansDownShallowestFirstSkippingIgnoredFolders() throws {
        let root = try Self.tree([
            "node_modules/pkg/norq.config.yaml", "_drafts/norq.config.yaml", ".hidden/norq.config.yaml",
            "build/norq.config.yaml", "a/b/c/norq.config.yaml", "z/norq.config.yaml", "vendor/x/norq.yaml",
        ])
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(ConfigurationLoader.findDownward(from: root.path) == root.appendingPathComponent("z/norq.config.yaml").path)
        let discovered = try loader().discover(from: root.path)
        #expect((discovered.providers.first?.configuration as? FakeConfiguration)?.apiKey == "z_norq.config.yaml")
    }

    @Test func scanStopsAtFiveLevels() throws {
        let root = try Self.tree(["1/2/3/4/5/norq.config.yaml", "a/b/c/d/e/f/norq.config.yaml"])
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(ConfigurationLoader.findDownward(from: root.path) == root.appendingPathComponent("1/2/3/4/5/norq.config.yaml").path)
        let deeper = root.appendingPathComponent("1")
        #expect(ConfigurationLoader.findDownward(from: deeper.path) != nil)
        try FileManager.default.removeItem(at: root.appendingPathComponent("1"))
        #expect(ConfigurationLoader.findDownward(from: root.path) == nil, "six levels down is not scanned")
    }

    @Test func walkingUpWinsOverScanningDown() throws {
        let root = try Self.tree(["norq.yaml", "sub/deeper/norq.config.yaml"])
        defer { try? FileManager.default.removeItem(at: root) }
        let start = root.appendingPathComponent("sub").path
        #expect(ConfigurationLoader.find(from: start) == root.appendingPathComponent("norq.yaml").standardizedFileURL.path)
    }

    @Test func configOptionTakesTheFolder() throws {
        let root = try Self.tree(["project/norq.config.yaml", "empty/"])
        defer { try? FileManager.default.removeItem(at: root) }
        let loaded = try loader().load(path: root.appendingPathComponent("project").path)
        #expect(loaded.file == root.appendingPathComponent("project/norq.config.yaml").path)
        let empty = try #require(error { _ = try loader().load(path: root.appendingPathComponent("empty").path) })
        #expect(empty.code == .configNotFound)
        #expect(empty.hint == "--config takes the config file or the folder that holds it")
    }

    /// Both file names in one folder is an error naming both (issue 32), found by discovery or given as a folder;
    /// an explicit file still loads.
    @Test func bothConfigFilesInOneFolderIsAnErrorNamingBoth() throws {
        let root = try Self.tree(["project/norq.yaml", "project/norq.config.yaml", "project/sub/"])
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = root.appendingPathComponent("project")
        for thrown in [error { _ = try loader().load(path: folder.path) },
                       error { _ = try loader().discover(from: folder.appendingPathComponent("sub").path) }] {
            let found = try #require(thrown)
            #expect(found.code == .configBothFiles)
            #expect(found.message.contains("norq.yaml and ") && found.message.contains("norq.config.yaml exist"), "\(found)")
        }
        let explicit = try loader().load(path: folder.appendingPathComponent("norq.config.yaml").path)
        #expect(explicit.file?.hasSuffix("norq.config.yaml") == true)
    }
}
