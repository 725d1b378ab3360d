import ArgumentParser

@main
struct NorqCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "norq",
        abstract: "Render, validate, test and send push notifications through Norq for Swift.",
        discussion: """
            Examples:
              norq validate --config examples/quickstart/norq.yaml
              norq render order-shipped --config examples/quickstart/norq.yaml --sample default
              norq render order-shipped --config examples/quickstart/norq.yaml --sample default \\
                  --to examples/quickstart/recipients.json
              norq send order-shipped --config examples/quickstart/norq.yaml --sample default \\
                  --to examples/quickstart/recipients.json --emulator
              norq test --config examples/quickstart/norq.yaml
              norq emulator --config examples/quickstart/norq.yaml --port 2197

            Colours are used only on a terminal (and never with NO_COLOR set); errors go to stderr.

            \(ExitCodes.help)
            """,
        subcommands: [RenderCommand.self, SendCommand.self, ValidateCommand.self, TestCommand.self,
                      EmulatorCommand.self]
    )
}
