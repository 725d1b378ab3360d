import NorqCore
import NorqTemplates
import Testing

/// Deterministic generator (SplitMix64), so failures reproduce.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E3779B97F4A7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58476D1CE4E5B9
        z = (z ^ (z >> 27)) &* 0x94D049BB133111EB
        return z ^ (z >> 31)
    }
}

struct FuzzTests {
    static let fragments: [String] = [
        "Hello ", "world", "\n", "\n\n", "{{name}}", "{{user.first_name | default \"x\"}}", "{{{raw}}}",
        "{{items | count}}", "{{n | add 1 | multiply 2}}", "{{n | divide 0}}", "{{missing}}", "{{name | nopipe}}",
        "{{", "}}", "{{{", "{", "}", "{{> p}}", "{{> self}}", "{{> none}}", "{{> p a=name b=\"lit\"}}", "{{@a}}",
        "::: if name\n", "::: if n > 2 && !flag\n", ":::else\n", ":::\n", "::: each items as it\n", "{{it}}",
        "{{it.k | uppercase}}", ":::header\n", ":::action\n", ":::hero\n", ":::callout\n", ":::fields\n",
        ":::list\n", ":::raw\n", ":::footer\n", ":::bogus\n", "# Heading ", "**bold** ", "_em_ ", "[link](",
        "{{url}})", "![img](http://x)", "- item\n", "1. one\n", "---\n", "title: x\n", "ios:\n  badge: 1\n",
        "é🎉\u{0}\u{1F}", "\"quote\" \\back", "{{ \"unterminated }}", "{{ 'single' | append name }}", "::: if (\n",
        "{{json | from_json | json}}", "{{n | date \"%Y\"}}", "{{name | truncate -3}}", "{{items | slice -2 9}}",
        "{{n | timezone \"Europe/Paris\"}}", "{{name | split \"\" | reverse | join}}",
    ]

    static let values: [JSONValue] = [
        .null, true, 0, -1, 3, 2.5, 1e300, "", "text", "\"}{\\\u{0}\u{2028}", "{{name}}", "é🎉",
        [], [1, "a", .null], ["k": "v"], "{\"a\":1}", "2026-01-01T00:00:00Z", .int(.max), .int(.min),
    ]

    static func generate(_ rng: inout SplitMix) -> (source: String, data: JSONValue) {
        var source = ""
        if Int.random(in: 0..<5, using: &rng) == 0 {
            source += "---\ntitle: \"{{name}} t\"\n"
            if Bool.random(using: &rng) { source += "data:\n  a: \"{{n}}\"\n" }
            if Bool.random(using: &rng) { source += "headers:\n  apns-collapse-id: \"{{name}}\"\n" }
            source += "---\n"
        }
        for _ in 0..<Int.random(in: 1...14, using: &rng) {
            source += fragments.randomElement(using: &rng)!
        }
        var data: [String: JSONValue] = [:]
        for key in ["name", "n", "flag", "raw", "url", "json", "user", "items"] where Bool.random(using: &rng) {
            data[key] = values.randomElement(using: &rng)!
        }
        if Bool.random(using: &rng) {
            data["items"] = .array((0..<Int.random(in: 0...4, using: &rng)).map { _ in
                ["k": values.randomElement(using: &rng)!]
            })
        }
        if Bool.random(using: &rng) { data["user"] = ["first_name": values.randomElement(using: &rng)!] }
        var object: [(String, JSONValue)] = []
        for (k, v) in data { object.append((k, v)) }
        object.sort { $0.0 < $1.0 }
        return (source, .object(.init(uniqueKeysWithValues: object)))
    }

    static func checkUTF8(_ s: String) -> Bool {
        String(validating: Array(s.utf8), as: UTF8.self) == s
    }

    @Test func tenThousandGeneratedTemplates() throws {
        var rng = SplitMix(state: 0x5EED)
        let partials: [String: String] = ["p": "[{{@a}}|{{@b}}] {{name}}", "self": "again {{> self}}"]
        var compiled = 0, rendered = 0, failures = 0
        for i in 0..<10_000 {
            let (source, data) = Self.generate(&rng)
            let format: TemplateFormat = i % 10 == 0 ? .json : .markdown
            let text = format == .json ? "{\"aps\": {\"alert\": \"\(source.filter { $0 != "\"" && $0 != "\\" && !$0.isNewline && $0.asciiValue.map { $0 >= 0x20 } ?? true })\"}}" : source
            let template: CompiledTemplate
            do {
                template = try CompiledTemplate.compile(source: text, name: "fuzz\(i)", format: format,
                                                        partials: .dictionary(partials))
                compiled += 1
            } catch {
                #expect(!error.code.rawValue.isEmpty)
                #expect(error.code.area == "template" || error.code.area == "push", "\(error)")
                failures += 1
                continue
            }
            for strict in [true, false] {
                do {
                    let content = try template.render(data: data, options: RenderOptions(strict: strict))
                    rendered += 1
                    #expect(Self.checkUTF8(content.title) && Self.checkUTF8(content.body))
                    let payload = TemplateRules.neutralPayload(content).serialized()
                    #expect(String(validating: payload, as: UTF8.self) != nil)
                    #expect((try? JSONValue(parsing: payload)) != nil, "payload of \(source.debugDescription)")
                } catch {
                    #expect(error.code.area == "template" || error.code.area == "push", "\(error)")
                    failures += 1
                }
            }
        }
        // the generator exercises all three outcomes
        #expect(compiled > 2_000 && rendered > 2_000 && failures > 1_000)
    }
}
