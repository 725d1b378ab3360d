import NorqCore
import NorqTemplates
import Testing

/// The JSON Schema keywords Norq's schemas use beyond the first fifteen (issue 32): `pattern`, `format`,
/// `$ref` / `$defs`, `additionalProperties` as a schema; with `enum`, `const`, `oneOf` / `anyOf` together.
@Suite struct DataSchemaKeywordTests {
    static let yaml = """
        $schema: https://json-schema.org/draft/2020-12/schema
        type: object
        required: [order, user]
        $defs:
          money:
            type: object
            required: [amount, currency]
            properties:
              amount: { type: number, minimum: 0 }
              currency: { enum: [USD, EUR] }
        properties:
          order:
            type: object
            required: [id, total]
            properties:
              id: { type: string, pattern: "^ORD-[0-9]+$" }
              total: { $ref: "#/$defs/money" }
              placed_at: { type: string, format: date-time }
              kind: { const: shipped }
              ref: { oneOf: [{ type: string, format: uuid }, { type: integer }] }
          user:
            type: object
            required: [email]
            properties:
              email: { type: string, format: email }
            additionalProperties: { type: string }
          extra: { $ref: "#/definitions/flag" }
        definitions:
          flag: { anyOf: [{ type: boolean }, { const: "yes" }] }
        """

    func messages(_ data: JSONValue) throws -> [String] {
        try DataSchema(yaml: Self.yaml, file: "data.schema.yaml").validate(data).map(\.message)
    }

    @Test func aConformingSampleHasNoError() throws {
        let data: JSONValue = [
            "order": ["id": "ORD-17", "total": ["amount": 12.5, "currency": "EUR"],
                      "placed_at": "2026-11-27T10:00:00Z", "kind": "shipped",
                      "ref": "0e3b7a3c-8a4f-4c5e-9a43-1b2c3d4e5f60"],
            "user": ["email": "ada@example.com", "nickname": "Ada"],
            "extra": "yes",
        ]
        #expect(try messages(data) == [])
    }

    @Test func eachKeywordReportsItsMismatch() throws {
        let data: JSONValue = [
            "order": ["id": "A-17", "total": ["amount": -1, "currency": "GBP"], "placed_at": "yesterday",
                      "kind": "lost", "ref": 1.5],
            "user": ["email": "not-an-email", "age": 3],
            "extra": "no",
        ]
        let found = try messages(data)
        for expected in [
            "data.order.id: \"A-17\" does not match pattern ^ORD-[0-9]+$",
            "data.order.total.amount: -1 is less than 0",
            "data.order.kind: must be \"shipped\", got \"lost\"",
            "data.order.ref: matches 0 of the oneOf schemas, not exactly one",
            "data.user.age: expected string, got integer",
            "data.extra: matches none of the anyOf schemas",
        ] {
            #expect(found.contains(expected), "missing \(expected) in \(found)")
        }
        #expect(found.contains { $0.hasPrefix("data.order.total.currency: \"GBP\" is not one of") }, "\(found)")
        #expect(!found.contains { $0.contains("is not a valid") }, "format is an annotation in validation: \(found)")
        let schema = try DataSchema(yaml: Self.yaml, file: "data.schema.yaml")
        let formats = schema.formatMismatches(data)
        #expect(formats.allSatisfy { $0.code == .templateDataFormat })
        #expect(Set(formats.map(\.message)) == ["data.order.placed_at: \"yesterday\" is not a valid date-time",
                                               "data.user.email: \"not-an-email\" is not a valid email"], "\(formats)")
    }

    @Test func aFormatThatIsNotAssertedIsAnAnnotation() throws {
        let schema = try DataSchema(yaml: "type: string\nformat: hostname-ish\n", file: nil)
        #expect(schema.conforms("anything at all"))
        #expect(schema.formatMismatches("anything at all").isEmpty)
    }

    @Test func aRecursiveReferenceIsBoundedByTheBudget() throws {
        let schema = try DataSchema(yaml: "$ref: \"#\"\n", file: nil)
        #expect(!schema.validate("x").isEmpty)
    }
}
