import Foundation
import NorqCore
import NorqTemplates
import Testing

/// Norq ids, other channels' files, data schemas and warnings (issue 17).
@Suite struct NorqProjectTemplateTests {
    static func project(_ files: [String: String]) throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("norq-notifications-\(UUID().uuidString)")
        for (path, text) in files {
            let url = root.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(text.utf8).write(to: url)
        }
        return root
    }

    static let push = "---\ntitle: Hi {{user.name}}\n---\nHello\n"

    @Test func norqIdsUpToFourSegmentsAndOtherChannels() throws {
        let root = try Self.project([
            "transactional/orders/order-shipped/push.md": Self.push,
            "transactional/orders/order-shipped/email.md": "---\nsubject: x\n---\nmail",
            "system/security-alert/push.json": #"{"aps": {"alert": "New sign-in"}}"#,
            "promotional/a/b/weekly/push.md": Self.push,
            "transactional/welcome/email.md": "mail only",
            "_shared/signature.md": "— team",
            "_drafts/transactional/x/push.md": Self.push,
            ".git/push.md": Self.push,
        ])
        defer { try? FileManager.default.removeItem(at: root) }
        let library = try TemplateLibrary(directory: root.path, idStyle: .norq)
        #expect(library.templateNames == ["promotional/a/b/weekly", "system/security-alert",
                                          "transactional/orders/order-shipped"])
        #expect(library.otherChannelNotifications == ["transactional/welcome": ["email.md"]])
        #expect(library.invalidIDs.isEmpty)
        let compiled = try library.template(named: "transactional/orders/order-shipped")
        #expect(compiled.name == "transactional/orders/order-shipped")
        let content = try compiled.render(data: ["user": ["name": "Ada"]])
        #expect(content.title == "Hi Ada")
        let emailOnly = try #require(throwing { _ = try library.compile("transactional/welcome") })
        #expect(emailOnly.code == .templateNotFound)
        #expect(emailOnly.message.contains("has no push template (it has email.md)"))
        let short = try #require(throwing { _ = try library.compile("order-shipped") })
        #expect(short.hint == "did you mean 'transactional/orders/order-shipped'?")
    }

    @Test(arguments: [
        "marketing/promo/push.md", "transactional/Order_Shipped/push.md", "transactional/order--x/push.md",
        "transactional/push.md",
    ])
    func invalidNorqIDs(_ path: String) throws {
        let root = try Self.project([path: Self.push])
        defer { try? FileManager.default.removeItem(at: root) }
        let library = try TemplateLibrary(directory: root.path, idStyle: .norq)
        let id = String(path.dropLast("/push.md".count))
        let thrown = try #require(throwing { _ = try library.compile(id) })
        #expect(thrown.code == .templateInvalidID, "\(thrown)")
        // The same folder in a `templates:` project is a fine flat id.
        #expect(TemplateLibrary.checkID(id, style: .flat) == nil)
    }

    @Test func flatIdsKeepWorking() throws {
        let root = try Self.project(["order-shipped/push.md": Self.push, "group/nested/push.md": Self.push])
        defer { try? FileManager.default.removeItem(at: root) }
        let library = try TemplateLibrary(directory: root.path)
        #expect(library.templateNames == ["group/nested", "order-shipped"])
        #expect(library.invalidIDs.isEmpty)
        #expect(TemplateLibrary.checkID("a/b/c/d/e", style: .flat)?.code == .templateInvalidID)
        #expect(TemplateLibrary.isNorqSegment("order-shipped-2"))
        #expect(!TemplateLibrary.isNorqSegment("-x") && !TemplateLibrary.isNorqSegment("x-") && !TemplateLibrary.isNorqSegment(""))
    }

    // MARK: schema

    static let schema = """
        type: object
        required: [order, tracking_url]
        properties:
          order:
            type: object
            required: [id]
            properties:
              id: { type: string, minLength: 3 }
              carrier: { type: string }
              count: { type: integer, minimum: 0 }
          user:
            type: object
            properties:
              first_name: { type: string }
          tracking_url: { type: string, format: uri }
          tier: { enum: [gold, silver] }
        """

    @Test func schemaValidatesDataWithNorqNullability() throws {
        let schema = try DataSchema(yaml: Self.schema, file: "data.schema.yaml")
        #expect(schema.conforms(["order": ["id": "ORD-1"], "tracking_url": "https://t"]))
        #expect(schema.conforms(["order": ["id": "ORD-1", "carrier": .null], "tracking_url": "https://t", "user": .null]),
                "fields not in required are nullable")
        let errors = schema.validate(["order": ["id": 5, "count": -1], "tier": "bronze"])
        let messages = errors.map(\.message)
        #expect(errors.allSatisfy { $0.code == .templateDataSchema })
        #expect(messages.contains("data: is missing required \"tracking_url\""), "\(messages)")
        #expect(messages.contains("data.order.id: expected string, got integer"), "\(messages)")
        #expect(messages.contains("data.order.count: -1 is less than 0"), "\(messages)")
        #expect(messages.contains { $0.hasPrefix("data.tier: \"bronze\" is not one of") }, "\(messages)")
        #expect(errors.first?.location?.file == "data.schema.yaml")
        let requiredNull = schema.validate(["order": .null, "tracking_url": "x"])
        #expect(requiredNull.map(\.message) == ["data: required \"order\" is null"])
        #expect(schema.nullablePaths == ["order.carrier", "order.count", "user", "user.first_name", "tier"])
    }

    @Test(arguments: [
        ("type: text", 1), ("properties: [a]", 1), ("pattern: \"(unclosed\"", 1), ("$ref: other.yaml#/x", 1), ("$ref: \"#/$defs/missing\"", 1), ("properties:\n  a: { minLength: -1 }", 2),
        ("required: x", 1), ("type: object\nproperties:\n  a:\n    patern: x", 4),
    ])
    func invalidSchemas(_ yaml: String, _ line: Int) throws {
        let thrown = try #require(throwing { _ = try DataSchema(yaml: yaml, file: "data.schema.yaml") })
        #expect(thrown.code == .templateInvalidSchema, "\(thrown)")
        #expect(thrown.location?.file == "data.schema.yaml")
        #expect(thrown.location?.line == line, "\(thrown)")
    }

    @Test func malformedSchemaYAML() throws {
        let thrown = try #require(throwing { _ = try DataSchema(yaml: "a: [unclosed", file: "data.schema.yaml") })
        #expect(thrown.code == .templateInvalidSchema)
        #expect((thrown.location?.line ?? 0) >= 1)
    }

    @Test func nullableAccessWarnsOnlyWhenUnguarded() throws {
        let source = """
            ---
            title: "Order {{order.id}} {{order.carrier}}"
            ---
            ::: if order.carrier
            Carrier: {{order.carrier}}
            :::
            Hi {{user.first_name | default "there"}} {{user.first_name}}
            ::: if tier != null
            Tier {{tier}}
            :::
            """
        let template = try CompiledTemplate.compile(source: source, name: "t", file: "push.md")
            .with(schema: try DataSchema(yaml: Self.schema, file: "data.schema.yaml"))
        let warnings = template.warnings.filter { $0.code == .templateNullableAccess }
        #expect(warnings.map(\.location?.line) == [2, 7], "\(warnings)")
        #expect(warnings.map { $0.message.hasPrefix("\"order.carrier\"") } == [true, false])
        #expect(warnings[1].message.hasPrefix("\"user\""), "user is nullable itself: \(warnings[1])")
    }

    @Test func rawExpressionWarning() throws {
        let template = try CompiledTemplate.compile(source: "---\ntitle: x\n---\nHi {{{name}}} and {{{ other }}}\n",
                                                    name: "t", file: "push.md")
        let warnings = template.warnings.filter { $0.code == .templateRawExpression }
        #expect(warnings.count == 2)
        #expect(warnings.first?.location == SourceLocation(file: "push.md", line: 4, column: 4))
        #expect(warnings.last?.message.contains("{{{other}}}") == true)
        #expect(try template.render(data: ["name": "<b>", "other": "&"]).body == "Hi <b> and &", "push is never escaped")
    }

    @Test func implausibleExpirationWarningWithDidYouMean() throws {
        let template = try CompiledTemplate.compile(source: "---\ntitle: x\nheaders:\n  apns-expiration: 3600\n---\n",
                                                    name: "t", file: "push.md")
        let warning = try #require(template.warnings.first { $0.code == .implausibleExpiration })
        #expect(warning.hint == "3600 is 1970-01-01T01:00:00Z; write \"1h\" for an hour from now")
        #expect(warning.location?.line == 4)
        #expect(try template.render(data: [:]).headers.expiration == .at(epochSeconds: 3600), "sent as written")
        let past = try CompiledTemplate.compile(source: "---\nheaders:\n  apns-expiration: 1700000000\n---\n", name: "t")
        #expect(past.warnings.first?.message.contains("in the past") == true)
        for fine in ["0", "\"1h\"", "4102444800", "\"2d\""] {
            let ok = try CompiledTemplate.compile(source: "---\nheaders:\n  apns-expiration: \(fine)\n---\n", name: "t")
            #expect(ok.warnings.isEmpty, "\(fine)")
        }
        let ninety = try CompiledTemplate.compile(source: "---\nheaders:\n  apns-expiration: 90\n---\n", name: "t")
        #expect(ninety.warnings.first?.hint == "90 is 1970-01-01T00:01:30Z; write \"90s\" for 90 seconds from now")
    }

    @Test func newIOSKeysAndTopic() throws {
        let source = """
            ---
            ios:
              action-loc-key: VIEW
              action: Open
              url-args: [orders, "{{id}}"]
            headers:
              apns-topic: com.example.other
            ---
            Body
            """
        let content = try CompiledTemplate.compile(source: source, name: "t").render(data: ["id": "42"])
        #expect(content.ios.actionLocKey == "VIEW" && content.ios.action == "Open")
        #expect(content.ios.urlArgs == ["orders", "42"])
        #expect(content.headers.topic == "com.example.other")
        let plain = try CompiledTemplate.compile(source: "---\nios:\n  alert: Hello\n---\n", name: "t").render(data: [:])
        #expect(plain.ios.alertText == "Hello")
    }
}

/// The error `body` throws, or nil.
func throwing(_ body: () throws -> Void) -> NorqError? {
    do {
        try body()
    } catch let error as NorqError {
        return error
    } catch {
        Issue.record("not a NorqError: \(error)")
    }
    return nil
}
