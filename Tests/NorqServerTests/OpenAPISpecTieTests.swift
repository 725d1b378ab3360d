import NorqAPI
import NorqCore
@testable import NorqServer
import Testing

/// The server and docs/openapi.yaml cannot drift apart (issue 33, spec-first API): the routes the server registers
/// are the spec's paths and methods, the request fields it accepts are its request schemas' properties, and the
/// properties it writes as `null` are the ones the spec allows to be null. (The answers' shapes are the generated
/// types themselves: a renamed property does not compile.)
@Suite struct OpenAPISpecTieTests {
    static let methods: Set<String> = ["get", "put", "post", "delete", "patch", "head", "options", "trace"]

    /// `NorqServer.routeMethods` (which `allowedMethods` answers 405 from) against the spec, both directions.
    @Test func theRoutesAreExactlyTheSpecsPathsAndMethods() throws {
        let contract = try OpenAPIContract.load()
        var documented: Set<String> = []
        for (path, item) in contract.paths {
            guard case .object(let operations) = item else { continue }
            for method in operations.keys where Self.methods.contains(method) {
                documented.insert("\(method.uppercased()) \(path)")
            }
        }
        var served: Set<String> = []
        for route in NorqServer.routeMethods {
            let path = "/" + route.path.map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }.joined(separator: "/")
            for method in route.methods { served.insert("\(method) \(path)") }
        }
        #expect(served.subtracting(documented).isEmpty, "served, not in docs/openapi.yaml: \(served.subtracting(documented).sorted())")
        #expect(documented.subtracting(served).isEmpty, "in docs/openapi.yaml, not served: \(documented.subtracting(served).sorted())")
        #expect(documented.count == 12)
    }

    /// Every request body schema of the spec (and the schemas they refer to, such as `SendOptions`) accepts exactly
    /// the fields the server checks bodies against (`RequestFields`), and refuses others (`additionalProperties:
    /// false`, as the server's `server/invalid-request` for an unknown field).
    @Test func theAcceptedRequestFieldsAreTheSpecsProperties() throws {
        let contract = try OpenAPIContract.load()
        var names: Set<String> = []
        var pending: [JSONValue] = []
        for (_, item) in contract.paths {
            guard case .object(let operations) = item else { continue }
            for (_, operation) in operations {
                if let schema = operation["requestBody"]?["content"]?["application/json"]?["schema"] { pending.append(schema) }
            }
        }
        while let node = pending.popLast() {
            for name in Self.references(in: node) where names.insert(name).inserted {
                pending.append(contract.schemas[name] ?? .null)
            }
        }
        #expect(names == Set(RequestFields.bySchema.keys), "request schemas: \(names.sorted())")
        for name in names.sorted() {
            let schema = try #require(contract.schemas[name], "\(name)")
            guard case .object(let properties) = schema["properties"] ?? .null else {
                Issue.record("\(name) has no properties")
                continue
            }
            #expect(Set(properties.keys) == RequestFields.bySchema[name], "\(name): the spec has \(properties.keys.sorted())")
            #expect(schema["additionalProperties"] == .bool(false), "\(name) must refuse unknown fields")
        }
        // The handlers' own names for them.
        #expect(SendRequest.fields == RequestFields.bySchema["SendRequest"])
        #expect(SendRequest.optionFields == RequestFields.bySchema["SendOptions"])
    }

    /// `APIDocuments.nullable` (the properties the encoder writes as `null` when nil) is, schema by schema, every
    /// property of an answer whose `type` lists `null`.
    @Test func theNullPropertiesAreTheSpecsNullableOnes() throws {
        let contract = try OpenAPIContract.load()
        // The schemas of the answers: those the responses refer to, and the ones they refer to.
        var names: Set<String> = []
        var pending: [JSONValue] = []
        for (_, item) in contract.paths {
            guard case .object(let operations) = item else { continue }
            for (_, operation) in operations { if let responses = operation["responses"] { pending.append(responses) } }
        }
        while let node = pending.popLast() {
            for name in Self.references(in: node) where names.insert(name).inserted {
                pending.append(contract.schemas[name] ?? .null)
            }
        }
        #expect(names.contains("Row") && names.contains("Tokens") && !names.contains("SendRequest"))
        var documented: [String: Set<String>] = [:]
        func walk(_ node: JSONValue, _ location: String) {
            guard node["$ref"] == nil else { return }  // a named schema is walked under its own name
            if case .object(let properties) = node["properties"] ?? .null {
                let nullable = properties.filter { _, property in
                    if case .array(let types) = property["type"] ?? .null { return types.contains(.string("null")) }
                    return false
                }
                if !nullable.isEmpty { documented[location] = Set(nullable.keys) }
                for (name, property) in properties { walk(property, "\(location).\(name)") }
            }
            if let items = node["items"] { walk(items, "\(location)[]") }
        }
        for name in names { walk(contract.schemas[name] ?? .null, name) }
        var served: [String: Set<String>] = [:]
        for entry in APIDocuments.nullable { served[entry.schema] = entry.properties }
        #expect(served == documented)
    }

    /// A nil property is `null` where the spec allows it and absent elsewhere; keys are sorted.
    @Test func nilIsNullOnlyWhereTheSpecAllowsIt() throws {
        let row = Components.Schemas.Row(position: 3, token: "abcd...ef", state: .pending, attempts: 0,
                                         mayHaveBeenDelivered: false)
        let json = try #require(ServerJSON.json(row))
        for key in ["recipient", "provider", "messageId", "status", "code", "reason"] {
            #expect(json[key] == .null, "\(key)")
        }
        #expect(String(decoding: json.serialized(), as: UTF8.self).hasPrefix(#"{"attempts":0,"code":null,"#))
        let summary = Components.Schemas.Summary(delivered: 1, rejected: 0, failed: 0, skipped: 0, duplicates: 0,
                                                 allDelivered: true)
        let summaryJSON = try #require(ServerJSON.json(summary))
        #expect(summaryJSON["accepted"] == nil && summaryJSON["delivered"] == .int(1))
        let page = Components.Schemas.SendStatus.PagePayload(offset: 0, limit: 100)
        #expect(ServerJSON.json(page)?["next"] == .null)
        // A free-form part keeps its nulls and nesting.
        let target = APIDocuments.freeForm(["token": "abcd", "environment": .null, "n": [1, 2.5, ["x": true]]])
        #expect(ServerJSON.json(target) == ["environment": .null, "n": [1, 2.5, ["x": true]], "token": "abcd"])
    }

    /// The `$ref` names anywhere in `node`.
    static func references(in node: JSONValue) -> [String] {
        switch node {
        case .object(let object):
            var found: [String] = []
            for (key, value) in object {
                if key == "$ref", let ref = value.stringValue { found.append(String(ref.split(separator: "/").last ?? "")) }
                found += references(in: value)
            }
            return found
        case .array(let items):
            return items.flatMap(references(in:))
        default:
            return []
        }
    }
}
