public import Norq
public import NorqCore
public import NorqTemplates
import Synchronization

/// A template source whose library can be replaced while sends are running (SIGHUP reload): each render uses
/// the library current when it starts. Give the same object to the router and to `NorqServer`.
public final class ReloadableTemplates: TemplateSource {
    private let current: Mutex<TemplateLibrary>

    public init(_ library: TemplateLibrary) {
        current = Mutex(library)
    }

    /// The library in use now.
    public var library: TemplateLibrary { current.withLock { $0 } }

    /// Swaps in `library` for later renders.
    public func replace(with library: TemplateLibrary) {
        current.withLock { $0 = library }
    }

    public func content(template: String, data: JSONValue, strict: Bool) throws(NorqError) -> PushContent? {
        try library.content(template: template, data: data, strict: strict)
    }
}
