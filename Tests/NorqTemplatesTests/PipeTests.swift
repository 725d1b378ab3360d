import NorqCore
import NorqTemplates
import Testing

struct PipeTests {
    let data: JSONValue = [
        "name": "ada lovelace", "padded": "  hi  ", "n": 1234567.891, "i": 3, "neg": -4.5,
        "list": ["b", "a", "c", "a"], "nums": [3, 1, 2], "json": "{\"a\":[1,2]}", "empty": "",
        "ts": 1767225600, "iso": "2026-01-01T00:00:00Z",
        "people": [["name": "Zed", "age": 40], ["name": "Amy", "age": 30]],
    ]

    @Test(arguments: [
        ("name | capitalize", "Ada lovelace"),
        ("name | uppercase", "ADA LOVELACE"),
        ("\"ABC\" | lowercase", "abc"),
        ("\"hELLO wORLD\" | titlecase", "Hello World"),
        ("name | truncate 5", "ada …"),
        ("name | truncate 6 \"...\"", "ada..."),
        ("name | truncate 50", "ada lovelace"),
        ("padded | trim | append \"!\"", "hi!"),
        ("padded | trim_start | append \"|\"", "hi  |"),
        ("padded | trim_end | prepend \"|\"", "|  hi"),
        ("name | replace \"a\" \"4\"", "4d4 lovel4ce"),
        ("name | append \"!\"", "ada lovelace!"),
        ("name | prepend \"Dr. \"", "Dr. ada lovelace"),
        ("missing | default \"N/A\"", "N/A"),
        ("empty | default name", "ada lovelace"),
        ("i | pluralize \"item\"", "items"),
        ("1 | pluralize \"child\" \"children\"", "child"),
        ("\"hello\" | md5", "5d41402abc4b2a76b9719d911017c592"),
        ("\"a,b,c\" | split \",\" | join \"-\"", "a-b-c"),
        ("list | count", "4"),
        ("list | join", "b, a, c, a"),
        ("list | unique | join \"\"", "bac"),
        ("list | at 1", "a"),
        ("list | at -1", "a"),
        ("list | first", "b"),
        ("list | last", "a"),
        ("nums | reverse | join \",\"", "2,1,3"),
        ("nums | sort | join \",\"", "1,2,3"),
        ("people | sort \"name\" | first | json", "{\"name\":\"Amy\",\"age\":30}"),
        ("list | slice 1 2 | join \",\"", "a,c"),
        ("i | add 2", "5"),
        ("i | subtract 5", "-2"),
        ("i | multiply 1.5", "4.5"),
        ("i | divide 2", "1.5"),
        ("n | round 1", "1234567.9"),
        ("n | round", "1234568"),
        ("10 | mod 3", "1"),
        ("neg | abs", "4.5"),
        ("neg | ceil", "-4"),
        ("neg | floor", "-5"),
        ("0.256 | percent", "26%"),
        ("0.256 | percent 1", "25.6%"),
        ("n | number 2", "1,234,567.89"),
        ("1000000 | number", "1,000,000"),
        ("n | currency", "$1,234,567.89"),
        ("1500 | currency \"EUR\"", "€1,500.00"),
        ("1500 | currency \"CHF\"", "CHF 1,500.00"),
        ("nums | json", "[3,1,2]"),
        ("json | from_json | json", "{\"a\":[1,2]}"),
        ("ts | date \"%Y-%m-%d %H:%M\"", "2026-01-01 00:00"),
        ("iso | date \"short\"", "Jan 1, 2026"),
        ("ts | date \"%A %B %e\"", "Thursday January 1"),
        ("ts | timezone \"+02:00\" | date \"%H:%M %Z\"", "02:00 +02:00"),
        ("ts | timezone \"UTC\"", "2026-01-01T00:00:00Z"),
    ])
    func pipe(_ expression: String, _ expected: String) throws {
        #expect(try expr(expression, data) == expected)
    }

    @Test func everyPipeIsKnown() throws {
        let names = ["capitalize", "uppercase", "lowercase", "titlecase", "truncate", "trim", "trim_start",
                     "trim_end", "replace", "append", "prepend", "default", "pluralize", "md5", "split", "count",
                     "join", "unique", "at", "first", "last", "reverse", "sort", "slice", "add", "subtract",
                     "multiply", "divide", "round", "mod", "abs", "ceil", "floor", "percent", "number",
                     "currency", "json", "from_json", "date", "timezone"]
        #expect(names.count == 40)
        for name in names {
            let code = errorCode { _ = try expr("\"1\" | \(name) 1 1", [:]) }
            #expect(code != .templateUnknownPipe, "\(name)")
        }
    }

    @Test func unknownPipeStrictAndLenient() throws {
        let error = caught { _ = try expr("name | shout", data) }
        #expect(error?.code == .templateUnknownPipe)
        #expect(error?.location?.line == 1)
        #expect(error?.location?.column == 1)
        #expect(try expr("name | shout", data, strict: false) == "ada lovelace")
        #expect(caught { _ = try expr("name | uppercas", data) }?.hint?.contains("uppercase") == true)
    }

    @Test func pipeErrors() throws {
        #expect(errorCode { _ = try expr("i | divide 0", data) } == .templatePipeError)
        #expect(errorCode { _ = try expr("name | add 1", data) } == .templatePipeError)
        #expect(errorCode { _ = try expr("name | from_json", data) } == .templatePipeError)
        #expect(errorCode { _ = try expr("name | date", data) } == .templatePipeError)
        #expect(errorCode { _ = try expr("ts | timezone \"Mars/Base\"", data) } == .templatePipeError)
        #expect(errorCode { _ = try expr("name | truncate", data) } == .templatePipeError)
    }
}
