import Foundation
import Norq
import NorqCore
import NorqTemplates
import Testing

@Suite("TemplateLibrary as the router's template source")
struct TemplateLibrarySourceTests {
    func library() throws -> TemplateLibrary {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("norq-router-templates-\(UInt64.random(in: 0...UInt64.max))").path
        for (name, text) in [
            ("greet", "---\ntitle: \"Hi {{name}}\"\n---\nWelcome, {{name}}!\n"),
            ("off", "---\nenabled: false\ntitle: \"Old\"\n---\nGone\n"),
        ] {
            try FileManager.default.createDirectory(atPath: directory + "/" + name, withIntermediateDirectories: true)
            try text.write(toFile: directory + "/" + name + "/push.md", atomically: true, encoding: .utf8)
        }
        return try TemplateLibrary(directory: directory)
    }

    @Test("renders through the library; disabled templates skip; strictness is passed on")
    func renders() async throws {
        let apns = FakeProvider(name: "apns")
        let r = try NotificationRouter(providers: [apns], templates: try library())
        let report = try await r.send(template: "greet", data: ["name": "Ada"], to: recipients([ios("a")]))
        #expect(report.delivered == 1)
        #expect(apns.requests.first.map { String(decoding: $0.body, as: UTF8.self) }?.hasPrefix("Hi Ada|") == true)
        let skipped = try await r.send(template: "off", data: [:], to: recipients([ios("a")]))
        #expect(skipped.skipped == 1)
        await #expect(throws: NorqError.self) {
            _ = try await r.send(template: "greet", data: [:], to: recipients([ios("a")]))
        }
        let lenient = try await r.send(template: "greet", data: [:], to: recipients([ios("b")]),
                                       options: RouterSendOptions(strict: false))
        #expect(lenient.delivered == 1)
    }
}
