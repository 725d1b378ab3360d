import Foundation

/// A fenced ```sh block of a Markdown file marked runnable: the line before its fence is an HTML comment
///
///     <!-- runnable [expect="TEXT" | expect='TEXT']... [expect-output] [serve="NORQ SERVE ARGUMENTS"] -->
///
/// - `expect`: its standard output contains TEXT (any number of them).
/// - `expect-output`: the next fenced block (plain ```, no language) is its output; its lines must be the block's
///   lines, in any order, once UUIDs, the emulators' ports and the duration are set aside (`normalized`).
/// - `serve`: it talks to `norq serve ARGUMENTS --store (a temporary file) --port 0`, started first with random
///   `NORQ_KEY_OPS` and `NORQ_KEY_CHECKOUT` in its and the block's environment; the placeholder `127.0.0.1:8080` in
///   the block becomes the served address.
///
/// `swift run PRODUCT` in a block runs the already-built PRODUCT (never a build), and `norq` is the built `norq`.
struct RunnableBlock: Sendable, CustomStringConvertible {
    var file: String
    var line: Int
    var script: String
    var expectations: [String] = []
    var expectedOutput: [String]?
    var serveArguments: [String]?

    var description: String { "\(file):\(line)" }

    static let marker = "<!-- runnable"

    /// The runnable blocks of one Markdown text (`file` names it in descriptions and errors).
    static func parse(_ text: String, file: String) throws -> [RunnableBlock] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var blocks: [RunnableBlock] = []
        var index = 0
        while index < lines.count {
            let trimmed = lines[index].trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix(marker), trimmed.hasSuffix("-->") else {
                index += 1
                continue
            }
            let attributes = try Self.attributes(of: String(trimmed.dropFirst(marker.count).dropLast(3)),
                                                 at: "\(file):\(index + 1)")
            guard index + 1 < lines.count, lines[index + 1] == "```sh" else {
                throw ParseError("\(file):\(index + 1): a runnable marker must be followed by a ```sh fence")
            }
            var block = RunnableBlock(file: file, line: index + 2, script: "")
            var end = index + 2
            var body: [String] = []
            while end < lines.count, lines[end] != "```" {
                body.append(lines[end])
                end += 1
            }
            guard end < lines.count else { throw ParseError("\(block): the ```sh fence is not closed") }
            block.script = body.joined(separator: "\n") + "\n"
            for (name, value) in attributes {
                switch name {
                case "expect": block.expectations.append(value ?? "")
                case "serve": block.serveArguments = (value ?? "").split(separator: " ").map(String.init)
                case "expect-output":
                    var next = end + 1
                    while next < lines.count, lines[next].trimmingCharacters(in: .whitespaces).isEmpty { next += 1 }
                    guard next < lines.count, lines[next] == "```" else {
                        throw ParseError("\(block): expect-output needs a plain ``` block right after the example")
                    }
                    var output: [String] = []
                    next += 1
                    while next < lines.count, lines[next] != "```" {
                        output.append(lines[next])
                        next += 1
                    }
                    block.expectedOutput = output
                default: throw ParseError("\(block): unknown runnable attribute '\(name)'")
                }
            }
            blocks.append(block)
            index = end + 1
        }
        return blocks
    }

    /// `name`, `name="value"` and `name='value'` pairs, in order.
    static func attributes(of text: String, at location: String) throws -> [(String, String?)] {
        let regex = try NSRegularExpression(pattern: #"\s*([a-z-]+)(?:=(?:"([^"]*)"|'([^']*)'))?"#)
        var result: [(String, String?)] = []
        var position = text.startIndex
        while position < text.endIndex {
            if text[position...].allSatisfy(\.isWhitespace) { break }
            let range = NSRange(position..., in: text)
            guard let match = regex.firstMatch(in: text, options: .anchored, range: range),
                  let whole = Range(match.range, in: text), let name = Range(match.range(at: 1), in: text) else {
                throw ParseError("\(location): cannot read the runnable marker at '\(text[position...])'")
            }
            let value = Range(match.range(at: 2), in: text).map { String(text[$0]) }
                ?? Range(match.range(at: 3), in: text).map { String(text[$0]) }
            result.append((String(text[name]), value))
            position = whole.upperBound
        }
        return result
    }

    /// A line with what differs from one run to the next set aside (UUIDs, the emulators' ports, FCM message
    /// numbers, a duration in seconds), and trailing spaces removed; counts and everything else stay as they are.
    static func normalized(_ line: String) -> String {
        var text = line.replacingOccurrences(
            of: "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", with: "<uuid>",
            options: .regularExpression)
        text = text.replacingOccurrences(of: "(127\\.0\\.0\\.1|localhost):[0-9]+", with: "$1:<port>",
                                         options: .regularExpression)
        // FCM's emulator numbers messages in the order they arrive, which concurrency may change.
        text = text.replacingOccurrences(of: "/messages/0:[0-9]+", with: "/messages/0:<n>", options: .regularExpression)
        text = text.replacingOccurrences(of: "in [0-9]+(\\.[0-9]+)? s\\b", with: "in <t> s", options: .regularExpression)
        while text.last?.isWhitespace == true { text.removeLast() }
        return text
    }

    struct ParseError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
