import Foundation
import NorqCore
import NorqTemplates

/// `--mode render`: renders/s of a template compiled once, on one core (this thread only), for the
/// repository's `templates/order-shipped` and for the benchmark's own template.
package struct RenderBench {
    package let options: Options
    package init(options: Options) { self.options = options }

    package func run() throws -> [RunResult] {
        var results: [RunResult] = []
        var targets: [(String, String)] = [("templates", "order-shipped")]
        if options.template != "order-shipped" || options.templates != "templates" {
            targets.append((options.templates, options.template))
        }
        for (directory, name) in targets {
            let compiled = try TemplateLibrary(directory: directory).template(named: name)
            let data = compiled.defaultSample
            var sink = 0
            for _ in 0..<1_000 { sink &+= try compiled.render(data: data).title.utf8.count }  // warm-up
            let cpuStart = ProcessStats.cpuSeconds()
            let start = ContinuousClock.now
            let limit = Duration.milliseconds(Int64(options.seconds * 1000))
            var renders = 0
            var elapsed = Duration.zero
            while elapsed < limit {
                for _ in 0..<1_000 { sink &+= try compiled.render(data: data).body.utf8.count }
                renders += 1_000
                elapsed = start.duration(to: .now)
            }
            let cpu = ProcessStats.cpuSeconds() - cpuStart
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            var result = RunResult()
            result.add("client", "render")
            result.add("template", directory + "/" + name)
            result.add("renders", renders)
            result.add("seconds", seconds)
            result.add("renders_per_s", Double(renders) / seconds, digits: 0)
            result.add("renders_per_cpu_s", Double(renders) / cpu, digits: 0)
            result.add("sink", sink & 0xff)
            results.append(result)
        }
        return results
    }
}
