import Foundation
import NorqCore
import NorqTemplates
import Testing

struct LibraryTests {
    let library: TemplateLibrary

    init() throws {
        library = try TemplateLibrary(directory: repositoryRoot + "/templates")
    }

    @Test func listsExamples() throws {
        #expect(library.templateNames == ["background-refresh", "live-activity-start", "live-activity-update",
                                          "native-json-alert", "order-shipped"])
    }

    @Test(arguments: ["background-refresh", "live-activity-start", "live-activity-update", "native-json-alert",
                     "order-shipped"])
    func exampleTestsPass(_ name: String) throws {
        let template = try library.template(named: name)
        #expect(!template.samples.isEmpty)
        let report = template.runTests()
        #expect(report.cases.count >= 2)
        for c in report.cases where !c.passed {
            Issue.record("\(name) / \(c.name): \(c.messages.joined(separator: "; "))")
        }
        #expect(report.allPassed)
    }

    @Test func orderShippedRendersLikeTheDocs() throws {
        let t = try library.template(named: "order-shipped")
        #expect(t.samples.keys.first == "Default")
        let c = try t.render(data: t.defaultSample)
        #expect(c.title == "Order #ORD-123 shipped")
        #expect(c.body == "Hey Gaurav, your order is on its way!")
        #expect(c.image == "https://cdn.example.com/shipped-banner.png")
        #expect(c.actionURL == "https://track.example.com/123")
        #expect(c.headers.collapseID == "order-ORD-123")
        #expect(c.headers.expiration == .after(seconds: 3600))  // "1h"
        #expect(t.warnings.isEmpty)
        #expect(c.data == ["orderId": "ORD-123", "itemCount": 2])
    }

    @Test func liveActivityAndBackground() throws {
        let la = try library.template(named: "live-activity-update")
        let c = try la.render(data: la.defaultSample)
        #expect(c.headers.pushType == "liveactivity")
        #expect(c.ios.event == "update")
        #expect(c.ios.timestamp == 1767225600)
        #expect(c.ios.staleDate == 1767226500)
        #expect(c.ios.contentState == ["status": "almost_there", "etaMinutes": 1, "driver": "Sam"])
        let bg = try library.template(named: "background-refresh")
        let b = try bg.render(data: bg.defaultSample)
        #expect(b.ios.contentAvailable == true)
        #expect(b.headers == PushHeaders(priority: 5, pushType: "background", expiration: .immediately))
    }

    @Test func cachedAndConcurrent() async throws {
        let library = self.library
        await withTaskGroup(of: String.self) { group in
            for _ in 0..<8 {
                group.addTask { (try? library.template(named: "order-shipped").name) ?? "" }
            }
            for await name in group { #expect(name == "order-shipped") }
        }
    }

    @Test func libraryErrors() throws {
        #expect(errorCode { _ = try TemplateLibrary(directory: "/nonexistent/templates") } == .templateMissingDirectory)
        #expect(errorCode { _ = try library.template(named: "nope") } == .templateNotFound)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("norq-tpl-\(UInt64.random(in: 0...UInt64.max))").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir + "/both", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir + "/empty", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir + "/_shared", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir + "/bad", withIntermediateDirectories: true)
        try "x".write(toFile: dir + "/both/push.md", atomically: true, encoding: .utf8)
        try "{}".write(toFile: dir + "/both/push.json", atomically: true, encoding: .utf8)
        try "Hi {{> sig}}".write(toFile: dir + "/bad/push.md", atomically: true, encoding: .utf8)
        try "- [1]".write(toFile: dir + "/bad/data.samples.yaml", atomically: true, encoding: .utf8)
        let lib = try TemplateLibrary(directory: dir)
        #expect(lib.templateNames == ["bad", "both", "empty"])
        #expect(errorCode { _ = try lib.template(named: "both") } == .templateBothFormats)
        #expect(errorCode { _ = try lib.template(named: "empty") } == .templateNotFound)
        #expect(errorCode { _ = try lib.template(named: "bad") } == .templateInvalidSamples)
        try "ok: {}".write(toFile: dir + "/bad/data.samples.yaml", atomically: true, encoding: .utf8)
        try "by {{@who}}".write(toFile: dir + "/_shared/sig.md", atomically: true, encoding: .utf8)
        #expect(try lib.template(named: "bad").render(data: [:], options: .init(strict: false)).body == "Hi by")
    }

    @Test func testRunnerReportsFailures() throws {
        let t = try CompiledTemplate.compile(
            source: "---\ntitle: Hi {{n}}\n---\nBody {{n}}", name: "x",
            samplesSource: "one: {n: 1}\ntwo: {n: 22}",
            testsSource: """
                tests:
                  - name: passes
                    assert: { title: { eq: "Hi 1" }, body: { lte: 6 } }
                  - name: fails
                    sample: two
                    assert: { title: { eq: "Hi 1" }, body: { matches: "^Body 2{3}$" } }
                  - name: errors
                    data: {}
                    assert: { diagnostics: { errors: 1, code: template/missing-variable, contains: "'n'" } }
                  - name: other channel is skipped
                    channel: email
                    assert: { subject: { eq: nope } }
                """)
        let report = t.runTests()
        #expect(report.cases.map(\.name) == ["passes", "fails", "errors"])
        #expect(report.cases.map(\.passed) == [true, false, true])
        #expect(report.cases[1].messages.count == 2)
        #expect(report.failedCount == 1)
        for bad in ["tests: 3", "nope: []", "tests:\n  - name: a\n    sample: zzz",
                    "tests:\n  - name: a\n    assert: { colour: { eq: 1 } }",
                    "tests:\n  - name: a\n    assert: { body: { near: 1 } }", "tests:\n  - {}"] {
            let r = try CompiledTemplate.compile(source: "x", name: "x", samplesSource: "one: {}", testsSource: bad)
                .runTests()
            #expect(r.cases.count == 1 && !r.allPassed && r.cases[0].messages[0].contains("template/invalid-tests"),
                    "\(bad)")
        }
        #expect(try CompiledTemplate.compile(source: "x", name: "x", testsSource: "tests: []").runTests().cases.isEmpty)
    }
}
