import NorqCore
import NorqTemplates
import Testing

func compile(_ source: String, partials: [String: String] = [:], format: TemplateFormat = .markdown,
             file: String? = "push.md") throws(NorqError) -> CompiledTemplate {
    try CompiledTemplate.compile(source: source, name: "t", file: file, format: format,
                                 partials: .dictionary(partials))
}

func render(_ source: String, _ data: JSONValue = [:], strict: Bool = true,
            partials: [String: String] = [:]) throws(NorqError) -> PushContent {
    try compile(source, partials: partials).render(data: data, options: RenderOptions(strict: strict))
}

/// Renders `{{expr}}` as a body line.
func expr(_ expression: String, _ data: JSONValue = [:], strict: Bool = true) throws(NorqError) -> String {
    try render("{{" + expression + "}}", data, strict: strict).body
}

/// The error code thrown by `body`, or nil.
func errorCode(_ body: () throws -> Void) -> NorqError.Code? {
    caught(body)?.code
}

/// The error thrown by `body` (a non-`NorqError` becomes code `test/not-a-norq-error`), or nil.
func caught(_ body: () throws -> Void) -> NorqError? {
    do { try body() } catch let error as NorqError { return error } catch {
        return NorqError("test/not-a-norq-error", "\(error)")
    }
    return nil
}

/// The repository root (for `templates/`).
let repositoryRoot: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)
    return parts.joined(separator: "/")
}()
