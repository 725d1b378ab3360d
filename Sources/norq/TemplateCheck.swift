import Foundation
import NorqCore
import NorqTemplates

/// `norq validate`'s template pass: compile every template, render it with each sample.
struct TemplateCheck {
    var name: String
    var samples: [String] = []
    var errors: [NorqError] = []

    /// - Parameter required: false when the directory is only the default guess (then a missing one is fine).
    static func run(directory: String, required: Bool) -> [TemplateCheck] {
        let library: TemplateLibrary
        if !required, !FileManager.default.fileExists(atPath: directory) { return [] }
        do {
            library = try TemplateLibrary(directory: directory)
        } catch {
            return [TemplateCheck(name: "(templates directory)", errors: [error])]
        }
        return library.templateNames.map { name -> TemplateCheck in
            var check = TemplateCheck(name: name)
            let compiled: CompiledTemplate
            do throws(NorqError) {
                compiled = try library.compile(name)
            } catch {
                check.errors.append(error)
                return check
            }
            let samples: [(String, JSONValue)] = compiled.samples.isEmpty
                ? [("(no sample: empty data)", .object([:]))]
                : compiled.samples.map { ($0.key, $0.value) }
            for (sample, data) in samples {
                check.samples.append(sample)
                do throws(NorqError) {
                    _ = try compiled.render(data: data)
                } catch {
                    var error = error
                    error.message += " (sample \"\(sample)\")"
                    check.errors.append(error)
                }
            }
            return check
        }
    }

    var json: JSONValue {
        [
            "template": .string(name),
            "ok": .bool(errors.isEmpty),
            "samples": .array(samples.map(JSONValue.string)),
            "errors": .array(errors.map(Console.json)),
        ]
    }

    static func text(_ checks: [TemplateCheck], directory: String, style: Style) -> String {
        var out = "templates (\(directory)):\n"
        if checks.isEmpty { out += "  (none)\n" }
        for check in checks {
            if check.errors.isEmpty {
                out += "  \(check.name): " + style.green("ok") + " (rendered with \(check.samples.count) sample\(check.samples.count == 1 ? "" : "s"))\n"
            } else {
                out += "  \(check.name): " + style.red("\(check.errors.count) error\(check.errors.count == 1 ? "" : "s")") + "\n"
            }
        }
        return out
    }
}
