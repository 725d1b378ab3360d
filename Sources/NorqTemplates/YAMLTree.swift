import NorqCore
import OrderedCollections
import Yams

/// A YAML value with its source position, decoupled from Yams for the rest of the module.
struct YAMLTree: Sendable {
    enum Kind: Sendable {
        case null
        case bool(Bool)
        case int(Int64)
        case double(Double)
        case string(String)
        case array([YAMLTree])
        case object(OrderedDictionary<String, YAMLTree>, keyLocations: [String: SourceLocation])
    }
    var kind: Kind
    var location: SourceLocation

    /// Parses a YAML document. `lineOffset` shifts reported lines (frontmatter starts after `---`).
    static func parse(_ text: String, file: String?, lineOffset: Int = 0,
                      errorCode: NorqError.Code) throws(NorqError) -> YAMLTree? {
        let node: Node?
        do {
            node = try Yams.compose(yaml: text)
        } catch {
            var location = SourceLocation(file: file, line: lineOffset + 1, column: 0)
            var message = "invalid YAML"
            if let yamlError = error as? YamlError {
                switch yamlError {
                case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _),
                     .composer(_, let problem, let mark, _):
                    location = SourceLocation(file: file, line: mark.line + lineOffset, column: mark.column)
                    message += ": \(problem)"
                case .duplicatedKeysInMapping(let duplicates, _):
                    message += ": duplicated keys \(duplicates.joined(separator: ", "))"
                default: break
                }
            }
            throw NorqError(errorCode, message, at: location)
        }
        guard let node else { return nil }
        return try convert(node, file: file, lineOffset: lineOffset, errorCode: errorCode, depth: 0)
    }

    private static func convert(_ node: Node, file: String?, lineOffset: Int, errorCode: NorqError.Code,
                                depth: Int) throws(NorqError) -> YAMLTree {
        let location = SourceLocation(file: file, line: (node.mark?.line ?? 0) + lineOffset,
                                      column: node.mark?.column ?? 0)
        guard depth < 64 else { throw NorqError(errorCode, "YAML nested too deeply", at: location) }
        switch node {
        case .scalar(let scalar):
            let tag = Tag.Name(rawValue: node.tag.rawValue)
            if tag == .str { return YAMLTree(kind: .string(scalar.string), location: location) }
            if tag == .null { return YAMLTree(kind: .null, location: location) }
            if tag == .bool, let b = node.bool { return YAMLTree(kind: .bool(b), location: location) }
            if tag == .int, let i = Int64(scalar.string) { return YAMLTree(kind: .int(i), location: location) }
            if tag == .int, let i = node.int { return YAMLTree(kind: .int(Int64(i)), location: location) }
            if tag == .float, let d = node.float { return YAMLTree(kind: .double(d), location: location) }
            return YAMLTree(kind: .string(scalar.string), location: location)
        case .sequence(let sequence):
            var items: [YAMLTree] = []
            for item in sequence {
                items.append(try convert(item, file: file, lineOffset: lineOffset, errorCode: errorCode,
                                         depth: depth + 1))
            }
            return YAMLTree(kind: .array(items), location: location)
        case .mapping(let mapping):
            var object = OrderedDictionary<String, YAMLTree>()
            var keyLocations: [String: SourceLocation] = [:]
            for (key, value) in mapping {
                guard let name = key.string else {
                    throw NorqError(errorCode, "mapping keys must be strings", at: location)
                }
                object[name] = try convert(value, file: file, lineOffset: lineOffset, errorCode: errorCode,
                                           depth: depth + 1)
                keyLocations[name] = SourceLocation(file: file, line: (key.mark?.line ?? 0) + lineOffset,
                                                    column: key.mark?.column ?? 0)
            }
            return YAMLTree(kind: .object(object, keyLocations: keyLocations), location: location)
        case .alias:
            throw NorqError(errorCode, "YAML aliases are not supported", at: location)
        }
    }

    /// The plain JSON value (locations dropped).
    var json: JSONValue {
        switch kind {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .int(let i): return .int(i)
        case .double(let d): return .double(d)
        case .string(let s): return .string(s)
        case .array(let items): return .array(items.map(\.json))
        case .object(let object, _): return .object(object.mapValues(\.json))
        }
    }

    var object: OrderedDictionary<String, YAMLTree>? {
        if case .object(let o, _) = kind { return o }
        return nil
    }

    func keyLocation(_ key: String) -> SourceLocation {
        if case .object(_, let locations) = kind, let l = locations[key] { return l }
        return location
    }
}
