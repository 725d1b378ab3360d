import NorqCore
import NorqTemplates
import Testing

/// The examples of `reference/norq-push-conformance.md`, verbatim. The runner serializes the output as
/// `<title>\n<body>` and each expected fragment must be a substring; data is null (missing paths give "").
struct ConformanceTests {
    struct Example: Sendable, CustomTestStringConvertible {
        var name: String
        var input: String
        var expected: [String]
        var notExpected: [String] = []
        var testDescription: String { name }
    }

    static let examples: [Example] = [
        Example(name: "1: :::header overrides frontmatter title", input: """
            ---
            title: Ignored Title
            ---

            :::header
            New Message
            :::

            You have a new message.
            """, expected: ["New Message"], notExpected: ["Ignored Title"]),
        Example(name: "2: :::header with static text", input: """
            :::header
            Order Update
            :::

            Your package is ready for pickup.
            """, expected: ["Order Update"]),
        Example(name: "2b: :::header with an expression and null data", input: """
            :::header
            Order Update {{order.id}}
            :::

            Your package is ready for pickup.
            """, expected: ["Order Update"]),
        Example(name: "3: first heading is the title", input: """
            # Account Alert

            Your account needs attention.
            """, expected: ["Account Alert"]),
        Example(name: "4: heading not repeated in the body", input: """
            # Package Delivered

            Your package arrived at the front door.
            """, expected: ["Package Delivered\nYour package arrived a"]),
        Example(name: "A1: static text passes through", input: """
            ---
            title: Test
            ---

            No expressions here.
            """, expected: ["No expressions here."]),
        Example(name: "A2: missing variable is empty, no separator", input: """
            ---
            title: Test
            ---

            Before{{missing_var}}After
            """, expected: ["BeforeAfter"]),
    ]

    @Test(arguments: examples)
    func example(_ example: Example) throws {
        let content = try compile(example.input).render(data: .null, options: RenderOptions(strict: false))
        let output = content.title + "\n" + content.body
        for fragment in example.expected {
            #expect(output.contains(fragment), "\(output.debugDescription) lacks \(fragment.debugDescription)")
        }
        for fragment in example.notExpected {
            #expect(!output.contains(fragment))
        }
    }

    @Test func headingIsRemovedFromBody() throws {
        let content = try render("# Package Delivered\n\nYour package arrived at the door.")
        #expect(content.title == "Package Delivered")
        #expect(content.body == "Your package arrived at the door.")
    }

    @Test func documentedCompileExample() throws {
        let source = """
            ---
            title: "Order #{{order.id}} shipped"
            ---

            ::: hero
            ![](https://cdn.example.com/shipped-banner.png)
            :::

            Hey {{user.first_name}}, your order is on its way!

            ::: action
            [Track Order]({{tracking_url}}){primary}
            :::
            """
        let data: JSONValue = ["order": ["id": "ORD-123"], "user": ["first_name": "Gaurav"],
                               "tracking_url": "https://track.example.com/123"]
        let content = try render(source, data)
        #expect(content.title == "Order #ORD-123 shipped")
        #expect(content.body == "Hey Gaurav, your order is on its way!")
        #expect(content.image == "https://cdn.example.com/shipped-banner.png")
        #expect(content.actionURL == "https://track.example.com/123")
    }

    @Test func frontmatterTitleAndEmptyTitle() throws {
        #expect(try render("---\ntitle: Hello\n---\nBody").title == "Hello")
        let none = try render("Just a body")
        #expect(none.title == "")
        #expect(none.body == "Just a body")
        // heading beats frontmatter title
        #expect(try render("---\ntitle: Low\n---\n## High\nx").title == "High")
    }
}
