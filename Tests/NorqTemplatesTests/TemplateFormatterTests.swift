import NorqCore
import NorqTemplates
import Testing

/// `norq fmt`'s canonical layout (issue 32): key order, quoting, indentation; idempotent; comments kept; values
/// unchanged; YAML it cannot lay out refused with a line.
@Suite struct TemplateFormatterTests {
    static let messy = """
        ---
        # the headers first, as someone wrote them
        headers:
            apns-push-type: 'alert'
            apns-priority: 10   # immediate
        data:
            orderId: "{{order.id}}"
            b: 'it''s'
            a: "plain text"
        ios:
            badge: 1
            sound: "default"
            thread-id: "10"


        title: 'Order {{order.id}}'
        ---
        Hello   {{name}}
        """ + "\n"

    @Test func lays_out_frontmatter_in_the_canonical_order_with_comments_kept() throws {
        let formatted = try TemplateFormatter.format(Self.messy, fileName: "push.md")
        #expect(formatted == """
            ---
            title: "Order {{order.id}}"
            ios:
              sound: default
              badge: 1
              thread-id: "10"
            # the headers first, as someone wrote them
            headers:
              apns-priority: 10 # immediate
              apns-push-type: alert
            data:
              orderId: "{{order.id}}"
              b: "it's"
              a: plain text
            ---
            Hello   {{name}}
            """ + "\n", "\(formatted)")
        #expect(try TemplateFormatter.format(formatted, fileName: "push.md") == formatted)
    }

    @Test func formatting_keeps_what_the_template_renders() throws {
        let formatted = try TemplateFormatter.format(Self.messy, fileName: "push.md")
        let data: JSONValue = ["order": ["id": "A-1"], "name": "Ada"]
        let before = try CompiledTemplate.compile(source: Self.messy, name: "t").render(data: data)
        let after = try CompiledTemplate.compile(source: formatted, name: "t").render(data: data)
        #expect(before == after)
    }

    @Test func samples_keep_their_order_and_tests_get_case_key_order() throws {
        let samples = "Second first:\n    user: {name: Ada}\n# the default\nDefault:\n    user:\n        name: 'Bo'\n"
        let formatted = try TemplateFormatter.format(samples, fileName: "data.samples.yaml")
        #expect(formatted == "Second first:\n  user: {name: Ada}\n# the default\nDefault:\n  user:\n    name: Bo\n", "\(formatted)")
        let tests = "tests:\n- assert:\n    body: { eq: \"Hi\" }\n  name: greets\n  sample: Default\n"
        let laidOut = try TemplateFormatter.format(tests, fileName: "tests.yaml")
        #expect(laidOut == "tests:\n  - name: greets\n    sample: Default\n    assert:\n      body: { eq: \"Hi\" }\n", "\(laidOut)")
        #expect(try TemplateFormatter.format(laidOut, fileName: "tests.yaml") == laidOut)
    }

    @Test func block_scalars_and_flow_collections_are_kept_verbatim() throws {
        let source = "a:\n    text: |\n        line one\n\n          indented\n    list: [1, 2]\nb: x\n"
        let formatted = try TemplateFormatter.format(source, fileName: "data.samples.yaml")
        #expect(formatted == "a:\n  text: |\n    line one\n\n      indented\n  list: [1, 2]\nb: x\n", "\(formatted)")
    }

    @Test(arguments: [
        ("a: &anchor 1\nb: *anchor\n", 1),
        ("a: \"open\n  continued\"\n", 1),
        ("a: plain\n  continued\n", 2),
        ("a:\n\t- tab\n", 2),
    ])
    func refuses_what_it_cannot_lay_out(source: String, line: Int) {
        #expect(throws: NorqError.self) { try TemplateFormatter.format(source, fileName: "data.samples.yaml") }
        do {
            _ = try TemplateFormatter.format(source, fileName: "data.samples.yaml", path: "s.yaml")
        } catch {
            #expect(error.code == .fmtUnsupported)
            #expect(error.location?.line == line, "\(error)")
        }
    }
}
