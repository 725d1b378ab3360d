public import NorqCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `norq fmt`'s canonical layout of a template folder's files (``YAMLLayout``): the frontmatter of `push.md` (keys in
/// the order of the push docs: `title`, `enabled`, `ios`, `android`, `web`, `headers`, `data`, and each block's keys
/// in the order of its reference list; the body untouched), `data.samples.yaml` (samples keep their order: the first
/// is the default) and `tests.yaml` (each case's keys as `name`, `sample`, `all_samples`, `channel`, `strict`,
/// `data`, `assert`). Idempotent; comments are kept.
public enum TemplateFormatter {
    /// The files `norq fmt` lays out in a template folder.
    public static let files = ["push.md", "data.samples.yaml", "tests.yaml"]

    /// The canonical text of `source`, a file named `fileName` (`push.md`, `data.samples.yaml`, `tests.yaml`), or
    /// `template/fmt-unsupported` naming the line it cannot lay out.
    public static func format(_ source: String, fileName: String, path: String? = nil) throws(NorqError) -> String {
        switch fileName {
        case "push.md": return try formatPushMarkdown(source, path: path)
        case "tests.yaml": return try YAMLLayout(keyOrder: testsOrder).format(source, file: path)
        default: return try YAMLLayout().format(source, file: path)
        }
    }

    static let caseKeys = ["name", "sample", "all_samples", "channel", "strict", "data", "assert"]

    @Sendable static func testsOrder(_ path: [String]) -> [String]? {
        switch path {
        case []: ["tests"]
        case ["tests", "*"]: caseKeys
        default: nil
        }
    }

    @Sendable static func frontmatterOrder(_ path: [String]) -> [String]? {
        switch path {
        case []: FrontmatterCompiler.topLevelKeys
        case ["ios"]: FrontmatterCompiler.iosKeys
        case ["android"]: FrontmatterCompiler.androidKeys
        case ["web"]: FrontmatterCompiler.webKeys
        case ["headers"]: FrontmatterCompiler.headerKeys
        default: nil
        }
    }

    /// The frontmatter between the first two `---` lines laid out; the body kept byte for byte.
    static func formatPushMarkdown(_ source: String, path: String?) throws(NorqError) -> String {
        var text = Substring(source)
        var bom = ""
        if text.hasPrefix("\u{FEFF}") {
            bom = "\u{FEFF}"
            text = text.dropFirst()
        }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let first = lines.first, first.trimmingWhitespace() == "---",
              let end = lines.dropFirst().firstIndex(where: { $0.trimmingWhitespace() == "---" }) else {
            return source
        }
        let yaml = lines[1..<end].joined(separator: "\n")
        let formatted = try YAMLLayout(keyOrder: frontmatterOrder).format(yaml, file: path, firstLine: 2)
        let body = lines[(end + 1)...].joined(separator: "\n")
        return bom + "---\n" + formatted + "---\n" + body
    }
}
