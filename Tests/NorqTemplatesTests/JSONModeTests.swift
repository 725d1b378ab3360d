import NorqCore
import NorqTemplates
import Testing

struct JSONModeTests {
    static let hostile: [String] = [
        "\"}, \"aps\": {\"badge\": 99}, \"x\": {\"", "back\\slash\\\"", "ctl\u{0}\u{1}\u{1F}\n\r\t",
        "line\u{2028}sep\u{2029}", "emoji 🎉 and é", "{{nested}}", "</script>",
    ]

    @Test(arguments: hostile)
    func hostileDataCannotChangeStructure(_ value: String) throws {
        let template = try compile("""
            {"$norq": {"enabled": true}, "aps": {"alert": {"title": "Hi {{name}}", "body": "{{name}}"}}, "k": "v"}
            """, format: .json, file: "push.json")
        let content = try template.render(data: ["name": .string(value), "nested": "BAD"])
        let payload = try #require(content.nativePayload)
        // the serialized payload parses back to the same structure, with the data as a plain string
        let reparsed = try JSONValue(parsing: payload.serialized())
        #expect(reparsed == payload)
        guard case .object(let top) = reparsed else { Issue.record("not an object"); return }
        #expect(Array(top.keys) == ["aps", "k"])
        #expect(reparsed["aps"]?["alert"]?["body"] == .string(value))
        #expect(reparsed["aps"]?["alert"]?["title"] == .string("Hi " + value))
        #expect(reparsed["aps"]?["badge"] == nil)
        #expect(content.title == "Hi " + value)
        #expect(String(validating: payload.serialized(), as: UTF8.self) != nil)
    }

    @Test func hostileDataInMarkdownFrontmatterData() throws {
        for value in Self.hostile {
            let c = try render("---\ndata:\n  a: \"x{{v}}\"\n  b: 1\n---\n{{v}}", ["v": .string(value)])
            let payload = TemplateRules.neutralPayload(c)
            let reparsed = try JSONValue(parsing: payload.serialized())
            #expect(reparsed["data"]?["a"] == .string("x" + value))
            #expect(reparsed["data"]?["b"] == 1)
        }
    }

    @Test func typedSingleExpressionsAndMetadata() throws {
        let template = try compile("""
            {"$norq": {"enabled": false, "headers": {"apns-push-type": "background", "apns-priority": 5}},
             "aps": {"content-available": 1, "badge": "{{n}}"}, "ids": "{{ids}}", "s": "n={{n}}"}
            """, format: .json, file: "push.json")
        #expect(template.enabled == false)
        let c = try template.render(data: ["n": 4, "ids": [1, 2]])
        #expect(c.headers.pushType == "background")
        #expect(c.headers.priority == 5)
        #expect(c.nativePayload == ["aps": ["content-available": 1, "badge": 4], "ids": [1, 2], "s": "n=4"])
        #expect(try TemplateRules().payloadSizes(of: c).map(\.bytes) == [c.nativePayload!.serialized().count])
    }

    @Test func jsonErrors() throws {
        #expect(errorCode { _ = try compile("{\"a\": }", format: .json) } == .invalidJSON)
        #expect(errorCode { _ = try compile("[1]", format: .json) } == .invalidJSON)
        #expect(errorCode { _ = try compile("{\"$norq\": {\"colour\": 1}}", format: .json) } == .unknownFrontmatterKey)
        #expect(errorCode { _ = try compile("{\"$norq\": {\"headers\": {\"apns-topc\": \"x\"}}}", format: .json) }
                    == .unknownHeader)
        #expect(errorCode { _ = try compile("{\"$norq\": 1}", format: .json) } == .invalidFrontmatterValue)
        #expect(errorCode { _ = try compile("{\"$norq\": {\"enabled\": 1}}", format: .json) } == .invalidFrontmatterValue)
        let t = try? compile("{\"a\": \"{{missing}}\"}", format: .json)
        #expect(errorCode { _ = try t?.render(data: [:]) } == .templateMissingVariable)
        #expect(try t?.render(data: [:], options: RenderOptions(strict: false)).nativePayload == ["a": .null])
    }
}
