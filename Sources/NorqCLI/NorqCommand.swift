import ArgumentParser

@main
struct NorqCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "norq",
        abstract: "Render, validate, test and send push notifications through Norq for Swift.",
        discussion: """
            Examples:
              cd examples/quickstart      # has norq.yaml and recipients.json
              norq validate
              norq render order-shipped --sample default
              norq render order-shipped --sample default --to recipients.json
              norq send order-shipped --sample default --to recipients.json --emulator
              norq test
              norq emulator --port 2197

            Colours are used only on a terminal (and never with NO_COLOR set); errors go to stderr.

            \(ExitCodes.help)
            """,
        subcommands: [RenderCommand.self, SendCommand.self, ValidateCommand.self, LintCommand.self, FmtCommand.self, CompileCommand.self, TestCommand.self,
                      EmulatorCommand.self, ChannelsCommand.self,
                      NewCommand.self, InitCommand.self, ProviderCommand.self,
                      WorkerCommand.self, StatusCommand.self, TokensCommand.self, MigrateCommand.self,
                      ServeCommand.self, PreviewCommand.self]
    )
}
