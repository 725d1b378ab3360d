import NorqCore

/// Collects what the body produces: text lines, title candidates, image and action URL.
struct BodySink {
    var body = ""
    var pendingBlank = false
    var header: String? = nil
    var heading: String? = nil
    var image: String? = nil
    var actionURL: String? = nil
    var pendingPrefix: String? = nil
    let maxBytes: Int

    mutating func emit(_ line: String) throws(NorqError) {
        var line = line
        while let last = line.utf8.last, last == 0x20 || last == 0x09 { line.removeLast() }
        if line.isEmpty { return }
        if !body.isEmpty { body += pendingBlank ? "\n\n" : "\n" }
        pendingBlank = false
        if let p = pendingPrefix {
            body += p
            pendingPrefix = nil
        }
        body += line
        guard body.utf8.count <= maxBytes else {
            throw NorqError(.templateOutputTooLarge, "the body is larger than \(maxBytes) bytes")
        }
    }

    mutating func blank() {
        if !body.isEmpty { pendingBlank = true }
    }
}

enum RenderMode {
    case body, header, action, hero, ignore, directiveBody
}

extension RenderContext {
    mutating func render(_ inline: Inline) throws(NorqError) -> String {
        if inline.segments.count == 1 {
            switch inline.segments[0] {
            case .text(let t): return t
            case .expr(let e):
                let v = try evaluateForOutput(e)
                if case .string(let s) = v { return s }
                return v.text
            default: break
            }
        }
        var out = ""
        try render(inline, into: &out)
        return out
    }

    mutating func render(_ inline: Inline, into out: inout String) throws(NorqError) {
        for segment in inline.segments {
            switch segment {
            case .text(let t): out += t
            case .expr(let e): try append(e, to: &out)
            case .partial(let nodes):
                var sink = BodySink(maxBytes: limits.maxOutputBytes)
                try renderNodes(nodes, mode: .directiveBody, sink: &sink)  // shares the loop budget
                out += sink.body
            case .missingPartial(let tag, _):
                // Norq: a partial that is not found is left in the output as the literal tag (a compile warning).
                out += tag
            }
            guard out.utf8.count <= limits.maxOutputBytes else {
                throw NorqError(.templateOutputTooLarge, "a rendered value is larger than \(limits.maxOutputBytes) bytes")
            }
        }
    }

    mutating func renderNodes(_ nodes: [BodyNode], mode: RenderMode, sink: inout BodySink) throws(NorqError) {
        for node in nodes {
            switch node {
            case .blank:
                if mode == .body || mode == .directiveBody { sink.blank() }
            case .line(let line):
                try renderLine(line, mode: mode, sink: &sink)
            case .conditional(let branches, let otherwise):
                var taken = false
                for (condition, body) in branches where try test(condition) {
                    try renderNodes(body, mode: mode, sink: &sink)
                    taken = true
                    break
                }
                if !taken { try renderNodes(otherwise, mode: mode, sink: &sink) }
            case .each(let listExpr, let slot, let body):
                let list = try evaluate(listExpr)
                let items: [JSONValue]
                switch list {
                case .array(let a)?: items = a
                case nil:
                    if strict { throw missing(listExpr.primary.displayName, at: listExpr.location) }
                    items = []
                case .null?: items = []
                default:
                    if strict {
                        throw NorqError(.templateNotAList, "'\(listExpr.primary.displayName)' is not a list",
                                        at: listExpr.location)
                    }
                    items = []
                }
                for item in items {
                    loopBudget -= 1
                    guard loopBudget >= 0 else {
                        throw NorqError(.templateLoopLimit,
                                        "more than \(limits.maxLoopIterations) loop iterations in one render",
                                        at: listExpr.location)
                    }
                    while locals.count > slot { locals.removeLast() }
                    locals.append(item)
                    try renderNodes(body, mode: mode, sink: &sink)
                }
                while locals.count > slot { locals.removeLast() }
            case .group(let nodes):
                try renderNodes(nodes, mode: mode, sink: &sink)
            case .missingPartial(let tag, _):
                if mode == .body || mode == .directiveBody { try sink.emit(tag) }
            case .directive(let kind, let children):
                try renderDirective(kind, children, outer: mode, sink: &sink)
            }
        }
    }

    private mutating func renderDirective(_ kind: DirectiveKind, _ children: [BodyNode], outer: RenderMode,
                                          sink: inout BodySink) throws(NorqError) {
        guard outer == .body || outer == .directiveBody else {
            // nested inside header/action/hero/footer: the outer mode decides
            try renderNodes(children, mode: outer, sink: &sink)
            return
        }
        switch kind {
        case .header:
            var inner = BodySink(maxBytes: limits.maxOutputBytes)
            try renderNodes(children, mode: .header, sink: &inner)
            if sink.header == nil, let h = inner.header, !h.isEmpty { sink.header = h }
        case .footer:
            return
        case .action:
            try renderNodes(children, mode: .action, sink: &sink)
        case .hero:
            try renderNodes(children, mode: .hero, sink: &sink)
        case .callout, .highlight:
            sink.blank()
            sink.pendingPrefix = kind == .callout ? "⚠️ " : "⭐ "
            try renderNodes(children, mode: .directiveBody, sink: &sink)
            sink.pendingPrefix = nil
            sink.blank()
        default:
            sink.blank()
            try renderNodes(children, mode: .directiveBody, sink: &sink)
            sink.blank()
        }
    }

    private mutating func renderLine(_ line: BodyLine, mode: RenderMode, sink: inout BodySink) throws(NorqError) {
        switch mode {
        case .ignore:
            return
        case .header:
            let text = try render(line.text).trimmingWhitespace()
            guard !text.isEmpty else { return }
            if let h = sink.header, !h.isEmpty { sink.header = h + " " + text } else { sink.header = text }
        case .action:
            if sink.actionURL == nil, let link = line.links.first {
                sink.actionURL = try render(link).trimmingWhitespace()
            }
        case .hero:
            if sink.image == nil {
                if let image = line.images.first ?? line.links.first {
                    sink.image = try render(image).trimmingWhitespace()
                } else {
                    let text = try render(line.text).trimmingWhitespace()
                    if !text.isEmpty { sink.image = text }
                }
            }
        case .body, .directiveBody:
            let text = try render(line.text)
            if line.kind == .heading, mode == .body, sink.heading == nil {
                sink.heading = text.trimmingWhitespace()
                return
            }
            try sink.emit(text)
        }
    }
}

extension Primary {
    var displayName: String {
        switch self {
        case .literal(let v): return v.compactDescription
        case .path(let p): return p.display
        case .unbound(let n): return "@" + n
        }
    }
}
