import NorqCore
import NorqTemplates
import Testing

/// 1,000+ generated `data.schema.yaml` files (mutations of a valid one, token soup, hostile nesting): each
/// parses or fails with `template/invalid-schema` and a location; each parsed one validates generated data
/// without crashing, within its budget.
@Suite struct SchemaFuzzTests {
    struct Mix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let base = """
        $schema: https://json-schema.org/draft/2020-12/schema
        type: object
        required: [order, user]
        properties:
          order:
            type: object
            required: [id]
            properties:
              id: { type: string, minLength: 1, maxLength: 40 }
              total: { type: number, minimum: 0 }
              items:
                type: array
                minItems: 0
                items: { type: object, properties: { name: { type: string } } }
          user:
            oneOf: [{ type: string }, { type: "null" }]
          tier: { enum: [gold, silver, 3, null] }
          flag: { const: true }
          extra: { anyOf: [{ type: integer }, { type: boolean }] }
        additionalProperties: true
        """

    static let tokens = [
        ":", "-", "[", "]", "{", "}", ",", "&a", "*a", "!!str", "|", ">", "'", "\"", "#", " ", "  ", "\n", "\t",
        "type", "properties", "required", "items", "oneOf", "anyOf", "enum", "const", "minimum", "maxLength",
        "additionalProperties", "string", "null", "object", "array", "-1", "1e400", "99999999999999999999", "~",
        "true", "false", "\u{0}", "é", "😀", "pattern", "$ref", "? ", "---",
    ]

    static func corpus(count: Int) -> [String] {
        var rng = Mix(state: 0x5CE3_A17)
        var documents = [
            String(repeating: "[", count: 100_000), String(repeating: "{a: ", count: 20_000),
            String(repeating: "- ", count: 20_000) + "x",
            (0..<500).map { String(repeating: " ", count: $0 * 2) + "properties:\n" + String(repeating: " ", count: $0 * 2 + 2) + "a:" }
                .joined(separator: "\n"),
            (0..<31).map { _ in "oneOf: [{type: string}, " }.joined() + "{}" + String(repeating: "]", count: 31),
            "a: &a [x, x]\nb: [*a, *a]\n", String(repeating: "x", count: 300_000), "", "true", "false", "[]", "7",
        ]
        let lines = base.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        while documents.count < count {
            switch Int.random(in: 0..<4, using: &rng) {
            case 0:
                documents.append((0..<Int.random(in: 0..<50, using: &rng)).map { _ in tokens.randomElement(using: &rng)! }.joined())
            case 1:
                var chars = Array(base)
                for _ in 0..<Int.random(in: 1...6, using: &rng) {
                    let at = Int.random(in: 0..<chars.count, using: &rng)
                    switch Int.random(in: 0..<3, using: &rng) {
                    case 0: chars.insert(contentsOf: Array(tokens.randomElement(using: &rng)!), at: at)
                    case 1: chars.remove(at: at)
                    default: chars[at] = tokens.randomElement(using: &rng)!.first ?? " "
                    }
                }
                documents.append(String(chars))
            case 2:
                var mutated = lines
                let index = Int.random(in: 0..<mutated.count, using: &rng)
                if let colon = mutated[index].firstIndex(of: ":") {
                    mutated[index] = String(mutated[index][...colon]) + " " + tokens.randomElement(using: &rng)!
                }
                documents.append(mutated.joined(separator: "\n"))
            default:
                documents.append(String(base.prefix(Int.random(in: 0..<base.count, using: &rng))))
            }
        }
        return documents
    }

    static let data: [JSONValue] = [
        .null, 1, "x", [], [:], ["order": ["id": "A", "items": [["name": 1], "x"]], "user": .null],
        ["order": ["id": ""], "user": 5, "tier": "bronze", "flag": false, "extra": 1.5],
        ["order": .null, "user": "u", "tier": 3, "flag": true, "extra": true],
    ]

    @Test func generatedSchemasNeverCrash() {
        let documents = Self.corpus(count: 1200)
        #expect(documents.count >= 1000)
        var parsed = 0, refused = 0
        for document in documents {
            do {
                let schema = try DataSchema(yaml: document, file: "data.schema.yaml")
                parsed += 1
                for value in Self.data {
                    for error in schema.validate(value) {
                        #expect(error.code == .templateDataSchema, "\(error)")
                        #expect(error.location?.file == "data.schema.yaml")
                    }
                }
                _ = schema.nullablePaths
            } catch {
                refused += 1
                #expect(error.code == .templateInvalidSchema, "\(error)")
                #expect(error.location?.file == "data.schema.yaml", "\(error)")
            }
        }
        #expect(parsed > 50 && refused > 50, "parsed \(parsed), refused \(refused)")
    }

    @Test func theBaseSchemaValidates() throws {
        let schema = try DataSchema(yaml: Self.base, file: "data.schema.yaml")
        #expect(schema.conforms(["order": ["id": "A", "total": 3, "items": [["name": "mug"]]], "user": .null]))
        #expect(!schema.conforms(["order": ["id": "A"], "user": 5]))
        #expect(schema.conforms(["order": ["id": "A"], "user": "u", "tier": .null, "flag": true, "extra": 2]))
        let deepOneOf = try #require(throwing { _ = try DataSchema(yaml: String(repeating: "[", count: 65), file: "s") })
        #expect(deepOneOf.code == .templateInvalidSchema)
    }
}
