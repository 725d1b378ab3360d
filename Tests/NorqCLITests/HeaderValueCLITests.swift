import Foundation
import Testing

/// Issue 30: a header value made from sample data that cannot be written on HTTP/2 (here a CR/LF injected into
/// `apns-collapse-id`) is reported by `norq validate`, `norq render` and `norq render --to` with the same code, naming
/// the header and the template, and nothing is sent.
@Suite(.serialized) struct HeaderValueCLITests {
    /// A templates directory with `invoice`, whose collapse id comes from data, and a sample carrying CR/LF.
    func invoiceTemplates() throws -> URL {
        let dir = try CLI.temporaryDirectory()
        let invoice = dir.appendingPathComponent("invoice")
        try FileManager.default.createDirectory(at: invoice, withIntermediateDirectories: true)
        try Data("""
            ---
            title: "Invoice {{invoice.number}}"
            headers:
              apns-collapse-id: "inv-{{invoice.number}}"
            ---
            Your invoice is ready.

            """.utf8).write(to: invoice.appendingPathComponent("push.md"))
        try Data("""
            injected:
              invoice:
                number: "A-17\\r\\napns-topic: evil"

            """.utf8).write(to: invoice.appendingPathComponent("data.samples.yaml"))
        return dir
    }

    @Test func validateReportsTheInvalidHeaderValue() throws {
        let dir = try invoiceTemplates()
        let result = try CLI.run(["validate", "--config", quickstart, "--templates", dir.path])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("error[template/invalid-header-value]"), "\(result)")
        #expect(result.stderr.contains("apns-collapse-id"), "\(result)")
        #expect(result.stderr.contains("\"invoice\""), "\(result)")
        #expect(result.stdout.contains("invoice: 1 error"), "\(result)")
    }

    @Test func renderWithoutRecipientsReportsTheSameError() throws {
        let dir = try invoiceTemplates()
        let result = try CLI.run(["render", "invoice", "--config", quickstart, "--templates", dir.path,
                                  "--sample", "injected"])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("error[template/invalid-header-value]"), "\(result)")
        #expect(result.stderr.contains("apns-collapse-id") && result.stderr.contains("\"invoice\""), "\(result)")
        #expect(result.stdout.isEmpty, "no content printed for a push that cannot be sent: \(result)")
        let clean = try CLI.run(["render", "invoice", "--config", quickstart, "--templates", dir.path,
                                 "--data", #"{"invoice": {"number": "A-17"}}"#])
        #expect(clean.status == 0, "\(clean)")
        #expect(clean.stdout.contains("apns-collapse-id: inv-A-17"), "\(clean)")
    }

    @Test func renderToRecipientsReportsTheSameError() throws {
        let dir = try invoiceTemplates()
        let result = try CLI.run(["render", "invoice", "--config", quickstart, "--templates", dir.path,
                                  "--sample", "injected", "--to", recipientsFile])
        #expect(result.status == 2, "\(result)")
        let output = result.stdout + result.stderr
        #expect(output.contains("error[template/invalid-header-value]"), "\(result)")
        #expect(output.contains("apns-collapse-id"), "\(result)")
    }
}
