import Foundation
import Norq
import NorqCore
import NorqTemplates
import Testing

@Suite("a strict send checks data against data.schema.yaml")
struct TemplateSchemaSendTests {
    @Test func strictSendValidatesTheSchemaAndNorqIDsRoute() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("norq-router-schema-\(UInt64.random(in: 0...UInt64.max))").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let folder = directory + "/transactional/account/greet"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try "---\ntitle: \"Hi {{name}}\"\n---\nWelcome\n".write(toFile: folder + "/push.md", atomically: true, encoding: .utf8)
        try "type: object\nrequired: [name]\nproperties:\n  name: {type: string}\n"
            .write(toFile: folder + "/data.schema.yaml", atomically: true, encoding: .utf8)
        let library = try TemplateLibrary(directory: directory, idStyle: .norq)
        let apns = FakeProvider(name: "apns")
        let router = try NotificationRouter(providers: [apns], templates: library)
        let id = "transactional/account/greet"
        let report = try await router.send(template: id, data: ["name": "Ada"], to: recipients([ios("a")]))
        #expect(report.delivered == 1)
        do {
            _ = try await router.send(template: id, data: ["name": 5], to: recipients([ios("a")]))
            Issue.record("data that breaks the schema must be refused in strict mode")
        } catch {
            #expect(error.code == .templateDataSchema)
            #expect(error.message == "data.name: expected string, got integer")
        }
        let lenient = try await router.send(template: id, data: ["name": 5], to: recipients([ios("b")]),
                                            options: RouterSendOptions(strict: false))
        #expect(lenient.delivered == 1)
    }
}
