import ArgumentParser
import Foundation
import NorqAPNs
import NorqConfig
import NorqCore

extension NorqError.Code {
    /// `norq channels` cannot tell which APNs provider to use: `--provider` names none, or the configuration has
    /// no APNs provider, or several and no `--provider`.
    static let cliChannelProvider: Self = "cli/channel-provider"
}

/// `norq channels create|list|read|delete`: manages iOS 18 broadcast channels of the configured APNs app on
/// `api-manage-broadcast[.sandbox].push.apple.com` (or `managementEndpoint`), with the provider's own credentials.
struct ChannelsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channels",
        abstract: "Create, list, read and delete APNs broadcast channels (iOS 18 Live Activities).",
        discussion: """
            Examples:
              norq channels create --config norq.yaml --environment production --storage-policy 0
              norq channels list --config norq.yaml --environment production
              norq channels read  dHN0LXNyY2gtY2hubA== --config norq.yaml --environment production
              norq channels delete dHN0LXNyY2gtY2hubA== --config norq.yaml --environment production
              norq channels create --config norq.yaml --dry-run     # print the exact request, send nothing

            Send a Live Activity to a channel with `norq send <template> --to recipients.json`, where a recipient
            is {"push": {"channels": [{"channel": "<id>", "environment": "production"}]}}.
            Exit codes: 0 success, 1 error (APNs refused: the code is apns/<reason>), 64 usage error.
            """,
        subcommands: [Create.self, List.self, Read.self, Delete.self]
    )

    /// Options every channel command takes.
    struct Common: ParsableArguments {
        @Option(name: [.customShort("c"), .long], help: ArgumentHelp("Config file, or the folder holding it (default: norq.yaml or norq.config.yaml found walking up from the current directory, else up to 5 levels below it).", valueName: "PATH"))
        var config: String?

        @Option(name: .long, help: "APNs provider instance (default: the only one of type apns).")
        var provider: String?

        @Option(name: .long, help: "sandbox or production (default: the provider's `production` setting). Channels are per environment.")
        var environment: String?

        @Option(name: .long, help: "apns-request-id to send (a UUID; generated when absent).")
        var requestId: String?

        @Option(name: .long, help: "Request timeout in seconds.")
        var timeout: Int = 10

        @Flag(name: .long, help: "Print the exact HTTP/2 request (credentials redacted) and send nothing.")
        var dryRun = false

        @Flag(name: .long, help: "Print the result as JSON.")
        var json = false
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a channel (POST /1/apps/<bundleId>/channels); prints its apns-channel-id.")
        @OptionGroup var common: Common
        @Option(name: .long, help: "0 = no messages stored (broadcasts need apns-expiration 0), 1 = most recent message stored.")
        var storagePolicy: String = "1"

        func run() async throws {
            try await ChannelsCommand.run(common) { provider, environment in
                let policy = try APNsChannelStoragePolicy.parse(storagePolicy)
                return (try provider.prepareChannelRequest(.create(policy), environment: environment, requestID: common.requestId), {
                    let info = try await provider.createChannel(storagePolicy: policy, environment: environment,
                                                                requestID: common.requestId, timeout: .seconds(common.timeout))
                    return ChannelsCommand.output(info, json: common.json)
                })
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the app's channels in an environment (GET /1/apps/<bundleId>/all-channels).")
        @OptionGroup var common: Common

        func run() async throws {
            try await ChannelsCommand.run(common) { provider, environment in
                (try provider.prepareChannelRequest(.list, environment: environment, requestID: common.requestId), {
                    let list = try await provider.listChannels(environment: environment, requestID: common.requestId,
                                                               timeout: .seconds(common.timeout))
                    if common.json {
                        let value: JSONValue = ["environment": .string(list.environment.rawValue),
                                                "requestId": list.requestID.map(JSONValue.string) ?? .null,
                                                "channels": .array(list.channels.map(JSONValue.string))]
                        return value.prettyPrinted() + "\n"
                    }
                    var text = "\(list.channels.count) channel(s) in \(list.environment)"
                    text += list.requestID.map { " (apns-request-id \($0))" } ?? ""
                    return text + "\n" + list.channels.map { "  \($0)\n" }.joined()
                })
            }
        }
    }

    struct Read: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Read a channel's storage policy and push type (GET /1/apps/<bundleId>/channels).")
        @Argument(help: "The channel id (apns-channel-id) as create returned it.")
        var channelID: String
        @OptionGroup var common: Common

        func run() async throws {
            try await ChannelsCommand.run(common) { provider, environment in
                (try provider.prepareChannelRequest(.read(channelID: channelID), environment: environment,
                                                    requestID: common.requestId), {
                    let info = try await provider.readChannel(channelID, environment: environment,
                                                              requestID: common.requestId, timeout: .seconds(common.timeout))
                    return ChannelsCommand.output(info, json: common.json)
                })
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a channel (DELETE /1/apps/<bundleId>/channels, 204).")
        @Argument(help: "The channel id (apns-channel-id).")
        var channelID: String
        @OptionGroup var common: Common

        func run() async throws {
            try await ChannelsCommand.run(common) { provider, environment in
                (try provider.prepareChannelRequest(.delete(channelID: channelID), environment: environment,
                                                    requestID: common.requestId), {
                    let deletion = try await provider.deleteChannel(channelID, environment: environment,
                                                                    requestID: common.requestId, timeout: .seconds(common.timeout))
                    if common.json {
                        let value: JSONValue = ["deleted": .string(deletion.id), "environment": .string(deletion.environment.rawValue),
                                                "requestId": deletion.requestID.map(JSONValue.string) ?? .null]
                        return value.prettyPrinted() + "\n"
                    }
                    return "deleted \(deletion.id) in \(deletion.environment)"
                        + (deletion.requestID.map { " (apns-request-id \($0))" } ?? "") + "\n"
                })
            }
        }
    }

    typealias Action = () async throws -> String

    /// Loads the configuration, picks the APNs provider, then prints the request (`--dry-run`) or runs it.
    static func run(_ common: Common,
                    _ build: (APNsProvider, PushEnvironment?) throws -> (PreparedRequest, Action)) async throws {
        let provider: APNsProvider
        let prepared: PreparedRequest
        let action: Action
        do {
            let environment = try common.environment.map { try PushEnvironment.parse($0) }
            provider = try makeProvider(common)
            let built = try build(provider, environment)
            prepared = built.0
            action = built.1
        } catch {
            report(error)
            throw ExitCode(1)
        }
        if common.dryRun {
            print(describe(prepared), terminator: "")
            await provider.shutdown()
            return
        }
        do {
            let text = try await action()
            await provider.shutdown()
            print(text, terminator: "")
        } catch {
            await provider.shutdown()
            report(error)
            throw ExitCode(1)
        }
    }

    static func report(_ error: any Error) {
        let text = (error as? NorqError)?.description ?? "error: \(error)"
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    static func makeProvider(_ common: Common) throws(NorqError) -> APNsProvider {
        let loader = ConfigurationLoader(registry: ValidateCommand.registry)
        let loaded: NorqConfiguration
        if let config = common.config {
            loaded = try loader.load(path: config)
        } else {
            loaded = try loader.discover(from: FileManager.default.currentDirectoryPath)
        }
        let candidates = loaded.providers.filter { $0.configuration is APNsConfiguration }
        let chosen: ProviderInstanceConfiguration
        if let name = common.provider {
            guard let match = candidates.first(where: { $0.name == name }) else {
                throw NorqError(.cliChannelProvider, "--provider \(name) is not an APNs provider instance of this configuration",
                                hint: "APNs instances: \(candidates.map(\.name).joined(separator: ", "))")
            }
            chosen = match
        } else {
            guard candidates.count == 1, let only = candidates.first else {
                throw NorqError(.cliChannelProvider, candidates.isEmpty
                    ? "the configuration has no APNs provider"
                    : "the configuration has \(candidates.count) APNs providers (\(candidates.map(\.name).joined(separator: ", "))); name one with --provider")
            }
            chosen = only
        }
        guard let configuration = chosen.configuration as? APNsConfiguration else {
            throw NorqError(.cliChannelProvider, "provider \(chosen.name) is not an APNs provider")
        }
        return try APNsProvider(name: chosen.name, configuration: configuration)
    }

    static func output(_ info: APNsChannelInfo, json: Bool) -> String {
        if json {
            let value: JSONValue = [
                "channel": .string(info.id), "environment": .string(info.environment.rawValue),
                "status": .int(Int64(info.status)),
                "messageStoragePolicy": info.storagePolicy.map { .int(Int64($0.rawValue)) } ?? .null,
                "pushType": info.pushType.map(JSONValue.string) ?? .null,
                "requestId": info.requestID.map(JSONValue.string) ?? .null,
            ]
            return value.prettyPrinted() + "\n"
        }
        var text = "channel \(info.id) (\(info.environment))\n"
        if let policy = info.storagePolicy { text += "  message-storage-policy: \(policy)\n" }
        if let pushType = info.pushType { text += "  push-type: \(pushType)\n" }
        if let requestID = info.requestID { text += "  apns-request-id: \(requestID)\n" }
        return text
    }

    /// The request as it would go out (secret headers redacted).
    static func describe(_ request: PreparedRequest) -> String {
        var text = "\(request.method) \(request.url)\n"
        for header in request.displayHeaders { text += "\(header.name): \(header.value)\n" }
        if !request.body.isEmpty { text += "\n" + String(decoding: request.body, as: UTF8.self) + "\n" }
        return text
    }
}
