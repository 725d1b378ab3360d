import NorqCore
import NorqTemplates

extension SendTuningOptions {
    /// Warns on stderr, where the author is, about what the template would send but the service would not keep:
    /// an `apns-expiration` epoch in the past at the send time (`push/implausible-expiration`, with the template's
    /// line). With `--strict` it is an error and nothing is rendered or sent.
    func checkWarnings(_ compiled: CompiledTemplate, data: JSONValue) throws(NorqError) {
        guard let content = try? compiled.render(data: data, options: RenderOptions(strict: !lenient)),
              let warning = compiled.expirationWarning(for: content, sendTime: sendTime) else { return }
        if strict {
            var error = warning
            error.message += " (--strict: not sent)"
            throw error
        }
        Console.warn(warning)
    }
}
