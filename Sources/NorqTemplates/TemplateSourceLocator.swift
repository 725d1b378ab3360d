public import NorqCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Finds where a key is written in a template file (`push.md` frontmatter or `push.json`), so that a finding that
/// comes without a location (a provider's `prepare` error, a payload limit) points at the line the author edits.
public enum TemplateSourceLocator {
    /// The location of the first `key:` (or `"key":`) in the frontmatter of `file` (the whole file for `push.json`),
    /// trying each of `keys` in order; nil when none is written there or the file cannot be read.
    public static func locate(keys: [String], in file: String) -> SourceLocation? {
        guard let data = FileManager.default.contents(atPath: file) else { return nil }
        return locate(keys: keys, inSource: String(decoding: data, as: UTF8.self), file: file)
    }

    /// ``locate(keys:in:)`` on source text.
    public static func locate(keys: [String], inSource source: String, file: String?) -> SourceLocation? {
        let lines = source.split(separator: "\n", omittingEmptySubsequences: false)
        var range = 0..<lines.count
        if let first = lines.first, first.trimmingCharacters(in: .whitespaces) == "---" {
            let end = lines.dropFirst().firstIndex { $0.trimmingCharacters(in: .whitespacesAndNewlines) == "---" }
            range = 1..<(end ?? lines.count)
        }
        for key in keys {
            for index in range {
                let line = lines[index]
                let trimmed = line.drop { $0 == " " || $0 == "\t" || $0 == "-" }
                let indent = line.count - trimmed.count
                for spelled in [key + ":", "\"" + key + "\":", "'" + key + "':"] where trimmed.hasPrefix(spelled) {
                    return SourceLocation(file: file, line: index + 1, column: indent + 1)
                }
            }
        }
        return nil
    }
}
