package import Logging
package import Norq
package import NorqConfig
package import NorqCore
package import NorqTemplates

/// One finding shown beside a template: an error or a warning with where it is.
package struct PreviewFinding: Sendable, Hashable {
    package enum Severity: String, Sendable, Hashable {
        case error, warning
    }

    package var severity: Severity
    package var code: String
    package var message: String
    package var hint: String?
    package var file: String?
    package var line: Int?
    package var column: Int?

    package init(severity: Severity, code: String, message: String, hint: String? = nil, file: String? = nil,
                 line: Int? = nil, column: Int? = nil) {
        self.severity = severity
        self.code = code
        self.message = message
        self.hint = hint
        self.file = file
        self.line = line
        self.column = column
    }

    /// A `NorqError` as a finding (its location, when it has one, gives file, line and column).
    package init(_ error: NorqError, severity: Severity) {
        self.init(severity: severity, code: error.code.rawValue, message: error.message, hint: error.hint,
                  file: error.location?.file, line: error.location?.line, column: error.location?.column)
    }

    var json: JSONValue {
        [
            "severity": .string(severity.rawValue), "code": .string(code), "message": .string(message),
            "hint": hint.map(JSONValue.string) ?? .null, "file": file.map(JSONValue.string) ?? .null,
            "line": line.map { .int(Int64($0)) } ?? .null, "column": column.map { .int(Int64($0)) } ?? .null,
        ]
    }
}

/// The seam through which the preview gets a project's findings: today the checks `norq validate` runs (the CLI
/// plugs them in); a richer linter (`norq lint`) plugs in here without changing the preview.
package protocol PreviewLinter: Sendable {
    /// The findings of every template of `library`, by template id. Called once per load of the project (at start
    /// and after each change on disk), never per request. `router` is the project's dry-run router (nil without
    /// providers): its providers are the ones to check with, never made a second time.
    func findings(library: TemplateLibrary, configuration: NorqConfiguration?,
                  router: NotificationRouter?) -> [String: [PreviewFinding]]
}

/// A linter that finds nothing (a project previewed without checks).
package struct NoPreviewLinter: PreviewLinter {
    package init() {}
    package func findings(library: TemplateLibrary, configuration: NorqConfiguration?,
                          router: NotificationRouter?) -> [String: [PreviewFinding]] {
        [:]
    }
}

/// `norq lint`'s checks for the page (`TemplateLinter`): compile errors and warnings, each sample against the data
/// schema, nullable access, past expirations, and the provider pass, each routed provider's own `prepare` on every
/// sample for each platform it serves, with the project router's providers (made once per load of the
/// configuration, closed with the router; nothing is made per reload of the templates). Without a router (no
/// providers, or one that could not be built: the page shows why) the template checks only.
package struct TemplateLintPreviewLinter: PreviewLinter {
    package init() {}
    package func findings(library: TemplateLibrary, configuration: NorqConfiguration?,
                          router: NotificationRouter?) -> [String: [PreviewFinding]] {
        let providers = router.map { LintProviders.make(configuration: configuration, providers: $0.providers) }
            ?? LintProviders()
        let report = TemplateLinter(library: library, providers: providers, options: TemplateLinter.Options()).lint()
        var result: [String: [PreviewFinding]] = [:]
        for template in report.templates {
            result[template.template] = template.errors.map { PreviewFinding($0.error, severity: .error) }
                + template.warnings.map { PreviewFinding($0.error, severity: .warning) }
        }
        return result
    }
}

/// A project as the preview sees it: the templates, the configuration (when there is one) and the router built
/// from it for dry runs (nil without providers, or when building it failed: `routerError`).
package struct PreviewProject: Sendable {
    package var library: TemplateLibrary
    package var configuration: NorqConfiguration?
    package var router: NotificationRouter?
    /// Why there is no router although a configuration was loaded (a provider's key cannot be read, ...).
    package var routerError: NorqError?
    /// The files and folders whose changes re-render the page: the templates directory and the config file.
    package var watched: [String]

    /// Reads a project. Given the project loaded last (the config file did not change since), it may keep that
    /// project's configuration and router and read the templates only (``replacingLibrary(_:)``).
    package typealias Loader = @Sendable (_ previous: PreviewProject?) throws(NorqError) -> PreviewProject

    /// This project with other templates, the same configuration and router.
    package func replacingLibrary(_ library: TemplateLibrary) -> PreviewProject {
        var project = self
        project.library = library
        project.watched = [library.directory] + (configuration?.file.map { [$0] } ?? [])
        return project
    }

    package init(library: TemplateLibrary, configuration: NorqConfiguration?, router: NotificationRouter?,
                 routerError: NorqError? = nil, watched: [String]) {
        self.library = library
        self.configuration = configuration
        self.router = router
        self.routerError = routerError
        self.watched = watched
    }

    /// Builds a project: the router from `configuration` and `registry` when the configuration declares providers.
    package static func make(library: TemplateLibrary, configuration: NorqConfiguration?,
                             registry: ProviderTypeRegistry,
                             logger: Logger = Logger(label: "norq.preview.router")) -> PreviewProject {
        var watched = [library.directory]
        if let file = configuration?.file { watched.append(file) }
        guard let configuration, !configuration.providers.isEmpty else {
            return PreviewProject(library: library, configuration: configuration, router: nil, watched: watched)
        }
        do {
            let router = try NotificationRouter(configuration: configuration, registry: registry, templates: library,
                                                logger: logger)
            return PreviewProject(library: library, configuration: configuration, router: router, watched: watched)
        } catch {
            return PreviewProject(library: library, configuration: configuration, router: nil, routerError: error,
                                  watched: watched)
        }
    }
}

/// What the preview serves at one moment: the project loaded last (or why it could not be loaded), its findings,
/// and a generation number that each reload after a change on disk increments.
package struct PreviewSnapshot: Sendable {
    package var generation: Int
    package var project: PreviewProject?
    package var loadError: NorqError?
    package var findings: [String: [PreviewFinding]]
    /// The paths watched for changes (kept from the last good load when a reload fails).
    package var watched: [String]
}
