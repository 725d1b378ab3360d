public import NorqCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A canonical layout of block YAML (what `norq fmt` writes): two spaces per level, a sequence under a key indented
/// below it, keys in a given order, scalars plain when that reads back as the same string and double-quoted
/// otherwise, one blank line at most between entries, comments kept (a comment line moves with the entry below
/// it, a trailing comment stays on its line). Values are never changed: a plain scalar stays as written (quoting it
/// could change its type), flow collections (`{ eq: 1 }`) and block scalars (`|`, `>`) are kept verbatim.
///
/// YAML it does not lay out (anchors, aliases, tags, complex keys, multi-line flow collections or quoted scalars,
/// plain scalars continued on the next line, tabs) is `template/fmt-unsupported`: the file is left as it is.
public struct YAMLLayout: Sendable {
    /// The preferred key order of the mapping at a path (keys from the root; `*` for any sequence item), or nil to
    /// keep the written order. Keys not listed follow the listed ones in their written order.
    public var keyOrder: @Sendable ([String]) -> [String]?

    public init(keyOrder: @escaping @Sendable ([String]) -> [String]? = { _ in nil }) {
        self.keyOrder = keyOrder
    }

    /// `source` laid out; `file` and `firstLine` (of `source` in the file) locate an unsupported construct.
    public func format(_ source: String, file: String? = nil, firstLine: Int = 1) throws(NorqError) -> String {
        var parser = Parser(file: file, firstLine: firstLine)
        let lines = source.split(separator: "\n", omittingEmptySubsequences: false).map {
            $0.hasSuffix("\r") ? String($0.dropLast()) : String($0)
        }
        parser.lines = lines
        let root = try parser.parseDocument()
        var out: [String] = []
        emit(root, indent: 0, path: [], into: &out)
        while out.last == "" { out.removeLast() }
        while out.first == "" { out.removeFirst() }
        return out.isEmpty ? "" : out.joined(separator: "\n") + "\n"
    }

    // MARK: - Model

    indirect enum Node {
        case mapping([Entry], trailing: [String])
        case sequence([Item], trailing: [String])
    }

    enum Value {
        /// A scalar or one-line flow collection as written (empty: null), and its trailing comment.
        case scalar(String, comment: String?)
        /// A nested block, with the comment after `key:`.
        case block(Node, comment: String?)
        /// A block scalar: its header (`|`, `>-`, with any comment) and its lines, relative to their indentation.
        case literal(header: String, lines: [String])
    }

    struct Entry {
        var leading: [String]
        var key: String
        var value: Value
    }

    struct Item {
        var leading: [String]
        var value: Value
    }

    // MARK: - Emitting

    func emit(_ node: Node, indent: Int, path: [String], into out: inout [String]) {
        let pad = String(repeating: " ", count: indent)
        switch node {
        case .mapping(let entries, let trailing):
            for entry in ordered(entries, path: path) {
                emitLeading(entry.leading, pad: pad, into: &out)
                emitValue(entry.value, head: pad + Self.canonicalKey(entry.key) + ":", indent: indent + 2,
                          path: path + [entry.key], into: &out)
            }
            emitLeading(trailing, pad: pad, into: &out)
        case .sequence(let items, let trailing):
            for item in items {
                emitLeading(item.leading, pad: pad, into: &out)
                switch item.value {
                case .block(.mapping(let entries, let inner), let comment) where comment == nil && !entries.isEmpty:
                    // `- key: value` with the rest of the mapping below it.
                    var lines: [String] = []
                    emit(.mapping(entries, trailing: inner), indent: indent + 2, path: path + ["*"], into: &lines)
                    if let first = lines.firstIndex(where: { !$0.isEmpty && !$0.trimmingWhitespace().hasPrefix("#") }) {
                        lines[first] = pad + "- " + lines[first].dropFirst(indent + 2)
                    }
                    out += lines
                default:
                    emitValue(item.value, head: pad + "-", indent: indent + 2, path: path + ["*"], into: &out)
                }
            }
            emitLeading(trailing, pad: pad, into: &out)
        }
    }

    func emitValue(_ value: Value, head: String, indent: Int, path: [String], into out: inout [String]) {
        switch value {
        case .scalar(let text, let comment):
            var line = head
            if !text.isEmpty { line += " " + Self.canonicalScalar(text) }
            if let comment { line += " " + comment }
            out.append(line)
        case .block(let node, let comment):
            out.append(head + (comment.map { " " + $0 } ?? ""))
            emit(node, indent: indent, path: path, into: &out)
        case .literal(let header, let lines):
            out.append(head + " " + header)
            let pad = String(repeating: " ", count: indent)
            for line in lines { out.append(line.isEmpty ? "" : pad + line) }
        }
    }

    func emitLeading(_ leading: [String], pad: String, into out: inout [String]) {
        for line in leading {
            if line.isEmpty {
                if let last = out.last, !last.isEmpty { out.append("") }
            } else {
                out.append(pad + line)
            }
        }
    }

    func ordered(_ entries: [Entry], path: [String]) -> [Entry] {
        guard let order = keyOrder(path) else { return entries }
        let rank = Dictionary(order.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        return entries.enumerated().sorted { a, b in
            let ra = rank[a.element.key] ?? order.count, rb = rank[b.element.key] ?? order.count
            return ra != rb ? ra < rb : a.offset < b.offset
        }.map(\.element)
    }

    // MARK: - Scalars

    /// A key as written, unquoted when the plain form reads back as the same string.
    static func canonicalKey(_ key: String) -> String {
        isPlainSafe(key) ? key : "\"" + escape(key) + "\""
    }

    /// Plain when safe; a single-quoted or double-quoted string otherwise double-quoted; anything else as written.
    static func canonicalScalar(_ text: String) -> String {
        if text.hasPrefix("'"), text.hasSuffix("'"), text.count >= 2 {
            let content = String(text.dropFirst().dropLast()).replacingOccurrences(of: "''", with: "'")
            return isPlainSafe(content) ? content : "\"" + escape(content) + "\""
        }
        if text.hasPrefix("\""), text.hasSuffix("\""), text.count >= 2 {
            let content = String(text.dropFirst().dropLast())
            if !content.contains("\\"), isPlainSafe(content) { return content }
            return text
        }
        return text
    }

    static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\t": out += "\\t"
            default: out.append(character)
            }
        }
        return out
    }

    /// Whether `text` written plain reads back as this string: a conservative set (letters first, no indicator
    /// that starts a structure, no `: ` or ` #`, not a word or number YAML resolves to another type).
    static func isPlainSafe(_ text: String) -> Bool {
        guard let first = text.first, first.isLetter || first == "_" || first == "/",
              let last = text.last, last != " ", last != ":" else { return false }
        let allowed = Set(" _-./@()+,!?=;%$^~")
        guard text.allSatisfy({ $0.isLetter || $0.isNumber || allowed.contains($0) }) else { return false }
        if text.contains(": ") || text.contains(" #") { return false }
        let words: Set<String> = ["y", "n", "yes", "no", "true", "false", "on", "off", "null", "nan", "inf"]
        return !words.contains(text.lowercased())
    }

    // MARK: - Parsing

    struct Parser {
        let file: String?
        let firstLine: Int
        var lines: [String] = []
        var index = 0

        init(file: String?, firstLine: Int) {
            self.file = file
            self.firstLine = firstLine
        }

        func unsupported(_ what: String, line: Int) -> NorqError {
            NorqError(.fmtUnsupported, "norq fmt does not lay out \(what); the file is left as it is",
                      at: SourceLocation(file: file, line: firstLine + line, column: 1))
        }

        static func indent(_ line: String) -> Int { line.prefix { $0 == " " }.count }
        static func isBlankOrComment(_ line: String) -> Bool {
            let trimmed = line.trimmingWhitespace()
            return trimmed.isEmpty || trimmed.hasPrefix("#")
        }

        mutating func parseDocument() throws(NorqError) -> Node {
            for (number, line) in lines.enumerated() {
                if line.prefix(while: { $0 == " " || $0 == "\t" }).contains("\t") { throw unsupported("tab indentation", line: number) }
                if line.hasPrefix("---") || line.hasPrefix("...") || line.hasPrefix("%") {
                    throw unsupported("several documents or directives", line: number)
                }
            }
            let leading = takeLeading()
            guard index < lines.count else { return .mapping([], trailing: leading) }
            var node = try parseBlock(indent: Self.indent(lines[index]))
            node = Self.prepend(leading, to: node)
            let rest = takeLeading()
            if index < lines.count { throw unsupported("content indented less than the first key", line: index) }
            return Self.append(rest, to: node)
        }

        static func prepend(_ leading: [String], to node: Node) -> Node {
            switch node {
            case .mapping(var entries, let trailing):
                if entries.isEmpty { return .mapping([], trailing: leading + trailing) }
                entries[0].leading = leading + entries[0].leading
                return .mapping(entries, trailing: trailing)
            case .sequence(var items, let trailing):
                if items.isEmpty { return .sequence([], trailing: leading + trailing) }
                items[0].leading = leading + items[0].leading
                return .sequence(items, trailing: trailing)
            }
        }

        static func append(_ rest: [String], to node: Node) -> Node {
            switch node {
            case .mapping(let entries, let trailing): .mapping(entries, trailing: trailing + rest)
            case .sequence(let items, let trailing): .sequence(items, trailing: trailing + rest)
            }
        }

        /// Blank lines (as "") and comment lines (trimmed) up to the next content line.
        mutating func takeLeading() -> [String] {
            var out: [String] = []
            while index < lines.count, Self.isBlankOrComment(lines[index]) {
                out.append(lines[index].trimmingWhitespace())
                index += 1
            }
            return out
        }

        /// The index of the next content line, without consuming anything.
        func nextContent(from start: Int) -> Int? {
            var i = start
            while i < lines.count, Self.isBlankOrComment(lines[i]) { i += 1 }
            return i < lines.count ? i : nil
        }

        mutating func parseBlock(indent: Int) throws(NorqError) -> Node {
            let text = lines[index].dropFirst(indent)
            if text == "-" || text.hasPrefix("- ") { return try parseSequence(indent: indent) }
            return try parseMapping(indent: indent, firstOverride: nil)
        }

        /// A mapping whose entries start at column `indent`. `firstOverride`: the first entry's text when it sits
        /// after a sequence dash (`- key: value`).
        mutating func parseMapping(indent: Int, firstOverride: String?) throws(NorqError) -> Node {
            var entries: [Entry] = []
            var pendingText = firstOverride
            while true {
                var leading: [String] = []
                let text: String
                let lineNumber: Int
                if let override = pendingText {
                    text = override
                    lineNumber = index
                    pendingText = nil
                } else {
                    guard let next = nextContent(from: index), Self.indent(lines[next]) == indent,
                          !lines[next].dropFirst(indent).hasPrefix("- "), lines[next].dropFirst(indent) != "-" else {
                        break
                    }
                    leading = takeLeading()
                    text = String(lines[index].dropFirst(indent))
                    lineNumber = index
                }
                index += 1
                guard let (key, rest) = Self.splitKey(text) else {
                    throw unsupported("a line that is not `key: value` (a plain scalar continued on this line?)",
                                      line: lineNumber)
                }
                if key.hasPrefix("? ") || key.hasPrefix("&") || key.hasPrefix("*") || key.hasPrefix("!") {
                    throw unsupported("complex keys, anchors, aliases or tags", line: lineNumber)
                }
                let value = try parseValue(rest, parentIndent: indent, line: lineNumber, allowSameIndentSequence: true)
                entries.append(Entry(leading: leading, key: Self.unquote(key), value: value))
            }
            return .mapping(entries, trailing: [])
        }

        mutating func parseSequence(indent: Int) throws(NorqError) -> Node {
            var items: [Item] = []
            while let next = nextContent(from: index), Self.indent(lines[next]) == indent {
                let text = lines[next].dropFirst(indent)
                guard text == "-" || text.hasPrefix("- ") else { break }
                let leading = takeLeading()
                let lineNumber = index
                let rest = text == "-" ? "" : String(text.dropFirst(2)).trimmingWhitespace()
                let itemIndent = indent + 2
                if !rest.isEmpty, !rest.hasPrefix("#"), !rest.hasPrefix("\""), !rest.hasPrefix("'"),
                   !rest.hasPrefix("{"), !rest.hasPrefix("["), Self.splitKey(rest) != nil {
                    // `- key: value`: a mapping whose first entry is on the dash line.
                    let offset = text.count - String(text.dropFirst(2)).count
                    let node = try parseMapping(indent: indent + offset, firstOverride: rest)
                    items.append(Item(leading: leading, value: .block(node, comment: nil)))
                    continue
                }
                if rest.hasPrefix("- ") { throw unsupported("a sequence nested on one dash line", line: lineNumber) }
                index += 1
                let value = try parseValue(rest, parentIndent: itemIndent - 1, line: lineNumber,
                                           allowSameIndentSequence: false)
                items.append(Item(leading: leading, value: value))
            }
            return .sequence(items, trailing: [])
        }

        /// The value after `key:` (or `- `): a scalar, a block scalar, or a nested block on the following lines.
        mutating func parseValue(_ rest: String, parentIndent: Int, line: Int,
                                 allowSameIndentSequence: Bool) throws(NorqError) -> Value {
            let (scalar, comment) = Self.splitComment(rest)
            if let first = scalar.first, first == "&" || first == "*" || first == "!" {
                throw unsupported("anchors, aliases or tags", line: line)
            }
            if let first = scalar.first, first == "|" || first == ">" {
                return .literal(header: rest, lines: takeBlockScalar(parentIndent: parentIndent))
            }
            if !scalar.isEmpty {
                if (scalar.hasPrefix("\"") && (scalar.count < 2 || !scalar.hasSuffix("\"")))
                    || (scalar.hasPrefix("'") && (scalar.count < 2 || !scalar.hasSuffix("'"))) {
                    throw unsupported("a quoted scalar over several lines", line: line)
                }
                if (scalar.hasPrefix("[") && !scalar.hasSuffix("]")) || (scalar.hasPrefix("{") && !scalar.hasSuffix("}")) {
                    throw unsupported("a flow collection over several lines", line: line)
                }
                if let next = nextContent(from: index), Self.indent(lines[next]) > parentIndent {
                    throw unsupported("a plain scalar continued on the next line", line: next)
                }
                return .scalar(scalar, comment: comment)
            }
            guard let next = nextContent(from: index) else { return .scalar("", comment: comment) }
            let childIndent = Self.indent(lines[next])
            let childText = lines[next].dropFirst(childIndent)
            let isSequence = childText == "-" || childText.hasPrefix("- ")
            if childIndent > parentIndent || (allowSameIndentSequence && childIndent == parentIndent && isSequence) {
                let leading = takeLeading()
                let node = try parseBlock(indent: childIndent)
                return .block(Self.prepend(leading, to: node), comment: comment)
            }
            return .scalar("", comment: comment)
        }

        /// The lines of a block scalar (more indented than its key, blank lines inside kept), relative to the
        /// indentation of its first line.
        mutating func takeBlockScalar(parentIndent: Int) -> [String] {
            var raw: [String] = []
            while index < lines.count {
                let line = lines[index]
                if line.trimmingWhitespace().isEmpty {
                    raw.append("")
                    index += 1
                    continue
                }
                guard Self.indent(line) > parentIndent else { break }
                raw.append(line)
                index += 1
            }
            // Trailing blank lines belong to what follows.
            var blanks = 0
            while raw.last == "" { raw.removeLast(); blanks += 1 }
            index -= blanks
            let base = raw.filter { !$0.isEmpty }.map(Self.indent).min() ?? 0
            return raw.map { $0.isEmpty ? "" : String($0.dropFirst(base)) }
        }

        /// `key: rest` split at the first `:` followed by a space or the end, outside quotes; nil when none.
        static func splitKey(_ text: String) -> (String, String)? {
            var quote: Character?
            var previous: Character = " "
            let characters = Array(text)
            for (i, c) in characters.enumerated() {
                if let q = quote {
                    if c == q { quote = nil }
                } else if (c == "\"" || c == "'") && i == 0 {
                    quote = c
                } else if c == "#" && previous == " " {
                    return nil
                } else if c == ":" && (i + 1 == characters.count || characters[i + 1] == " ") {
                    let key = String(characters[..<i]).trimmingWhitespace()
                    guard !key.isEmpty, !key.hasPrefix("{"), !key.hasPrefix("[") else { return nil }
                    return (key, String(characters[(i + 1)...]).trimmingWhitespace())
                }
                previous = c
            }
            return nil
        }

        /// A value and its trailing ` # comment`, split outside quotes and flow brackets.
        static func splitComment(_ text: String) -> (String, String?) {
            var quote: Character?
            var previous: Character = " "
            for (offset, c) in text.enumerated() {
                if let q = quote {
                    if c == q { quote = nil }
                } else if c == "\"" || c == "'" {
                    if previous == " " || previous == "[" || previous == "{" || previous == "," || offset == 0 { quote = c }
                } else if c == "#" && previous == " " {
                    let index = text.index(text.startIndex, offsetBy: offset)
                    return (String(text[..<index]).trimmingWhitespace(), String(text[index...]))
                }
                previous = c
            }
            return (text.trimmingWhitespace(), nil)
        }

        static func unquote(_ key: String) -> String {
            if key.count >= 2, key.hasPrefix("\""), key.hasSuffix("\""), !key.contains("\\") {
                return String(key.dropFirst().dropLast())
            }
            if key.count >= 2, key.hasPrefix("'"), key.hasSuffix("'") {
                return String(key.dropFirst().dropLast()).replacingOccurrences(of: "''", with: "'")
            }
            return key
        }
    }
}

extension NorqError.Code {
    /// `norq fmt`: a YAML construct the canonical layout does not handle; the file is left unchanged.
    public static let fmtUnsupported: Self = "template/fmt-unsupported"
}
