import Foundation
import Testing

/// Every error code used in `Sources/` must be documented in `docs/errors.md`.
@Suite struct ErrorCatalogTests {
    static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static let codePattern = #""((?:config|push|template|apns|fcm|routing|provider|cli|webpush|expo|store|idempotency|token|server|preview)/[a-z0-9-]+)""#

    /// Codes appearing as string literals in Swift files under `Sources/`.
    static func codesInSources() throws -> [String: String] {
        let regex = try NSRegularExpression(pattern: codePattern)
        var codes: [String: String] = [:]
        let sources = packageRoot.appendingPathComponent("Sources")
        guard let enumerator = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil) else { return [:] }
        for case let url as URL in enumerator where url.pathExtension == "swift" {
            let text = try String(contentsOf: url, encoding: .utf8)
            let range = NSRange(text.startIndex..., in: text)
            for match in regex.matches(in: text, range: range) {
                if let codeRange = Range(match.range(at: 1), in: text) {
                    codes[String(text[codeRange]), default: url.lastPathComponent] = url.lastPathComponent
                }
            }
        }
        return codes
    }

    @Test func everyCodeInSourcesIsDocumented() throws {
        let catalog = try String(contentsOf: Self.packageRoot.appendingPathComponent("docs/errors.md"), encoding: .utf8)
        let codes = try Self.codesInSources()
        #expect(codes.count >= 10, "the scan found too few codes; is the package root right? \(Self.packageRoot.path)")
        let missing = codes.filter { !catalog.contains("`\($0.key)`") }.map { "\($0.key) (\($0.value))" }.sorted()
        #expect(missing.isEmpty, "codes used in Sources/ but missing from docs/errors.md: \(missing.joined(separator: ", "))")
    }

    @Test func scannerFindsKnownCodes() throws {
        let codes = try Self.codesInSources()
        #expect(codes["push/invalid-environment"] != nil)
        #expect(codes["config/unknown-key"] != nil)
    }
}
