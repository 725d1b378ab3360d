import NorqCore
import NorqTemplates
import Testing

struct BodyTests {
    @Test func directives() throws {
        let source = """
            :::header
            Hi {{name}}
            :::
            ::: callout
            Card expiring
            :::
            :::fields
            - **Order**: {{id}}
            - Total: $5
            :::
            :::list
            - one
            * two
            :::
            :::highlight
            Best *seller*
            :::
            :::centered
            Centered text
            :::
            :::media
            ![poster](https://x.example/p.png) Watch [the trailer](https://x.example/t)
            :::
            :::columns
            :::col
            Left
            :::
            :::col
            Right
            :::
            :::
            :::raw
            **kept** as is {{id}}
            :::
            :::footer
            Unsubscribe
            :::
            """
        let content = try render(source, ["name": "Ann", "id": 7])
        #expect(content.title == "Hi Ann")
        #expect(content.body == """
            ⚠️ Card expiring

            Order: 7
            Total: $5

            • one
            • two

            ⭐ Best seller

            Centered text

            Watch the trailer

            Left

            Right

            **kept** as is 7
            """)
        #expect(!content.body.contains("Unsubscribe"))
    }

    @Test func actionTakesFirstLinkAndHeroFirstImage() throws {
        let content = try render("""
            ::: hero
            ![a](https://img/1.png) ![b](https://img/2.png)
            :::
            :::action
            [One]({{u}}) and [Two](https://two)
            :::
            Body
            """, ["u": "https://one"])
        #expect(content.image == "https://img/1.png")
        #expect(content.actionURL == "https://one")
        #expect(content.body == "Body")
    }

    @Test func markdownBecomesPlainText() throws {
        let content = try render("""
            Some **bold**, _em_, ~~gone~~ and `code` with a [link](https://l) and snake_case_name.
            > quoted
            1. first
            ---
            {.style}
            """)
        #expect(content.body == """
            Some bold, em, gone and code with a link and snake_case_name.
            quoted
            1. first
            """)
    }

    @Test func dataIsNeverMarkdown() throws {
        let content = try render("Hi {{name}}", ["name": "**not bold** [x](y)"])
        #expect(content.body == "Hi **not bold** [x](y)")
    }

    @Test func conditionals() throws {
        let source = """
            ::: if user.vip && count >= 5
            VIP
            :::else if !user.vip || name == "x"
            Regular
            :::else
            Other
            :::
            """
        #expect(try render(source, ["user": ["vip": true], "count": 5]).body == "VIP")
        #expect(try render(source, ["user": ["vip": false], "count": 9]).body == "Regular")
        #expect(try render(source, ["user": ["vip": true], "count": 1, "name": "y"]).body == "Other")
    }

    @Test(arguments: [
        (JSONValue.null, false), (false, false), ("", false), ([], false),
        (0, true), ("0", true), ([:], true), ([1], true), (true, true),
    ] as [(JSONValue, Bool)])
    func truthiness(_ value: JSONValue, _ truthy: Bool) throws {
        let body = try render("::: if v\nyes\n:::else\nno\n:::", ["v": value]).body
        #expect(body == (truthy ? "yes" : "no"))
    }

    @Test func missingInConditionIsFalsy() throws {
        #expect(try render("::: if nope\nyes\n:::else\nno\n:::").body == "no")
    }

    @Test(arguments: [
        ("a == 2", true), ("a != 2", false), ("a > 1", true), ("a < 1", false), ("a >= 2", true), ("a <= 1.5", false),
        ("s == \"x\"", true), ("items | count >= 2", true), ("(a == 1 || a == 2) && !(s == \"y\")", true),
        ("s > \"a\"", true), ("a == 2.0", true), ("s == 2", false),
    ])
    func comparisons(_ condition: String, _ expected: Bool) throws {
        let body = try render("::: if \(condition)\nyes\n:::else\nno\n:::", ["a": 2, "s": "x", "items": [1, 2]]).body
        #expect(body == (expected ? "yes" : "no"))
    }

    @Test func eachLoops() throws {
        let source = """
            ::: each order.items as item
            - {{item.name}} x{{item.qty}}
            ::: each item.tags as tag
            #{{tag}}
            :::
            :::
            """
        let data: JSONValue = ["order": ["items": [["name": "Mug", "qty": 2, "tags": ["a"]],
                                                   ["name": "Pen", "qty": 1, "tags": []]]]]
        #expect(try render(source, data).body == "• Mug x2\n#a\n• Pen x1")
        #expect(errorCode { _ = try render(source, [:]) } == .templateMissingVariable)
        #expect(try render(source, [:], strict: false).body == "")
        #expect(errorCode { _ = try render(source, ["order": ["items": "nope"]]) } == .templateNotAList)
    }

    @Test func loopLimit() throws {
        let template = try compile("::: each xs as x\n::: each xs as y\n.\n:::\n:::")
        let xs = JSONValue.array(Array(repeating: 1, count: 200))
        let error = caught { _ = try template.render(data: ["xs": xs]) }
        #expect(error?.code == .templateLoopLimit)
        // inline partials share the budget of the render
        let viaPartial = try compile("::: each xs as a\nA {{> inner}}\n:::",
                                     partials: ["inner": "::: each xs as y\n.\n:::"])
        #expect(caught { _ = try viaPartial.render(data: ["xs": xs]) }?.code == .templateLoopLimit)
        let small = JSONValue.array(Array(repeating: 1, count: 3))
        #expect(try viaPartial.render(data: ["xs": small]).body == "A .\n.\n.\nA .\n.\n.\nA .\n.\n.")
    }

    @Test func outputLimit() throws {
        let template = try compile("{{s}}")
        let big = String(repeating: "x", count: 70_000)
        #expect(caught { _ = try template.render(data: ["s": .string(big)]) }?.code == .templateOutputTooLarge)
        let title = try compile("---\ntitle: \"{{s}}\"\n---\n")
        #expect(caught { _ = try title.render(data: ["s": .string(big)]) }?.code == .templateOutputTooLarge)
    }

    @Test func strictAndLenientMissing() throws {
        let error = caught { _ = try render("line one\nHello {{user.name}}!") }
        #expect(error?.code == .templateMissingVariable)
        #expect(error?.location?.file == "push.md")
        #expect(error?.location?.line == 2)
        #expect(error?.location?.column == 7)
        #expect(try render("Hello {{user.name}}!", strict: false).body == "Hello !")
        #expect(try render("Hello {{{user.name}}}!", ["user": ["name": "<b>"]]).body == "Hello <b>!")
    }

    @Test func partials() throws {
        let partials = [
            "card": "**{{@title}}**: {{@price | currency \"USD\"}}",
            "sig": "— {{@team | default \"The Shop\"}}",
            "loop": "again {{> loop}}",
            "a": "{{> b}}", "b": "{{> a}}",
        ]
        let source = """
            ::: each items as item
            {{> card title=item.name price=item.cost}}
            :::
            {{> card title="Featured" price=5}}
            {{> sig}}
            {{> sig team='Support'}}
            """
        let data: JSONValue = ["items": [["name": "Mug", "cost": 12.5]]]
        let content = try render(source, data, partials: partials)
        #expect(content.body == "Mug: $12.50\nFeatured: $5.00\n— The Shop\n— Support")
        #expect(errorCode { _ = try compile("{{> loop}}", partials: partials) } == .templateRecursivePartial)
        #expect(errorCode { _ = try compile("x {{> a}}", partials: partials) } == .templateRecursivePartial)
        // missing partials: the literal tag in the output, as Norq says, strict or not; a compile warning
        #expect(try render("{{> nope}}").body == "{{> nope}}")
        #expect(try render("{{> nope}}", strict: false).body == "{{> nope}}")
        let warned = try compile("Hi\n{{> nope x=1}}")
        #expect(warned.warnings.map(\.code) == [.templateMissingPartial])
        #expect(warned.warnings.first?.location?.line == 2)
        // multi-line call
        #expect(try render("{{> card\n  title=\"A\"\n  price=1}}", partials: partials).body == "A: $1.00")
    }

    @Test func partialDepth() throws {
        var partials: [String: String] = [:]
        for i in 0..<15 { partials["p\(i)"] = "{{> p\(i + 1)}}" }
        partials["p15"] = "end"
        #expect(errorCode { _ = try compile("{{> p0}}", partials: partials) } == .templatePartialDepth)
    }

    @Test func syntaxErrors() throws {
        #expect(errorCode { _ = try compile("Hello {{name") } == .templateSyntaxError)
        #expect(errorCode { _ = try compile("{{ a b }}") } == .templateSyntaxError)
        #expect(errorCode { _ = try compile("{{ }}") } == .templateSyntaxError)
        #expect(errorCode { _ = try compile("{{ \"open }}") } == .templateSyntaxError)
        #expect(errorCode { _ = try compile("::: if\nx\n:::") } == .templateSyntaxError)
        #expect(errorCode { _ = try compile("::: each items\nx\n:::") } == .templateSyntaxError)
        #expect(errorCode { _ = try compile("::: if a\nx") } == .templateUnbalancedBlock)
        #expect(errorCode { _ = try compile(":::") } == .templateUnbalancedBlock)
        #expect(errorCode { _ = try compile(":::else") } == .templateUnbalancedBlock)
        #expect(errorCode { _ = try compile(":::sparkles\nx\n:::") } == .templateUnknownDirective)
        let e = caught { _ = try compile("a\n\n::: if (a\nx\n:::") }
        #expect(e?.location?.line == 3)
    }

    @Test func tableDividerAndSpacer() throws {
        let body = try render("A\n:::divider\nB\n:::spacer\n:::table\n| k | v |\n:::\nC").body
        #expect(body == "A\n\nB\n\n| k | v |\n\nC")
    }

    @Test func directivesInsideControlFlowAndLoops() throws {
        let source = """
            ::: each links as l
            ::: if l.primary
            :::action
            [Go]({{l.url}})
            :::
            :::
            :::
            ::: if show
            :::header
            Shown {{n}}
            :::
            :::
            """
        let c = try render(source, ["links": [["url": "https://a"], ["url": "https://b", "primary": true]],
                                    "show": true, "n": 2])
        #expect(c.actionURL == "https://b")
        #expect(c.title == "Shown 2")
        #expect(c.body == "")
    }

    @Test func commentsAndSpacedDirectives() throws {
        #expect(try render("{{! a comment }}Hi\n::: header\nT\n:::").body == "Hi")
        #expect(try render("::: header\nT\n:::").title == "T")
    }
}
