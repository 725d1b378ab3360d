public import NorqCore

/// Where the router gets rendered content from. `NorqTemplates.TemplateLibrary` conforms; applications
/// and tests may supply their own.
public protocol TemplateSource: Sendable {
    /// Renders the named template with `data`. Returns nil when the template is disabled (every token of
    /// the send is then skipped with `routing/template-disabled`). Throws the template's errors.
    func content(template: String, data: JSONValue, strict: Bool) throws(NorqError) -> PushContent?
}
