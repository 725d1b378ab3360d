import ArgumentParser
import Foundation
import NorqConfig
import NorqCore
import NorqTemplates

/// `norq fmt [ids…] [--check]`: the canonical layout of each template's `push.md` frontmatter,
/// `data.samples.yaml` and `tests.yaml` (``TemplateFormatter``).
struct FmtCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fmt",
        abstract: "Lay out push.md frontmatter, data.samples.yaml and tests.yaml canonically (key order, quoting, indentation).",
        discussion: """
            Keys in the push docs' order (title, enabled, ios, android, web, headers, data; each block's keys in \
            its reference order), two spaces per level, strings plain when that reads back the same and \
            double-quoted otherwise, at most one blank line between entries; comments are kept, values are \
            never changed, the Markdown body is left as it is, and formatting twice changes nothing. A file \
            with YAML it does not lay out (anchors, tags, multi-line flow or quoted scalars) is reported and left \
            alone (template/fmt-unsupported).

            With --check nothing is written: each file that would change is listed and the exit code is 1 (CI).

            Examples:
              norq fmt
              norq fmt order-shipped
              norq fmt --check

            \(ExitCodes.help)
            """
    )

    @Argument(help: "Template ids (default: all).")
    var ids: [String] = []

    @OptionGroup var configOptions: ConfigOptions

    @Flag(name: .long, help: "Write nothing; list the files that are not formatted and exit 1 when there is one.")
    var check = false

    func run() async throws {
        let code = execute()
        if code != 0 { throw ExitCode(code) }
    }

    func execute() -> Int32 {
        let library: TemplateLibrary
        do {
            library = try configOptions.library(try configOptions.loadConfigurationIfPresent())
        } catch {
            Console.report(error)
            return 1
        }
        let names = ids.isEmpty ? library.templateNames : ids
        var changed = 0, failed = 0, checked = 0
        for name in names {
            guard library.templateNames.contains(name) else {
                Console.report(NorqError(.templateNotFound, "no template '\(name)' in \(library.directory)"))
                failed += 1
                continue
            }
            for file in TemplateFormatter.files {
                let path = library.directory + "/" + name + "/" + file
                guard let data = FileManager.default.contents(atPath: path) else { continue }
                checked += 1
                switch Self.formatFile(path: path, name: file, data: data, write: !check) {
                case .unchanged: break
                case .changed:
                    changed += 1
                    Console.out((check ? "would reformat " : "formatted ") + path + "\n")
                case .failed(let error):
                    Console.report(error)
                    failed += 1
                }
            }
        }
        let verb = check ? "would be reformatted" : "reformatted"
        Console.out("\(checked) file\(checked == 1 ? "" : "s") checked, \(changed) \(verb)\(failed > 0 ? ", \(failed) not laid out" : "")\n")
        return failed > 0 || (check && changed > 0) ? 1 : 0
    }

    enum Outcome {
        case unchanged, changed, failed(NorqError)
    }

    /// Lays out one file; writes it when `write` and it changed.
    static func formatFile(path: String, name: String, data: Data, write: Bool) -> Outcome {
        let source = String(decoding: data, as: UTF8.self)
        let formatted: String
        do {
            formatted = try TemplateFormatter.format(source, fileName: name, path: path)
        } catch {
            return .failed(error)
        }
        guard formatted != source else { return .unchanged }
        if write {
            do {
                try Data(formatted.utf8).write(to: URL(fileURLWithPath: path))
            } catch {
                return .failed(NorqError(.cliFileNotFound, "cannot write \(path): \(error.localizedDescription)"))
            }
        }
        return .changed
    }
}
