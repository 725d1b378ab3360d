import NorqCore
import Testing

@Suite struct PushTokenValidationTests {
    func token(_ text: String) throws -> PushToken {
        try PushToken(json: JSONValue(parsing: text))
    }

    func code(_ text: String) -> String? {
        do {
            _ = try token(text)
            return nil
        } catch let error as NorqError {
            return error.code.rawValue
        } catch {
            return "not a NorqError"
        }
    }

    @Test func validTokens() throws {
        let ios = try token(#"{"token": "abcdef0123456789", "platform": "ios", "environment": "production", "provider": "apns-b"}"#)
        #expect(ios.platform == .ios)
        #expect(ios.environment == .production)
        #expect(ios.provider == "apns-b")
        #expect(ios.redacted == "abcdef01…")
        let web = try token(#"{"token": "https://push.example/x", "platform": "web", "keys": {"p256dh": "p", "auth": "a"}}"#)
        #expect(web.keys == WebPushKeys(p256dh: "p", auth: "a"))
    }

    @Test func errorCodes() {
        #expect(code(#"{"token": "abc", "platform": "ios", "environment": "prod"}"#) == "push/invalid-environment")
        #expect(code(#"{"token": "abc"}"#) == "push/missing-platform")
        #expect(code(#"{"token": "abc", "platform": "windows"}"#) == "push/unknown-platform")
        #expect(code(#"{"platform": "ios"}"#) == "push/empty-token")
        #expect(code(#"{"token": "", "platform": "ios"}"#) == "push/empty-token")
        #expect(code(#"{"token": "https://x", "platform": "web"}"#) == "provider/missing-vapid-keys")
        #expect(code(#"{"token": "https://x", "platform": "web", "keys": {"p256dh": "p"}}"#) == "provider/missing-vapid-keys")
        #expect(code(#"[1]"#) == "push/invalid-recipient")
    }
}

@Suite struct JSONValueTests {
    @Test func roundTripKeepsOrderAndValues() throws {
        let text = #"{"z":1,"a":[true,false,null],"m":{"b":"x","a":-2.5},"big":9007199254740993}"#
        let value = try JSONValue(parsing: text)
        #expect(String(decoding: value.serialized(), as: UTF8.self) == text)
        let again = try JSONValue(parsing: value.prettyPrinted())
        #expect(again == value)
    }

    @Test func stringsAreEscapedSoDataCannotChangeStructure() throws {
        let nasty = "quote\" backslash\\ newline\n tab\t nul\u{0} bell\u{7} emoji😀 </script>"
        let value: JSONValue = ["k": .string(nasty)]
        let bytes = value.serialized()
        let parsed = try JSONValue(parsing: String(decoding: bytes, as: UTF8.self))
        #expect(parsed["k"]?.stringValue == nasty)
        #expect(!bytes.contains(0x0A), "a raw newline must be escaped")
        #expect(!bytes.contains(0x00), "a raw NUL must be escaped")
    }

    /// Strings with nothing to escape are copied whole; each escape still applies (one of them alone in an
    /// otherwise plain string, at the start, in the middle and at the end).
    @Test func plainStringsAreCopiedWholeAndEveryEscapeStillApplies() {
        func written(_ value: String) -> String {
            var out: [UInt8] = []
            JSONValue.writeString(value, into: &out)
            return String(decoding: out, as: UTF8.self)
        }
        #expect(written("fA1-_:.x/~ caf\u{e9} 😀") == "\"fA1-_:.x/~ caf\u{e9} 😀\"")
        #expect(written("") == "\"\"")
        let escapes: [(String, String)] = [("\"", #"\""#), ("\\", #"\\"#), ("\n", #"\n"#), ("\u{1}", #"\u0001"#),
                                           ("\u{2028}", #"\u2028"#), ("\u{2029}", #"\u2029"#), ("\u{2030}", "\u{2030}")]
        for (raw, escaped) in escapes {
            #expect(written(raw + "ab") == "\"" + escaped + "ab\"")
            #expect(written("a" + raw + "b") == "\"a" + escaped + "b\"")
            #expect(written("ab" + raw) == "\"ab" + escaped + "\"")
        }
    }

    @Test func invalidJSONHasLineAndColumn() {
        do {
            _ = try JSONValue(parsing: "{\n  \"a\": }")
            Issue.record("expected an error")
        } catch {
            #expect(error.code.rawValue == "push/invalid-json")
            #expect(error.location?.line == 2)
        }
    }
}

@Suite struct RecipientDecodingTests {
    @Test func decodesNorqShape() throws {
        let json = try JSONValue(parsing: #"""
        {"id": "user-1", "push": {"tokens": [
            {"token": "aaaa1111", "platform": "ios"},
            {"token": "bbbb2222", "platform": "android", "provider": "fcm"}
        ]}}
        """#)
        let recipient = try Recipient(json: json)
        #expect(recipient.id == "user-1")
        #expect(recipient.tokens.map(\.platform) == [.ios, .android])
        #expect(recipient.tokens[1].provider == "fcm")
    }

    @Test func listForms() throws {
        let one = #"{"push": {"tokens": [{"token": "a", "platform": "ios"}]}}"#
        #expect(try Recipient.list(from: JSONValue(parsing: one)).count == 1)
        #expect(try Recipient.list(from: JSONValue(parsing: "[\(one),\(one)]")).count == 2)
        #expect(try Recipient.list(from: JSONValue(parsing: #"{"recipients": [\#(one)]}"#)).count == 1)
    }

    @Test func invalidRecipients() {
        for text in [#"{"tokens": []}"#, #"{"push": {"tokens": []}}"#, #"{"push": {"tokens": 3}}"#, "42"] {
            do {
                _ = try Recipient.list(from: JSONValue(parsing: text))
                Issue.record("expected push/invalid-recipient for \(text)")
            } catch {
                #expect(error.code.rawValue == "push/invalid-recipient", "\(text)")
            }
        }
    }
}
