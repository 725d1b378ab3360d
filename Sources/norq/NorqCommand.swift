import ArgumentParser

@main
struct NorqCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "norq",
        abstract: "Render, validate and send push notifications through Norq for Swift.",
        subcommands: [ValidateCommand.self, ChannelsCommand.self]
    )
}
