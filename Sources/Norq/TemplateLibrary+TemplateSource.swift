public import NorqCore
public import NorqTemplates

/// A `TemplateLibrary` is the router's template source: templates compile once (cached by the library) and
/// render per send; a template with `enabled: false` skips the send. In strict mode the data is checked
/// against the template's `data.schema.yaml` first (`template/data-schema`).
extension TemplateLibrary: TemplateSource {
    public func content(template: String, data: JSONValue, strict: Bool) throws(NorqError) -> PushContent? {
        let compiled = try self.template(named: template)
        guard compiled.enabled else { return nil }
        if strict, let error = compiled.schemaErrors(data, limit: 1).first { throw error }
        var content = try compiled.render(data: data, options: RenderOptions(strict: strict))
        if content.templateName == nil { content.templateName = template }
        return content
    }
}
