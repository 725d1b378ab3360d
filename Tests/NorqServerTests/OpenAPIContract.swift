import Foundation
import NorqCore
import Testing
import Yams

/// Checks real answers against docs/openapi.yaml: the status code is documented for the route and method, and
/// a JSON body has every `required` field of the documented schema (followed through `$ref`, nested objects and
/// array items).
struct OpenAPIContract: Sendable {
    let paths: [String: JSONValue]
    let schemas: [String: JSONValue]

    static func load() throws -> OpenAPIContract {
        let url = ServedNorq.packageRoot.appendingPathComponent("docs/openapi.yaml")
        let text = try String(contentsOf: url, encoding: .utf8)
        let document = try #require(try Yams.load(yaml: text))
        let json = convert(document)
        #expect(json["openapi"]?.stringValue?.hasPrefix("3.1") == true, "an OpenAPI 3.1 document")
        var paths: [String: JSONValue] = [:]
        if case .object(let object) = json["paths"] ?? .null { for (key, value) in object { paths[key] = value } }
        var schemas: [String: JSONValue] = [:]
        if case .object(let object) = json["components"]?["schemas"] ?? .null {
            for (key, value) in object { schemas[key] = value }
        }
        return OpenAPIContract(paths: paths, schemas: schemas)
    }

    static func convert(_ value: Any) -> JSONValue {
        switch value {
        case let text as String: return .string(text)
        case let flag as Bool: return .bool(flag)
        case let number as Int: return .int(Int64(number))
        case let number as Double: return .double(number)
        case let list as [Any]: return .array(list.map(convert))
        case let map as [String: Any]:
            return .object(.init(uniqueKeysWithValues: map.sorted { $0.key < $1.key }.map { ($0.key, convert($0.value)) }))
        default: return .null
        }
    }

    /// Records an issue for every way `answer` departs from the document for `method` `path` (a template such as
    /// `/v1/sends/{id}`).
    func check(_ method: String, _ path: String, _ answer: ServedNorq.Answer,
               sourceLocation: Testing.SourceLocation = #_sourceLocation) {
        guard let operation = paths[path]?[method.lowercased()] else {
            Issue.record("\(method) \(path) is not in docs/openapi.yaml", sourceLocation: sourceLocation)
            return
        }
        guard let response = operation["responses"]?["\(answer.status)"] else {
            Issue.record("\(method) \(path) answered \(answer.status), which docs/openapi.yaml does not list",
                         sourceLocation: sourceLocation)
            return
        }
        guard let schema = response["content"]?["application/json"]?["schema"] else { return }
        guard let body = answer.json else {
            Issue.record("\(method) \(path) \(answer.status): the body is not JSON: \(answer.text.prefix(200))",
                         sourceLocation: sourceLocation)
            return
        }
        let problems = missing(body, schema, at: "body")
        #expect(problems.isEmpty, "\(method) \(path) \(answer.status): \(problems.joined(separator: "; "))",
                sourceLocation: sourceLocation)
    }

    func resolve(_ node: JSONValue) -> JSONValue {
        if let ref = node["$ref"]?.stringValue {
            let name = String(ref.split(separator: "/").last ?? "")
            return schemas[name] ?? .null
        }
        return node
    }

    func missing(_ value: JSONValue, _ schemaNode: JSONValue, at path: String) -> [String] {
        let schema = resolve(schemaNode)
        var problems: [String] = []
        if case .array(let required) = schema["required"] ?? .null {
            for field in required.compactMap(\.stringValue) where value[field] == nil {
                problems.append("\(path).\(field) is required")
            }
        }
        if case .object(let properties) = schema["properties"] ?? .null {
            for (name, property) in properties {
                if let child = value[name], child != .null { problems += missing(child, property, at: "\(path).\(name)") }
            }
        }
        if let items = schema["items"], case .array(let elements) = value {
            for (index, element) in elements.prefix(20).enumerated() {
                problems += missing(element, items, at: "\(path)[\(index)]")
            }
        }
        return problems
    }
}
