public import NorqCore
public import OrderedCollections
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A notification's `data.schema.yaml`: JSON Schema (draft 2020-12) written in YAML, the subset Norq
/// templates use. As in Norq, a property not listed in `required` is nullable (absent or `null`); a required
/// one must be present and not null unless its `type` allows `null`.
///
/// Understood keywords: `type` (a name or a list), `properties`, `required`, `additionalProperties` (a
/// boolean or a schema), `items`, `enum`, `const`, `oneOf` / `anyOf`, `minLength`, `maxLength`, `minimum`,
/// `maximum`, `minItems`, `maxItems`, `pattern` (an ECMA-262-style regular expression, unanchored, as Swift's
/// `Regex` reads it), `format` (an annotation in validation, as
/// draft 2020-12 and Norq's validator have it; ``formatMismatches(_:)`` checks `date-time`, `date`, `time`,
/// `email`, `uri`, `uuid`, `ipv4` for `norq lint`'s `template/data-format` warning), `$ref` to `#`, `#/$defs/<name>` or
/// `#/definitions/<name>` of the same file, with `$defs` / `definitions`; annotations (`$schema`, `$id`,
/// `$comment`, `title`, `description`, `default`, `examples`, `deprecated`, `readOnly`, `writeOnly`) are accepted
/// and ignored. Any other keyword (or a `$ref` to another file) is `template/invalid-schema` with its
/// file:line:col, so that a constraint is never silently dropped. No maintained Swift JSON Schema validator is in
/// the package mirror, so this one is ours.
public struct DataSchema: Sendable {
    /// One schema node.
    public indirect enum Node: Sendable {
        case schema(Rules)
        /// `true` (anything) or `false` (nothing).
        case boolean(Bool)
    }

    /// The constraints of one schema object.
    public struct Rules: Sendable {
        public var types: Set<String>?
        public var properties: OrderedDictionary<String, Node> = [:]
        public var required: Set<String> = []
        public var additionalProperties: Bool = true
        public var items: Node?
        public var enumValues: [JSONValue]?
        public var constValue: JSONValue?
        public var oneOf: [Node]?
        public var anyOf: [Node]?
        public var minLength: Int?
        public var maxLength: Int?
        public var minimum: Double?
        public var maximum: Double?
        public var minItems: Int?
        public var maxItems: Int?
        /// `pattern`, as written.
        public var pattern: String?
        /// `format`, as written (asserted only for the formats listed on ``DataSchema``).
        public var format: String?
        /// `$ref`, normalized to a key of the schema's definitions (`#`, `#/$defs/name`).
        public var reference: String?
        /// `additionalProperties` given as a schema: what properties not listed must match.
        public var additionalSchema: Node?
        var regex: PatternBox?
        var location: SourceLocation
        var propertyLocations: [String: SourceLocation] = [:]
    }

    public let root: Node
    /// The schema file, for messages.
    public let file: String?
    /// The schemas `$ref` can name: `#` (the root) and each `#/$defs/<name>` / `#/definitions/<name>`.
    public private(set) var definitions: [String: Node] = [:]
    /// Whether `format` mismatches are reported (``formatMismatches(_:)``), as `template/data-format`.
    var assertFormats = false

    /// A compiled `pattern`. A `Regex` is not `Sendable`: matches take the lock (a schema is checked by one
    /// sample at a time; contention is rare and short).
    final class PatternBox: Sendable {
        private let regex: Mutex<Regex<AnyRegexOutput>>
        init(_ regex: sending Regex<AnyRegexOutput>) { self.regex = Mutex(regex) }
        func matches(in text: String) -> Bool {
            regex.withLock { (try? $0.firstMatch(in: text)) != nil }
        }
    }

    static let annotations: Set<String> = ["$schema", "$id", "$comment", "title", "description", "default",
                                           "examples", "deprecated", "readOnly", "writeOnly"]
    static let keywords = ["type", "properties", "required", "additionalProperties", "items", "enum", "const",
                           "oneOf", "anyOf", "minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems",
                           "pattern", "format", "$ref", "$defs", "definitions"]
    /// The `format` values checked (others are annotations).
    public static let assertedFormats: Set<String> = ["date-time", "date", "time", "email", "uri", "uuid", "ipv4"]
    static let typeNames: Set<String> = ["string", "number", "integer", "boolean", "object", "array", "null"]
    /// Most nested schema objects (bounds the work a hostile file can cause).
    public static let maximumDepth = 32

    /// Parses the text of `data.schema.yaml`. An empty file is the schema that accepts anything.
    public init(yaml: String, file: String?) throws(NorqError) {
        self.file = file
        try Self.prescan(yaml, file: file)
        guard let tree = try YAMLTree.parse(yaml, file: file, errorCode: .templateInvalidSchema) else {
            root = .boolean(true)
            return
        }
        var definitions: [String: Node] = [:]
        var references: [(String, SourceLocation)] = []
        root = try Self.parse(tree, depth: 0, definitions: &definitions, references: &references)
        definitions["#"] = root
        for (reference, location) in references where definitions[reference] == nil {
            throw Self.invalid("$ref \"\(reference.prefix(80))\" names no schema of this file", location,
                               hint: definitions.keys.filter { $0 != "#" }.isEmpty
                                   ? "define it under $defs" : "defined: " + definitions.keys.sorted().joined(separator: ", "))
        }
        self.definitions = definitions
    }

    /// Largest accepted schema file.
    public static let maximumBytes = 256 * 1024

    /// Refuses, before the YAML parser sees them, files that are too large or nest too deeply (flow brackets,
    /// indentation, compact `- - -` sequences), which could exhaust the parser's stack.
    static func prescan(_ text: String, file: String?) throws(NorqError) {
        guard text.utf8.count <= maximumBytes else {
            throw invalid("data.schema.yaml is larger than \(maximumBytes) bytes", SourceLocation(file: file, line: 1, column: 1))
        }
        // Brackets are counted even inside quotes: conservative (a schema has no reason for 64 of them).
        var flow = 0, line = 1, column = 0, atLineStart = true, indent = 0, dashes = 0
        for byte in text.utf8 {
            column += 1
            if byte == 10 {
                line += 1; column = 0; atLineStart = true; indent = 0; dashes = 0
                continue
            }
            if atLineStart {
                if byte == 32 { indent += 1 } else if byte == 45 { dashes += 1 } else { atLineStart = false }
                if indent > 2 * maximumDepth + 16 || dashes > maximumDepth {
                    throw invalid("data.schema.yaml nests more than \(maximumDepth) levels",
                                  SourceLocation(file: file, line: line, column: column))
                }
            }
            switch byte {
            case 91, 123:
                flow += 1
                if flow > maximumDepth {
                    throw invalid("data.schema.yaml nests more than \(maximumDepth) levels",
                                  SourceLocation(file: file, line: line, column: column))
                }
            case 93, 125: flow = max(0, flow - 1)
            default: break
            }
        }
    }

    static func invalid(_ message: String, _ location: SourceLocation, hint: String? = nil) -> NorqError {
        NorqError(.templateInvalidSchema, message, at: location, hint: hint)
    }

    static func parse(_ tree: YAMLTree, depth: Int, definitions: inout [String: Node],
                      references: inout [(String, SourceLocation)]) throws(NorqError) -> Node {
        guard depth < maximumDepth else {
            throw invalid("data.schema.yaml nests more than \(maximumDepth) levels", tree.location)
        }
        if case .bool(let b) = tree.kind { return .boolean(b) }
        guard let object = tree.object else {
            throw invalid("a schema must be a mapping (or true/false)", tree.location)
        }
        var rules = Rules(location: tree.location)
        for (key, value) in object {
            let at = tree.keyLocation(key)
            switch key {
            case _ where annotations.contains(key): continue
            case "type":
                var names: [String] = []
                switch value.kind {
                case .string(let s): names = [s]
                case .array(let items):
                    for item in items {
                        guard case .string(let s) = item.kind else { throw invalid("type must list type names", item.location) }
                        names.append(s)
                    }
                default: throw invalid("type must be a type name or a list of them", value.location)
                }
                for name in names where !typeNames.contains(name) {
                    throw invalid("unknown type \"\(name.prefix(40))\"", value.location,
                                  hint: "one of " + typeNames.sorted().joined(separator: ", "))
                }
                rules.types = Set(names)
            case "properties":
                guard let properties = value.object else { throw invalid("properties must be a mapping", value.location) }
                for (name, schema) in properties {
                    rules.properties[name] = try parse(schema, depth: depth + 1, definitions: &definitions, references: &references)
                    rules.propertyLocations[name] = value.keyLocation(name)
                }
            case "required":
                guard case .array(let items) = value.kind else { throw invalid("required must be a list of names", value.location) }
                for item in items {
                    guard case .string(let s) = item.kind else { throw invalid("required must list property names", item.location) }
                    rules.required.insert(s)
                }
            case "additionalProperties":
                if case .bool(let b) = value.kind {
                    rules.additionalProperties = b
                } else {
                    rules.additionalSchema = try parse(value, depth: depth + 1, definitions: &definitions,
                                                       references: &references)
                }
            case "pattern":
                guard case .string(let pattern) = value.kind else { throw invalid("pattern must be a string", value.location) }
                do {
                    rules.regex = PatternBox(try Regex(pattern))
                } catch {
                    throw invalid("pattern \"\(pattern.prefix(60))\" is not a regular expression this router reads",
                                  value.location)
                }
                rules.pattern = pattern
            case "format":
                guard case .string(let format) = value.kind else { throw invalid("format must be a string", value.location) }
                rules.format = format
            case "$ref":
                guard case .string(let reference) = value.kind else { throw invalid("$ref must be a string", value.location) }
                let normalized = reference.replacingOccurrences(of: "#/definitions/", with: "#/$defs/")
                guard normalized == "#" || normalized.hasPrefix("#/$defs/") else {
                    throw invalid("$ref \"\(reference.prefix(80))\" is not supported: only #, #/$defs/<name> and #/definitions/<name> of the same file",
                                  value.location)
                }
                rules.reference = normalized
                references.append((normalized, value.location))
            case "$defs", "definitions":
                guard let defined = value.object else { throw invalid("\(key) must be a mapping of schemas", value.location) }
                for (name, schema) in defined {
                    definitions["#/$defs/" + name] = try parse(schema, depth: depth + 1, definitions: &definitions,
                                                                references: &references)
                }
            case "items": rules.items = try parse(value, depth: depth + 1, definitions: &definitions, references: &references)
            case "enum":
                guard case .array(let items) = value.kind else { throw invalid("enum must be a list", value.location) }
                rules.enumValues = items.map(\.json)
            case "const": rules.constValue = value.json
            case "oneOf", "anyOf":
                guard case .array(let items) = value.kind, !items.isEmpty else {
                    throw invalid("\(key) must be a non-empty list of schemas", value.location)
                }
                var nodes: [Node] = []
                for item in items { nodes.append(try parse(item, depth: depth + 1, definitions: &definitions, references: &references)) }
                if key == "oneOf" { rules.oneOf = nodes } else { rules.anyOf = nodes }
            case "minLength", "maxLength", "minItems", "maxItems":
                guard case .int(let i) = value.kind, i >= 0, i <= Int64(Int32.max) else {
                    throw invalid("\(key) must be a non-negative integer", value.location)
                }
                switch key {
                case "minLength": rules.minLength = Int(i)
                case "maxLength": rules.maxLength = Int(i)
                case "minItems": rules.minItems = Int(i)
                default: rules.maxItems = Int(i)
                }
            case "minimum", "maximum":
                let number: Double
                switch value.kind {
                case .int(let i): number = Double(i)
                case .double(let d) where d.isFinite: number = d
                default: throw invalid("\(key) must be a number", value.location)
                }
                if key == "minimum" { rules.minimum = number } else { rules.maximum = number }
            default:
                let suggestion = ConfigNode.suggestion(for: key, among: keywords)
                throw invalid("schema keyword \"\(key.prefix(40))\" is not supported", at,
                              hint: suggestion.map { "did you mean \"\($0)\"?" }
                                  ?? "supported: " + keywords.joined(separator: ", "))
            }
        }
        return .schema(rules)
    }

    // MARK: - Validation

    /// The mismatches of `data` with the schema (at most `limit`), each `template/data-schema` naming the
    /// data path and, where known, the schema file line. Empty when the data conforms.
    public func validate(_ data: JSONValue, limit: Int = 20) -> [NorqError] {
        var errors: [NorqError] = []
        var budget = Self.validationBudget
        check(data, against: root, path: "data", errors: &errors, limit: limit, budget: &budget)
        if budget < 0 {
            errors.append(NorqError(.templateDataSchema,
                                    "data: validation stopped after \(Self.validationBudget) checks (a very large value or a schema with many nested oneOf/anyOf)",
                                    at: SourceLocation(file: file)))
        }
        return errors
    }

    /// Most value-against-schema checks one validation makes (nested `oneOf` multiply).
    public static let validationBudget = 200_000

    /// The strings of `data` that do not match their `format` (`date-time`, `date`, `time`, `email`, `uri`,
    /// `uuid`, `ipv4`), each `template/data-format`: what `norq lint` warns about in a sample. Not part of
    /// ``validate(_:limit:)``: in draft 2020-12 `format` is an annotation.
    public func formatMismatches(_ data: JSONValue, limit: Int = 20) -> [NorqError] {
        var asserting = self
        asserting.assertFormats = true
        return asserting.validate(data, limit: limit).filter { $0.code == .templateDataFormat }
    }

    /// Whether `data` conforms (no error).
    public func conforms(_ data: JSONValue) -> Bool { validate(data, limit: 1).isEmpty }

    /// - Parameter references: `$ref`s followed in a row on this same value (bounded: `$ref: "#"` at the root
    ///   would recurse forever).
    func check(_ value: JSONValue, against node: Node, path: String, errors: inout [NorqError], limit: Int,
               budget: inout Int, references: Int = 0) {
        budget -= 1
        guard errors.count < limit, budget >= 0 else { return }
        func fail(_ message: String, _ location: SourceLocation?) {
            errors.append(NorqError(.templateDataSchema, "\(path): \(message)",
                                    at: location ?? SourceLocation(file: file)))
        }
        let rules: Rules
        switch node {
        case .boolean(true): return
        case .boolean(false): fail("no value is allowed here", nil); return
        case .schema(let r): rules = r
        }
        let at = rules.location
        if let reference = rules.reference, let target = definitions[reference] {
            guard references < Self.maximumDepth else {
                fail("$ref \(reference) refers to itself without consuming the value (\(Self.maximumDepth) in a row)", at)
                return
            }
            check(value, against: target, path: path, errors: &errors, limit: limit, budget: &budget,
                  references: references + 1)
        }
        if let types = rules.types, !Self.matches(value, types: types) {
            fail("expected \(types.sorted().joined(separator: " or ")), got \(Self.kind(of: value))", at)
            return
        }
        if let values = rules.enumValues, !values.contains(value) {
            fail("\(Self.short(value)) is not one of \(values.map(Self.short).joined(separator: ", "))", at)
        }
        if let constant = rules.constValue, constant != value {
            fail("must be \(Self.short(constant)), got \(Self.short(value))", at)
        }
        if let options = rules.oneOf {
            let matching = options.count { option in
                var scratch: [NorqError] = []
                check(value, against: option, path: path, errors: &scratch, limit: 1, budget: &budget)
                return scratch.isEmpty
            }
            if matching != 1 { fail("matches \(matching) of the oneOf schemas, not exactly one", at) }
        }
        if let options = rules.anyOf {
            let any = options.contains { option in
                var scratch: [NorqError] = []
                check(value, against: option, path: path, errors: &scratch, limit: 1, budget: &budget)
                return scratch.isEmpty
            }
            if !any { fail("matches none of the anyOf schemas", at) }
        }
        switch value {
        case .string(let s):
            let length = s.count
            if let min = rules.minLength, length < min { fail("is \(length) characters; the minimum is \(min)", at) }
            if let max = rules.maxLength, length > max { fail("is \(length) characters; the maximum is \(max)", at) }
            if let box = rules.regex, let pattern = rules.pattern, !box.matches(in: s) {
                fail("\(Self.short(value)) does not match pattern \(pattern)", at)
            }
            if assertFormats, let format = rules.format, !Self.conforms(s, format: format) {
                errors.append(NorqError(.templateDataFormat, "\(path): \(Self.short(value)) is not a valid \(format)",
                                        at: at))
            }
        case .int(let i):
            let number = Double(i)
            if let min = rules.minimum, number < min { fail("\(Self.short(value)) is less than \(NumberFormat.plain(min))", at) }
            if let max = rules.maximum, number > max { fail("\(Self.short(value)) is more than \(NumberFormat.plain(max))", at) }
        case .double(let number):
            if let min = rules.minimum, number < min { fail("\(Self.short(value)) is less than \(NumberFormat.plain(min))", at) }
            if let max = rules.maximum, number > max { fail("\(Self.short(value)) is more than \(NumberFormat.plain(max))", at) }
        case .array(let items):
            if let min = rules.minItems, items.count < min { fail("has \(items.count) items; the minimum is \(min)", at) }
            if let max = rules.maxItems, items.count > max { fail("has \(items.count) items; the maximum is \(max)", at) }
            if let itemSchema = rules.items {
                for (index, item) in items.enumerated() {
                    check(item, against: itemSchema, path: "\(path)[\(index)]", errors: &errors, limit: limit,
                          budget: &budget)
                }
            }
        case .object(let object):
            for name in rules.required.sorted() {
                let location = rules.propertyLocations[name] ?? at
                guard let member = object[name] else {
                    fail("is missing required \"\(name)\"", location)
                    continue
                }
                if case .null = member, !Self.allowsNull(rules.properties[name]) {
                    fail("required \"\(name)\" is null", location)
                }
            }
            for (name, member) in object {
                if let schema = rules.properties[name] {
                    // Not required: nullable, as Norq defines it; a required null was reported above.
                    if case .null = member { continue }
                    check(member, against: schema, path: "\(path).\(name)", errors: &errors, limit: limit,
                          budget: &budget)
                } else if let extra = rules.additionalSchema {
                    check(member, against: extra, path: "\(path).\(name)", errors: &errors, limit: limit,
                          budget: &budget)
                } else if !rules.additionalProperties {
                    fail("has \"\(name)\", which the schema does not list (additionalProperties: false)", at)
                }
            }
        default: break
        }
    }

    /// Whether `text` is a valid `format` (true for a format that is not asserted).
    static func conforms(_ text: String, format: String) -> Bool {
        let patterns: [String: String] = [
            "date-time": #"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"#,
            "date": #"^\d{4}-\d{2}-\d{2}$"#,
            "time": #"^\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?$"#,
            "email": #"^[^@\s]+@[^@\s]+\.[^@\s]+$"#,
            "uri": #"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]*$"#,
            "uuid": #"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"#,
            "ipv4": #"^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$"#,
        ]
        guard let pattern = patterns[format], let regex = try? Regex(pattern) else { return true }
        return (try? regex.wholeMatch(in: text)) != nil
    }

    static func allowsNull(_ node: Node?) -> Bool {
        switch node {
        case nil, .boolean(true)?: return true
        case .boolean(false)?: return false
        case .schema(let rules)?:
            if let types = rules.types { return types.contains("null") }
            for option in (rules.oneOf ?? []) + (rules.anyOf ?? []) where allowsNull(option) { return true }
            return rules.oneOf == nil && rules.anyOf == nil
        }
    }

    static func matches(_ value: JSONValue, types: Set<String>) -> Bool {
        switch value {
        case .null: types.contains("null")
        case .bool: types.contains("boolean")
        case .int: types.contains("integer") || types.contains("number")
        case .double(let d): types.contains("number") || (types.contains("integer") && d == d.rounded())
        case .string: types.contains("string")
        case .array: types.contains("array")
        case .object: types.contains("object")
        }
    }

    static func kind(of value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "boolean"
        case .int: "integer"
        case .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    static func short(_ value: JSONValue) -> String {
        let text = String(decoding: value.serialized(), as: UTF8.self)
        return text.count > 40 ? String(text.prefix(37)) + "..." : text
    }

    // MARK: - Nullable fields

    /// Dot paths of the nullable fields (not in their object's `required`), e.g. `user.last_name`.
    public var nullablePaths: Set<String> {
        var out = Set<String>()
        Self.collectNullable(root, prefix: "", into: &out, depth: 0)
        return out
    }

    static func collectNullable(_ node: Node, prefix: String, into out: inout Set<String>, depth: Int) {
        guard depth < maximumDepth, case .schema(let rules) = node else { return }
        for (name, child) in rules.properties {
            let path = prefix.isEmpty ? name : prefix + "." + name
            if !rules.required.contains(name) || allowsNullExplicitly(child) { out.insert(path) }
            collectNullable(child, prefix: path, into: &out, depth: depth + 1)
        }
    }

    static func allowsNullExplicitly(_ node: Node) -> Bool {
        guard case .schema(let rules) = node else { return false }
        if let types = rules.types, types.contains("null") { return true }
        return ((rules.oneOf ?? []) + (rules.anyOf ?? [])).contains { option in
            if case .schema(let r) = option, r.types == ["null"] { return true }
            return false
        }
    }
}
