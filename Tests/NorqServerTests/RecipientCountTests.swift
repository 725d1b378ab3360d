import NorqCore
@testable import NorqServer
import Testing

/// `to` is counted while the body is parsed: a body naming more targets than `server.limits.recipients` is refused at
/// the first one past the limit, before the rest of the body is read (issue 33).
@Suite struct RecipientCountTests {
    static func token(_ i: Int) -> String { String(repeating: "a", count: 56) + String(format: "%08x", i) }

    static func parse(_ text: String, maximum: Int) throws(NorqError) -> JSONValue {
        try JSONValue(parsing: Array(text.utf8), maxDepth: 64, limit: SendRequest.targetLimit(maximum: maximum))
    }

    static func flat(_ count: Int) -> String {
        "[" + (0..<count).map { "\"\(token($0))\"" }.joined(separator: ",") + "]"
    }

    @Test func stopsAtTheFirstTargetPastTheLimitBeforeReadingTheRest() {
        // 100,000 tokens, and after the 101st the text is not even JSON: the parse must stop before it gets there.
        let body = "{\"template\": \"t\", \"to\": [" + (0..<101).map { "\"\(Self.token($0))\"" }.joined(separator: ",")
            + ",\"" + Self.token(101) + "\" }}} not json " + String(repeating: ",\"x\"", count: 99_898) + "]}"
        #expect(throws: NorqError.self) { _ = try Self.parse(body, maximum: 100) }
        do {
            _ = try Self.parse(body, maximum: 100)
        } catch {
            #expect(error.code == .serverTooManyRecipients)
            #expect(error.message.contains("more than 100 targets"))
        }
    }

    @Test(arguments: ["flat", "objects", "recipients", "wrapped", "one"])
    func takesExactlyTheLimitInEveryShapeAndRefusesOneMore(shape: String) throws {
        func body(_ count: Int) -> String {
            let tokens = (0..<count).map { "{\"token\": \"\(Self.token($0))\", \"platform\": \"ios\"}" }
            let to: String
            switch shape {
            case "flat": to = Self.flat(count)
            case "objects": to = "[" + tokens.joined(separator: ",") + "]"
            case "recipients":  // two recipients sharing the targets, one with a channel
                let half = count / 2
                to = "[{\"push\": {\"tokens\": [" + tokens[..<half].joined(separator: ",") + "]}},"
                    + "{\"push\": {\"tokens\": [" + tokens[half..<(count - 1)].joined(separator: ",")
                    + "], \"channels\": [{\"channel\": \"c\"}]}}]"
            case "wrapped":
                to = "{\"recipients\": [{\"push\": {\"tokens\": [" + tokens.joined(separator: ",") + "]}}]}"
            default:
                to = "{\"push\": {\"tokens\": [" + tokens.joined(separator: ",") + "]}}"
            }
            return "{\"template\": \"t\", \"to\": " + to + "}"
        }
        let parsed = try Self.parse(body(10), maximum: 10)
        let recipients = try SendRequest.recipients(parsed["to"] ?? .null)
        #expect(recipients.reduce(0) { $0 + $1.tokens.count + $1.channels.count } == 10)
        #expect(throws: NorqError.self) { _ = try Self.parse(body(11), maximum: 10) }
    }

    @Test func countsOnlyTargetsNotTheDataOrOtherLists() throws {
        // `data` and `options` may hold long lists; the limit is about `to` only.
        let body = "{\"template\": \"t\", \"data\": {\"items\": " + Self.flat(50) + ", \"to\": " + Self.flat(50)
            + "}, \"to\": " + Self.flat(3) + "}"
        let parsed = try Self.parse(body, maximum: 3)
        guard case .array(let to)? = parsed["to"] else {
            Issue.record("to is not a list")
            return
        }
        #expect(to.count == 3)
    }
}
