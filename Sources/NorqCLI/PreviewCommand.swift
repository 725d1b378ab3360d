import ArgumentParser
import Foundation
import Logging
import NorqConfig
import NorqCore
import Norq
import NorqPreview
import NorqTemplates
import ServiceLifecycle
import UnixSignals

/// `norq preview [--port N] [--open]`: the template author's page on 127.0.0.1.
struct PreviewCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "preview",
        abstract: "Serve a local page (127.0.0.1) showing each template as iOS, Android and a desktop browser draw it.",
        discussion: """
            Lists the project's push templates; for the one chosen and a sample (or pasted JSON data merged on it) \
            the page shows an iOS lock-screen banner, an Android notification and a desktop browser notification \
            (Web Push), an FCM view where it differs, and beside each the exact request of each provider that \
            serves the platform (headers and body as `norq render --to` prints them, secrets redacted), the payload \
            size against that provider's limit, and the findings of `norq validate` with their lines. Saving a \
            template, a sample or the config re-renders the open page (server-sent events). Listens on 127.0.0.1 \
            only; nothing is sent. Stop with Ctrl-C.

            Examples:
              norq preview --config examples/quickstart/norq.yaml --open
              norq preview --templates ./templates --port 0      # any free port, no providers

            \(ExitCodes.help)
            """
    )

    @OptionGroup var configOptions: ConfigOptions

    @Option(name: .long, help: "Port on 127.0.0.1 (0: any free port).")
    var port: Int = 4180

    @Flag(name: .long, help: "Open the page in the default browser (xdg-open, or open on macOS).")
    var open = false

    @Flag(name: .long, help: "Log debug messages (each reload) on stderr.")
    var verbose = false

    func run() async throws {
        guard (0...65535).contains(port) else {
            throw Console.fail(NorqError(.cliInvalidOption, "--port must be from 0 to 65535"))
        }
        let options = configOptions
        // A configuration that cannot be read is shown on the page (and fixed while it is open), not fatal.
        var logger = Logger(label: "norq.preview")
        logger.logLevel = verbose ? .debug : .warning
        let routerLogger = logger
        let loader: PreviewProject.Loader = { previous throws(NorqError) in
            if let previous {
                // The config file did not change: the same providers (their keys are not read again), new templates.
                return previous.replacingLibrary(try options.library(previous.configuration))
            }
            let configuration = try options.loadConfigurationIfPresent()
            let library = try options.library(configuration)
            return PreviewProject.make(library: library, configuration: configuration,
                                       registry: ConfigOptions.registry(consoleToStandardError: true), logger: routerLogger)
        }
        let open = self.open
        let service = PreviewService(
            settings: PreviewService.Settings(port: port), loader: loader, linter: TemplateLintPreviewLinter(),
            logger: logger,
            onListening: { host, port in
                let url = "http://\(host):\(port)/"
                Console.out("norq preview: \(url) (Ctrl-C to stop)\n")
                if open { Self.openInBrowser(url) }
            })
        let group = ServiceGroup(configuration: .init(services: [.init(service: service)],
                                                      gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch let error as NorqError {
            throw Console.fail(error)
        }
    }

    /// Opens `url` with `open` (macOS) or `xdg-open` found on PATH; says so on stderr when there is none or it
    /// cannot be started (the page is served either way).
    static func openInBrowser(_ url: String) {
        #if os(macOS)
        let opener: String? = "/usr/bin/open"
        #else
        let directories = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        let opener = directories.map { "\($0)/xdg-open" }.first { FileManager.default.isExecutableFile(atPath: $0) }
        #endif
        guard let opener else {
            Console.err("norq preview: --open: no xdg-open on PATH; open \(url) in a browser\n")
            return
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: opener)
        process.arguments = [url]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            Console.err("norq preview: --open: \(opener) could not be started (\(error)); open \(url) in a browser\n")
        }
    }
}

