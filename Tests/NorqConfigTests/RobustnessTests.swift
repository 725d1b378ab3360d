import NorqConfig
import NorqCore
import Testing

/// A small deterministic PRNG so the generated corpus is the same on every run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Feeds generated malformed YAML documents and values to the loader: each must come back as a
/// configuration or a `NorqError` with a `config/` code and a location, never a crash or a hang.
@Suite struct RobustnessTests {
    static let base = """
    templates: ./templates
    providers:
      fake:
        type: fake
        config:
          apiKey: "${KEY:-k}"
          region: eu
        retry: {on: [429, 500], retries: 2, backoff: 500ms, max_backoff: 2s}
        maxInFlight: 10
      droid:
        type: fake-android
        config: {apiKey: x}
    routing:
      push: fake
      push.android: droid
      push.ios: fake
    """

    static let alphabet: [String] = [
        ":", "-", "[", "]", "{", "}", ",", "&a", "*a", "!", "!!str", "|", ">", "'", "\"", "#", "%", "@", "`",
        " ", "  ", "\t", "\n", "\r\n", "${", "$${", "}", "${X", "${KEY}", "${UNSET}", "? ", "- ", ": ", "---",
        "...", "\u{0}", "\u{FEFF}", "\u{7}", "é", "😀", "\\", "0x1F", "1e400", "~", "null", "true", "<<", "=",
        "providers", "routing", "push.ios", "config", "type", "retry", "on", "-1", "99999999999999999999",
    ]

    static let values: [String] = [
        "", "~", "[]", "{}", "[1, [2, [3]]]", "{a: {b: {c: d}}}", "\"unterminated", "'also", "*undefined", "&anchor x",
        "!!binary AAAA", "!!int x", "|\n  block", ">-\n  folded", "${UNSET}", "${", "$${x}", "${A:-${B}}", "-1",
        "1e999", "0o777", ".nan", "-.inf", "yes", "NO", "2001-12-14t21:59:43.10-05:00", String(repeating: "x", count: 5000),
        String(repeating: "[", count: 300), String(repeating: "{a: ", count: 300), "\u{0}", "- - - - -", "? complex",
        "fake\nrouting: x", "apns", "push", "5xx", "6xx", "500ms", "55m", "[429, nope]",
    ]

    static func corpus(count: Int) -> [String] {
        var rng = SplitMix64(state: 0x6E6F_7271)
        var documents: [String] = []
        let lines = base.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        // Hand-written adversarial documents first.
        documents += [
            String(repeating: "[", count: 100_000),
            String(repeating: "{", count: 50_000),
            String(repeating: "- ", count: 20_000) + "x",
            (0..<2000).map { String(repeating: " ", count: $0) + "k\($0):" }.joined(separator: "\n"),
            "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n",
            "? &k [a, b]\n: 1\n? *k\n: 2\n",
            "providers: *nope\n",
            "\u{FEFF}providers: {}\n",
            "%YAML 1.1\n%YAML 1.1\n---\na: b\n",
            "--- a\n--- b\n",
            "a: b\na: c\n",
            "a:\n\t- b\n",
            String(repeating: "x", count: 2_000_000),
            "providers:\n  fake:\n    config: |\n      *not an alias\n      [[[[[\n",
        ]
        while documents.count < count {
            switch Int.random(in: 0..<5, using: &rng) {
            case 0:  // random token soup
                let length = Int.random(in: 0..<60, using: &rng)
                documents.append((0..<length).map { _ in alphabet.randomElement(using: &rng)! }.joined())
            case 1:  // mutate the valid document: insert, delete or replace characters
                var chars = Array(base)
                for _ in 0..<Int.random(in: 1...6, using: &rng) {
                    let position = Int.random(in: 0..<chars.count, using: &rng)
                    switch Int.random(in: 0..<3, using: &rng) {
                    case 0: chars.insert(contentsOf: Array(alphabet.randomElement(using: &rng)!), at: position)
                    case 1: chars.remove(at: position)
                    default: chars[position] = alphabet.randomElement(using: &rng)!.first ?? " "
                    }
                    if chars.isEmpty { chars = ["x"] }
                }
                documents.append(String(chars))
            case 2:  // replace one value with a hostile value
                var mutated = lines
                let index = Int.random(in: 0..<mutated.count, using: &rng)
                if let colon = mutated[index].firstIndex(of: ":") {
                    mutated[index] = String(mutated[index][...colon]) + " " + values.randomElement(using: &rng)!
                }
                documents.append(mutated.joined(separator: "\n"))
            case 3:  // truncate the valid document
                documents.append(String(base.prefix(Int.random(in: 0..<base.count, using: &rng))))
            default:  // shuffle or re-indent lines
                var mutated = lines
                let index = Int.random(in: 0..<mutated.count, using: &rng)
                mutated[index] = String(repeating: " ", count: Int.random(in: 0..<9, using: &rng)) + mutated[index].trimmingWhitespace()
                if Bool.random(using: &rng) { mutated.swapAt(index, Int.random(in: 0..<mutated.count, using: &rng)) }
                documents.append(mutated.joined(separator: "\n"))
            }
        }
        return documents
    }

    @Test func generatedMalformedDocumentsNeverCrash() {
        let documents = Self.corpus(count: 1500)
        #expect(documents.count >= 1000)
        let loader = ConfigurationLoader(registry: .testTypes, environment: ["KEY": "v"], workingDirectory: "/tmp")
        var loaded = 0
        var failed: [String: Int] = [:]
        for document in documents {
            do {
                _ = try loader.load(yaml: document, file: "fuzz.yaml", baseDirectory: "/tmp")
                loaded += 1
            } catch {
                failed[error.code.rawValue, default: 0] += 1
                #expect(error.code.area == "config", "\(error)")
                #expect(error.location?.file == "fuzz.yaml", "error without location: \(error)")
            }
        }
        #expect(loaded + failed.values.reduce(0, +) == documents.count)
        // The corpus exercises both outcomes and several kinds of errors.
        #expect(loaded > 0)
        #expect(failed["config/invalid-yaml", default: 0] > 0)
        #expect(failed.count >= 4, "\(failed)")
    }

    @Test func adversarialDocumentsAreRejectedWithPositions() throws {
        let loader = ConfigurationLoader(registry: .testTypes, environment: [:], workingDirectory: "/tmp")
        let aliasBomb = "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"
        let thrown = try #require(error { _ = try loader.load(yaml: aliasBomb, file: "f.yaml", baseDirectory: ".") })
        #expect(thrown.code == .configInvalidYAML)
        #expect(thrown.location == SourceLocation(file: "f.yaml", line: 2, column: 8))
        let deep = try #require(error {
            _ = try loader.load(yaml: String(repeating: "[", count: 10_000), file: "f.yaml", baseDirectory: ".")
        })
        #expect(deep.code == .configInvalidYAML)
        // A `*` inside a block scalar or a quoted string is text, not an alias.
        let text = try loader.load(yaml: "providers:\n  fake:\n    config:\n      apiKey: |\n        *star\n      region: \"*x\"\n",
                                   file: nil, baseDirectory: ".")
        #expect((text.providers.first?.configuration as? FakeConfiguration)?.apiKey == "*star\n")
        #expect((text.providers.first?.configuration as? FakeConfiguration)?.region == "*x")
    }
}
