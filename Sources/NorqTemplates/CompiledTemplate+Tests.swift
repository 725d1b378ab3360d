public import NorqCore

/// The result of one `tests.yaml` case.
public struct TemplateTestCaseResult: Sendable, Hashable {
    public var name: String
    public var sample: String?
    public var passed: Bool
    /// One line per failed assertion (empty when passed).
    public var messages: [String]
    /// The payloads measured for a case asserting `payload_bytes` (`TemplateRules.payloadSizes(of:)`), else empty.
    public var payloadSizes: [PayloadSize] = []
}

/// The result of running a template's `tests.yaml`.
public struct TemplateTestReport: Sendable, Hashable {
    public var template: String
    public var cases: [TemplateTestCaseResult]
    public var passedCount: Int { cases.filter(\.passed).count }
    public var failedCount: Int { cases.count - passedCount }
    public var allPassed: Bool { failedCount == 0 }
}

extension CompiledTemplate {
    /// Runs `tests.yaml`: each case renders a sample (default: the first) and checks its assertions.
    /// A malformed file is reported as one failed case named `tests.yaml`.
    public func runTests() -> TemplateTestReport {
        var report = TemplateTestReport(template: name, cases: [])
        guard let testsSource else { return report }
        do {
            let cases = try parseTests(testsSource)
            for c in cases { report.cases.append(contentsOf: run(c)) }
        } catch {
            report.cases.append(TemplateTestCaseResult(name: "tests.yaml", sample: nil, passed: false,
                                                       messages: [error.description]))
        }
        return report
    }

    struct TestCase {
        var name: String
        var samples: [String?]
        var data: JSONValue?
        var strict: Bool
        var asserts: [(target: String, op: String, value: JSONValue, location: SourceLocation)]
    }

    static let targets: Set<String> = ["subject", "title", "body", "payload_bytes", "diagnostics", "image",
                                       "action_url", "push_type"]

    func parseTests(_ source: String) throws(NorqError) -> [TestCase] {
        guard let tree = try YAMLTree.parse(source, file: testsFile, errorCode: .templateInvalidTests) else { return [] }
        guard let top = tree.object, let list = top["tests"] else {
            throw NorqError(.templateInvalidTests, "tests.yaml needs a top-level 'tests:' list", at: tree.location)
        }
        if case .null = list.kind { return [] }
        guard case .array(let items) = list.kind else {
            throw NorqError(.templateInvalidTests, "'tests' must be a list", at: list.location)
        }
        var cases: [TestCase] = []
        for item in items {
            guard let o = item.object, let n = o["name"], case .string(let caseName) = n.kind, !caseName.isEmpty else {
                throw NorqError(.templateInvalidTests, "each test needs a non-empty 'name'", at: item.location)
            }
            if let channel = o["channel"], case .string(let ch) = channel.kind, ch != "push" { continue }
            var samples: [String?] = [nil]
            if let s = o["sample"] {
                guard case .string(let sample) = s.kind else {
                    throw NorqError(.templateInvalidTests, "'sample' must be a name", at: s.location)
                }
                guard self.samples[sample] != nil else {
                    throw NorqError(.templateInvalidTests, "test '\(caseName)': no sample '\(sample)'", at: s.location)
                }
                samples = [sample]
            }
            if let all = o["all_samples"], case .bool(true) = all.kind, !self.samples.isEmpty {
                samples = self.samples.keys.map { $0 }
            }
            var strict = true
            if let s = o["strict"], case .bool(let b) = s.kind { strict = b }
            var asserts: [(String, String, JSONValue, SourceLocation)] = []
            if let a = o["assert"] {
                guard let targets = a.object else {
                    throw NorqError(.templateInvalidTests, "'assert' must map targets to operators", at: a.location)
                }
                for (target, ops) in targets {
                    guard Self.targets.contains(target) else {
                        throw NorqError(.templateInvalidTests, "unknown assert target '\(target)'",
                                        at: a.keyLocation(target),
                                        hint: "targets: " + Self.targets.sorted().joined(separator: ", "))
                    }
                    guard let opMap = ops.object else {
                        throw NorqError(.templateInvalidTests, "'\(target)' must map operators to values", at: ops.location)
                    }
                    for (op, value) in opMap {
                        guard ["eq", "contains", "not_contains", "matches", "lt", "lte", "gt", "gte", "errors", "code"]
                            .contains(op) else {
                            throw NorqError(.templateInvalidTests, "unknown operator '\(op)'", at: ops.keyLocation(op))
                        }
                        asserts.append((target, op, value.json, ops.keyLocation(op)))
                    }
                }
            }
            cases.append(TestCase(name: caseName, samples: samples, data: o["data"]?.json, strict: strict,
                                  asserts: asserts))
        }
        return cases
    }

    func run(_ c: TestCase) -> [TemplateTestCaseResult] {
        var results: [TemplateTestCaseResult] = []
        for sample in c.samples {
            let data = c.data ?? sample.flatMap { samples[$0] } ?? defaultSample
            var content: PushContent? = nil
            var failure: NorqError? = nil
            do { content = try render(data: data, options: RenderOptions(strict: c.strict)) } catch { failure = error }
            var messages: [String] = []
            let expectsErrors = c.asserts.contains { $0.target == "diagnostics" }
            if let failure, !expectsErrors { messages.append("render failed: \(failure)") }
            var sizes: Result<[PayloadSize], NorqError>? = nil
            if let content, c.asserts.contains(where: { $0.target == "payload_bytes" }) {
                do { sizes = .success(try rules.payloadSizes(of: content)) } catch { sizes = .failure(error) }
                if let m = Self.limitFailure(sizes) { messages.append("payload_bytes: \(m)") }
            }
            for a in c.asserts {
                if let m = check(a.target, a.op, a.value, content: content, failure: failure, sizes: sizes) {
                    messages.append("\(a.target) \(a.op): \(m)")
                }
            }
            var result = TemplateTestCaseResult(name: c.name, sample: sample ?? samples.keys.first,
                                                passed: messages.isEmpty, messages: messages)
            if case .success(let measured)? = sizes { result.payloadSizes = measured }
            results.append(result)
        }
        return results
    }

    /// `payload_bytes` fails when a provider cannot build the payload, or a payload is over its provider's limit
    /// (named, with the bytes over), whatever the asserted number.
    static func limitFailure(_ sizes: Result<[PayloadSize], NorqError>?) -> String? {
        switch sizes {
        case .failure(let error)?: return "cannot measure the payload: \(error)"
        case .success(let sizes)?:
            let over = sizes.filter { !$0.fits }
            return over.isEmpty ? nil : "too large: " + over.map(\.description).joined(separator: "; ")
        case nil: return nil
        }
    }

    /// Returns a failure message, or nil when the assertion holds. `sizes`: the payloads measured for the case.
    func check(_ target: String, _ op: String, _ expected: JSONValue, content: PushContent?,
               failure: NorqError?, sizes: Result<[PayloadSize], NorqError>? = nil) -> String? {
        if target == "diagnostics" {
            switch op {
            case "errors":
                let count = failure == nil ? 0 : 1
                guard case .int(let n) = expected else { return "expects a number" }
                return Int64(count) == n ? nil : "expected \(n) errors, got \(count)\(failure.map { " (\($0))" } ?? "")"
            case "code":
                guard let failure else { return "expected error \(expected.text), got none" }
                return failure.code.rawValue == expected.text ? nil : "expected \(expected.text), got \(failure.code)"
            case "contains":
                guard let failure else { return "expected an error, got none" }
                return failure.description.contains(expected.text) ? nil : "'\(failure)' does not contain '\(expected.text)'"
            default: return "operator not supported for diagnostics"
            }
        }
        guard let content else { return "no output (render failed)" }
        if target == "payload_bytes" {
            // The largest payload of the providers measured (see TemplateRules.payloadSizes(of:)).
            guard case .success(let measured)? = sizes, let largest = measured.max(by: { $0.bytes < $1.bytes }) else {
                return Self.limitFailure(sizes) == nil ? "no payload measured" : nil  // reported once by run(_:)
            }
            let size = Double(largest.bytes)
            guard let n = expected.numberValue else { return "expects a number" }
            let ok: Bool = switch op {
            case "eq": size == n
            case "lt": size < n
            case "lte": size <= n
            case "gt": size > n
            case "gte": size >= n
            default: false
            }
            return ok ? nil : "payload is \(largest.bytes) bytes (the largest: \(largest.subject)), fails \(op) \(NumberFormat.plain(n))"
        }
        let actual: String = switch target {
        case "subject", "title": content.title
        case "body": content.body
        case "image": content.image ?? ""
        case "action_url": content.actionURL ?? ""
        default: content.headers.pushType ?? ""
        }
        let text = expected.text
        switch op {
        case "eq": return actual == text ? nil : "expected \"\(text)\", got \"\(actual)\""
        case "contains": return actual.contains(text) ? nil : "\"\(actual)\" does not contain \"\(text)\""
        case "not_contains": return actual.contains(text) ? "\"\(actual)\" contains \"\(text)\"" : nil
        case "matches":
            guard let regex = try? Regex(text) else { return "invalid regular expression \"\(text)\"" }
            return actual.contains(regex) ? nil : "\"\(actual)\" does not match /\(text)/"
        case "lt", "lte", "gt", "gte":
            let count = Double(actual.count)
            guard let n = expected.numberValue else { return "expects a number" }
            let ok = op == "lt" ? count < n : op == "lte" ? count <= n : op == "gt" ? count > n : count >= n
            return ok ? nil : "length \(Int(count)) fails \(op) \(NumberFormat.plain(n))"
        default: return "operator not supported for \(target)"
        }
    }
}
