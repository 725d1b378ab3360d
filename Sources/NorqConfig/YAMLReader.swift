import NorqCore
import Yams

/// Turns YAML text into a `ConfigNode` tree with file/line/column, never crashing or hanging:
/// input is size- and nesting-checked before Yams sees it, aliases are refused (they allow exponential
/// documents), and every Yams error becomes `config/invalid-yaml` with its position.
struct YAMLReader: Sendable {
    /// Largest accepted document.
    static let maxBytes = 1 << 20
    /// Deepest accepted nesting (a norq.yaml needs about six levels).
    static let maxDepth = 64
    /// Most nodes in one document.
    static let maxNodes = 100_000

    var file: String?

    func read(_ text: String) throws(NorqError) -> ConfigNode {
        if text.utf8.count > Self.maxBytes {
            throw NorqError(.configInvalidYAML, "the config file is larger than \(Self.maxBytes) bytes",
                            at: SourceLocation(file: file, line: 1, column: 1))
        }
        try YAMLPrescan(file: file, maxDepth: Self.maxDepth).check(text)
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            throw convert(error)
        } catch {
            throw NorqError(.configInvalidYAML, "invalid YAML: \(error)", at: SourceLocation(file: file, line: 1, column: 1))
        }
        guard let root else { return ConfigNode(.null, at: SourceLocation(file: file, line: 1, column: 1)) }
        var budget = Self.maxNodes
        return try convert(root, depth: 0, budget: &budget)
    }

    private func location(_ mark: Mark?) -> SourceLocation {
        SourceLocation(file: file, line: mark?.line ?? 0, column: mark?.column ?? 0)
    }

    private func convert(_ node: Node, depth: Int, budget: inout Int) throws(NorqError) -> ConfigNode {
        budget -= 1
        guard budget >= 0, depth <= Self.maxDepth else {
            throw NorqError(.configInvalidYAML, "the document is too large or nests too deeply", at: location(node.mark))
        }
        switch node {
        case .scalar(let scalar):
            let quoted = scalar.style != .plain && scalar.style != .any
            if !quoted, ["", "~", "null", "Null", "NULL"].contains(scalar.string) {
                return ConfigNode(.null, at: location(scalar.mark))
            }
            return ConfigNode(.scalar(scalar.string, quoted: quoted), at: location(scalar.mark))
        case .sequence(let sequence):
            var items: [ConfigNode] = []
            for item in sequence { items.append(try convert(item, depth: depth + 1, budget: &budget)) }
            return ConfigNode(.sequence(items), at: location(sequence.mark))
        case .mapping(let mapping):
            var pairs: [(key: ConfigNode, value: ConfigNode)] = []
            for pair in mapping {
                let key = try convert(pair.key, depth: depth + 1, budget: &budget)
                let value = try convert(pair.value, depth: depth + 1, budget: &budget)
                pairs.append((key, value))
            }
            return ConfigNode(.mapping(pairs), at: location(mapping.mark))
        case .alias(let alias):
            throw NorqError(.configInvalidYAML, "YAML aliases are not supported in norq.yaml", at: location(alias.mark))
        }
    }

    private func convert(_ error: YamlError) -> NorqError {
        func problem(_ text: String, _ context: YamlError.Context?, _ mark: Mark) -> NorqError {
            var message = "invalid YAML: \(text)"
            if let context { message += " (\(context.text) at line \(context.mark.line))" }
            return NorqError(.configInvalidYAML, message, at: location(mark))
        }
        switch error {
        case .scanner(let context, let text, let mark, _): return problem(text, context, mark)
        case .parser(let context, let text, let mark, _): return problem(text, context, mark)
        case .composer(let context, let text, let mark, _): return problem(text, context, mark)
        case .reader(let text, let offset, _, _):
            return NorqError(.configInvalidYAML, "invalid YAML input: \(text)\(offset.map { " at byte \($0)" } ?? "")",
                             at: SourceLocation(file: file, line: 1, column: 1))
        case .duplicatedKeysInMapping(let duplicates, let context):
            return NorqError(.configInvalidYAML,
                             "duplicate key \(duplicates.prefix(3).map { "\"\($0.prefix(40))\"" }.joined(separator: ", "))",
                             at: location(context.mark))
        default:
            return NorqError(.configInvalidYAML, "invalid YAML", at: SourceLocation(file: file, line: 1, column: 1))
        }
    }
}

/// A conservative scan run before Yams: refuses aliases (`*name`) and documents nesting deeper than
/// `maxDepth` (block indentation levels + compact `- ` levels + flow brackets), which would otherwise
/// let a malformed or hostile input exhaust the stack or time.
struct YAMLPrescan {
    var file: String?
    var maxDepth: Int

    func check(_ text: String) throws(NorqError) {
        var indents: [Int] = []
        var blockScalarIndent: Int?  // indent of the line that opened a `|` / `>` scalar
        var inSingle = false, inDouble = false
        var flowDepth = 0
        var lineNumber = 0
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            let line = Array(rawLine.utf8)
            var indent = 0
            while indent < line.count, line[indent] == UInt8(ascii: " ") { indent += 1 }
            let blank = indent == line.count || line[indent] == UInt8(ascii: "#") || line[indent] == UInt8(ascii: "\r")
            if let opener = blockScalarIndent {
                if blank || indent > opener { continue }
                blockScalarIndent = nil
            }
            if blank && !inSingle && !inDouble { continue }
            if !inSingle && !inDouble && flowDepth == 0 {
                while let last = indents.last, last > indent { indents.removeLast() }
                if indents.last != indent { indents.append(indent) }
            }
            var compact = 0
            var previous: UInt8? = nil       // last non-space byte on this line
            var spaceSincePrevious = true
            var lastNonSpaceBeforeComment: UInt8? = nil
            var index = indent
            while index < line.count {
                let byte = line[index]
                defer { index += 1 }
                if inDouble {
                    if byte == UInt8(ascii: "\\") { index += 1; continue }
                    if byte == UInt8(ascii: "\"") { inDouble = false; previous = byte; spaceSincePrevious = false }
                    continue
                }
                if inSingle {
                    if byte == UInt8(ascii: "'") { inSingle = false; previous = byte; spaceSincePrevious = false }
                    continue
                }
                switch byte {
                case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
                    spaceSincePrevious = true
                    continue
                case UInt8(ascii: "#") where spaceSincePrevious:
                    index = line.count
                    continue
                default: break
                }
                let atTokenStart = previous == nil
                    || [UInt8(ascii: "["), UInt8(ascii: "{"), UInt8(ascii: ",")].contains(previous!)
                    || (spaceSincePrevious && [UInt8(ascii: "-"), UInt8(ascii: ":"), UInt8(ascii: "?")].contains(previous!))
                if atTokenStart {
                    switch byte {
                    case UInt8(ascii: "*"):
                        throw NorqError(.configInvalidYAML, "YAML aliases are not supported in norq.yaml",
                                        at: SourceLocation(file: file, line: lineNumber, column: index + 1))
                    case UInt8(ascii: "\""): inDouble = true
                    case UInt8(ascii: "'"): inSingle = true
                    case UInt8(ascii: "-"), UInt8(ascii: "?"):
                        if index + 1 >= line.count || line[index + 1] == UInt8(ascii: " ") { compact += 1 }
                    default: break
                    }
                }
                if byte == UInt8(ascii: "[") || byte == UInt8(ascii: "{") { flowDepth += 1 }
                if byte == UInt8(ascii: "]") || byte == UInt8(ascii: "}") { flowDepth = max(0, flowDepth - 1) }
                previous = byte
                spaceSincePrevious = false
                lastNonSpaceBeforeComment = byte
            }
            if indents.count + compact + flowDepth > maxDepth {
                throw NorqError(.configInvalidYAML, "the document nests deeper than \(maxDepth) levels",
                                at: SourceLocation(file: file, line: lineNumber, column: indent + 1))
            }
            // A block scalar header ends the line with `|` or `>` (plus optional indicators).
            if !inSingle && !inDouble, let last = lastNonSpaceBeforeComment {
                let trimmed = String(decoding: line, as: UTF8.self).trimmingWhitespace()
                let withoutComment = trimmed.split(separator: " #", maxSplits: 1).first.map(String.init) ?? trimmed
                let tail = withoutComment.reversed().prefix { "+-0123456789".contains($0) }
                let head = withoutComment.dropLast(tail.count)
                if head.hasSuffix("|") || head.hasSuffix(">") || last == UInt8(ascii: "|") {
                    blockScalarIndent = indent
                }
            }
        }
    }
}
