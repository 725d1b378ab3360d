import ArgumentParser
import Foundation
import NorqConfig
import NorqCore
import NorqTemplates

/// Writes scaffold files, refusing to overwrite any (all are checked before the first is written).
enum Scaffold {
    static func write(_ files: [(path: String, text: String)]) throws(NorqError) {
        for file in files where FileManager.default.fileExists(atPath: file.path) {
            throw NorqError(.cliAlreadyExists, "\(file.path) exists; nothing was written",
                            at: SourceLocation(file: file.path))
        }
        for file in files {
            let folder = (file.path as NSString).deletingLastPathComponent
            do {
                if !folder.isEmpty {
                    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                }
                try Data(file.text.utf8).write(to: URL(fileURLWithPath: file.path))
            } catch {
                throw NorqError(.cliWriteFailed, "cannot write \(file.path): \(error.localizedDescription)",
                                at: SourceLocation(file: file.path))
            }
        }
    }
}

/// `norq new <id>`: scaffolds a push notification (push.md, data.samples.yaml, tests.yaml), as Norq's
/// `norq new` scaffolds its channels.
struct NewCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "new",
        abstract: "Scaffold a push notification: push.md, data.samples.yaml and tests.yaml.",
        discussion: """
            The id is Norq's in a `notifications:` project (type/category/subcategory/name, up to 4 segments, \
            the first system, transactional or promotional, each [a-z0-9]+(-[a-z0-9]+)*), a folder name in a \
            `templates:` project. Existing files are never overwritten. `norq test` passes on the result.

            Examples:
              norq new transactional/orders/order-shipped
              norq new welcome --templates ./templates

            \(ExitCodes.help)
            """
    )

    @Argument(help: "The notification id.")
    var id: String

    @Option(name: .long, help: ArgumentHelp("Channels to scaffold, comma-separated: push (served here), email, sms, slack (files for a Norq project, not served by this router). Default: push.", valueName: "LIST"))
    var channels: String = "push"

    @OptionGroup var configOptions: ConfigOptions

    func run() async throws {
        do {
            let configuration = try configOptions.loadConfigurationIfPresent()
            let style = ConfigOptions.idStyle(configuration)
            if let error = TemplateLibrary.checkID(id, style: style) { throw error }
            let folder = configOptions.templatesDirectory(configuration) + "/" + id
            let name = id.split(separator: "/").last.map(String.init) ?? id
            let title = name.split(separator: "-").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined(separator: " ")
            let wanted = channels.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            for channel in wanted where !Self.knownChannels.contains(channel) {
                throw NorqError("cli/invalid-option", "--channels: unknown channel \"\(channel.prefix(40))\"",
                                hint: "one or more of " + Self.knownChannels.joined(separator: ", "))
            }
            let files = Self.files(folder: folder, title: title, channels: Set(wanted))
            try Scaffold.write(files)
            for file in files { Console.out("created \(file.path)\n") }
        } catch let error as NorqError {
            throw Console.fail(error)
        }
    }

    /// The channels `--channels` knows: push, and Norq's other channels' files.
    static let knownChannels = ["push", "email", "sms", "slack"]

    /// The files of `channels` (push.md with its tests.yaml; email.md, sms.md, slack.md in Norq's format) and the
    /// shared data.samples.yaml.
    static func files(folder: String, title: String, channels: Set<String>) -> [(path: String, text: String)] {
        var files = pushFiles(folder: folder, title: title)
        if !channels.contains("push") {
            files.removeAll { $0.path.hasSuffix("/push.md") || $0.path.hasSuffix("/tests.yaml") }
        }
        if channels.contains("email") {
            files.append((folder + "/email.md", """
                ---
                subject: "\(title)"
                preheader: "\(title) for {{user.first_name | default "you"}}"
                ---
                # \(title)

                Hi {{user.first_name | default "there"}}, this is \(title).

                """))
        }
        if channels.contains("sms") {
            files.append((folder + "/sms.md", "Hi {{user.first_name | default \"there\"}}, this is \(title).\n"))
        }
        if channels.contains("slack") {
            files.append((folder + "/slack.md", "*\(title)*\nHi {{user.first_name | default \"there\"}}, this is \(title).\n"))
        }
        return files
    }

    static func pushFiles(folder: String, title: String) -> [(path: String, text: String)] {
        [
            (folder + "/push.md", """
                ---
                title: "\(title)"
                ios:
                  sound: default
                headers:
                  apns-push-type: alert
                  apns-expiration: "1d"       # a duration is relative to the send; a number is a UNIX epoch
                ---
                Hi {{user.first_name | default "there"}}, this is \(title).

                """),
            (folder + "/data.samples.yaml", """
                Default:
                  user:
                    first_name: Ada

                """),
            (folder + "/tests.yaml", """
                tests:
                  - name: title
                    channel: push
                    assert:
                      subject: { eq: "\(title)" }
                  - name: greets the user
                    channel: push
                    assert:
                      body: { contains: "Hi Ada" }
                      payload_bytes: { lt: 4096 }

                """),
        ]
    }
}

/// `norq init`: a minimal Norq project (norq.config.yaml and an empty notifications folder), as Norq's.
struct InitCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create a minimal project: norq.config.yaml and notifications/.",
        discussion: """
            Writes norq.config.yaml (notifications: ./notifications, a console provider and push routed to \
            it, an APNs block to fill in, commented) and notifications/_shared/. Refuses to overwrite a config.

            Examples:
              norq init
              norq init --directory my-project && cd my-project && norq new transactional/welcome

            \(ExitCodes.help)
            """
    )

    @Option(name: .long, help: "Where to create the project (default: the current directory).")
    var directory: String = "."

    @Flag(name: .long, help: "Add Norq's three example notifications (system/security-alert, transactional/order-confirmation, promotional/weekly-digest), each with push, email, sms and slack templates, a data schema, samples and tests.")
    var example = false

    func run() async throws {
        do {
            for name in ConfigurationLoader.fileNames {
                let path = (directory as NSString).appendingPathComponent(name)
                if FileManager.default.fileExists(atPath: path) {
                    throw NorqError(.cliAlreadyExists, "\(path) exists; nothing was written", at: SourceLocation(file: path))
                }
            }
            var files: [(path: String, text: String)] = [
                ((directory as NSString).appendingPathComponent("norq.config.yaml"), Self.config),
                ((directory as NSString).appendingPathComponent("notifications/_shared/.keep"), ""),
            ]
            if example {
                files += ExampleProject.files.map { ((directory as NSString).appendingPathComponent("notifications/" + $0.path), $0.text) }
            }
            try Scaffold.write(files)
            Console.out("created \(files[0].path)\ncreated \((directory as NSString).appendingPathComponent("notifications/"))\n")
            for file in files.dropFirst(2) { Console.out("created \(file.path)\n") }
        } catch let error as NorqError {
            throw Console.fail(error)
        }
    }

    static let config = """
        # Norq project (norq.sh layout). Docs: norq.yaml.example and providers/apns.md.
        notifications: ./notifications

        providers:
          console:                 # prints each prepared request instead of sending it
            config: {}
          # apns:
          #   config:
          #     keyId: ${APNS_KEY_ID}
          #     teamId: ${APNS_TEAM_ID}
          #     keyPath: ./secrets/AuthKey.p8
          #     bundleId: com.example.MyApp

        routing:
          push: console

        """
}

/// `norq provider list`: each provider, where it came from (config or env), and whether this router serves it.
struct ProviderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "provider",
        abstract: "Show the configured providers.",
        subcommands: [List.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List each provider, how it was configured (config or env) and its platforms.",
            discussion: """
                As Norq's `norq provider list`: `configured (config)` for a block of the config file, \
                `configured (env)` for one registered from NORQ_<TYPE>_* variables. Providers of channels this \
                router does not send (resend, twilio, ...) are listed as not served.

                Examples:
                  norq provider list
                  norq provider list -c examples/norq-project --json

                \(ExitCodes.help)
                """
        )

        @OptionGroup var configOptions: ConfigOptions

        @Flag(name: .long, help: "Print one JSON document on stdout.")
        var json = false

        func run() async throws {
            let configuration: NorqConfiguration
            do {
                configuration = try configOptions.loadConfiguration()
            } catch {
                throw Console.fail(error)
            }
            var rows: [JSONValue] = []
            var text = ""
            for provider in configuration.providers {
                let origin: String
                switch provider.origin {
                case .file: origin = "config"
                case .environment: origin = "env"
                }
                let platforms = ConfigOptions.registry.type(named: provider.typeName)?.platforms
                    .map(\.rawValue).sorted() ?? []
                rows.append(["name": .string(provider.name), "type": .string(provider.typeName),
                             "configured": .string(origin), "served": true,
                             "platforms": .array(platforms.map(JSONValue.string))])
                text += "\(provider.name)  \(provider.typeName)  configured (\(origin))  push: \(platforms.joined(separator: ", "))\n"
            }
            for provider in configuration.unservedProviders {
                rows.append(["name": .string(provider.name), "type": .string(provider.typeName),
                             "configured": "config", "served": false,
                             "channels": .array(provider.channels.map(JSONValue.string))])
                text += "\(provider.name)  \(provider.typeName)  configured (config)  not served by this router (\(provider.channels.joined(separator: ", ")))\n"
            }
            if json {
                Console.out(JSONValue.object(["providers": .array(rows)]).prettyPrinted() + "\n")
            } else {
                Console.out(text.isEmpty ? "(no providers)\n" : text)
            }
        }
    }
}
