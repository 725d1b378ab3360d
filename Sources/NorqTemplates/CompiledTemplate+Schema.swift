public import NorqCore

extension CompiledTemplate {
    /// The template with `schema` attached: its nullable-access warnings are added to ``warnings``.
    public func with(schema: DataSchema) -> CompiledTemplate {
        var copy = self
        copy.schema = schema
        copy.warnings += nullableAccessWarnings(schema)
        return copy
    }

    /// `template/data-schema` errors of `data` against the template's schema (none without a schema).
    public func schemaErrors(_ data: JSONValue, limit: Int = 20) -> [NorqError] {
        schema?.validate(data, limit: limit) ?? []
    }

    /// `template/nullable-access` for each use of a nullable schema field (one not in `required`) that is not
    /// guarded: not inside `::: if field` (or `field != null`, or a condition `&&`-ing such a test), and
    /// without a `default` pipe. One warning per field and line.
    public func nullableAccessWarnings(_ schema: DataSchema) -> [NorqError] {
        let nullable = schema.nullablePaths
        guard !nullable.isEmpty else { return [] }
        var walker = NullableWalker(nullable: nullable)
        if let titleTemplate { walker.visit(titleTemplate, guarded: []) }
        for setter in setters { walker.visit(setter.value, guarded: []) }
        if case .markdown(let nodes) = body { walker.visit(nodes, guarded: []) }
        return walker.warnings
    }
}

/// Walks a compiled template collecting unguarded uses of nullable fields.
struct NullableWalker {
    let nullable: Set<String>
    var warnings: [NorqError] = []
    var seen = Set<String>()
    /// Bounds the walk on pathological templates.
    var budget = 100_000

    init(nullable: Set<String>) { self.nullable = nullable }

    mutating func visit(_ nodes: [BodyNode], guarded: Set<String>) {
        for node in nodes { visit(node, guarded: guarded) }
    }

    mutating func visit(_ node: BodyNode, guarded: Set<String>) {
        budget -= 1
        guard budget > 0 else { return }
        switch node {
        case .line(let line):
            visit(line.text, guarded: guarded)
            for link in line.links { visit(link, guarded: guarded) }
            for image in line.images { visit(image, guarded: guarded) }
        case .blank, .missingPartial: break
        case .conditional(let branches, let otherwise):
            for (condition, body) in branches {
                visit(condition, guarded: guarded)
                visit(body, guarded: guarded.union(Self.guards(condition)))
            }
            visit(otherwise, guarded: guarded)
        case .each(let list, _, let body):
            visit(list, guarded: guarded)
            visit(body, guarded: guarded.union(Self.path(list).map { [$0] } ?? []))
        case .directive(_, let body), .group(let body):
            visit(body, guarded: guarded)
        }
    }

    mutating func visit(_ inline: Inline, guarded: Set<String>) {
        for segment in inline.segments {
            switch segment {
            case .expr(let expr): visit(expr, guarded: guarded)
            case .partial(let nodes): visit(nodes, guarded: guarded)
            case .text, .missingPartial: break
            }
        }
    }

    mutating func visit(_ value: FrontValue, guarded: Set<String>) {
        switch value {
        case .literal: break
        case .template(let inline): visit(inline, guarded: guarded)
        case .array(let items): for item in items { visit(item, guarded: guarded) }
        case .object(let object): for item in object.values { visit(item, guarded: guarded) }
        }
    }

    /// Conditions only read their operands (a null is falsy): no warning for the test itself.
    mutating func visit(_ condition: Condition, guarded: Set<String>) {}

    mutating func visit(_ expr: Expr, guarded: Set<String>) {
        guard let path = Self.path(expr) else { return }
        if expr.pipes.contains(where: { $0.name == "default" }) { return }
        // Each prefix: `order.customer.name` is unguarded when `order.customer` is nullable and unguarded.
        let parts = path.split(separator: ".").map(String.init)
        var prefix = ""
        for part in parts {
            prefix = prefix.isEmpty ? part : prefix + "." + part
            guard nullable.contains(prefix), !guarded.contains(prefix) else { continue }
            let key = "\(prefix)@\(expr.location.line)"
            guard seen.insert(key).inserted, warnings.count < 100 else { return }
            warnings.append(NorqError(.templateNullableAccess,
                                      "\"\(prefix)\" is nullable (not in the schema's required) and used without a guard",
                                      at: expr.location,
                                      hint: "wrap it in ::: if \(prefix), or write {{\(path) | default \"...\"}}"))
            return
        }
    }

    /// The data path an expression reads (`user.first_name`), nil for loop variables and literals.
    static func path(_ expr: Expr) -> String? {
        guard case .path(let ref) = expr.primary, case .data = ref.root else { return nil }
        return ref.components.map(\.key).joined(separator: ".")
    }

    /// Paths a condition proves non-null in its branch: `x`, `x != null`, `a && b`.
    static func guards(_ condition: Condition) -> Set<String> {
        switch condition {
        case .value(let expr): return path(expr).map { [$0] } ?? []
        case .and(let a, let b): return guards(a).union(guards(b))
        case .compare(let lhs, .ne, let rhs):
            if case .literal(.null) = rhs.primary { return path(lhs).map { [$0] } ?? [] }
            if case .literal(.null) = lhs.primary { return path(rhs).map { [$0] } ?? [] }
            return []
        case .compare(let lhs, _, let rhs):
            // A comparison with a non-null literal is false for null: the path is non-null inside.
            if case .literal(let value) = rhs.primary, value != .null { return path(lhs).map { [$0] } ?? [] }
            return []
        case .not, .or: return []
        }
    }
}
