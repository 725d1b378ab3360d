public import NorqCore

/// `${VAR}`, `${VAR:-default}` and the `$${` escape, applied to scalar values after YAML parsing (so a
/// substituted value, such as a multi-line PEM, can never change the YAML structure).
public enum Interpolation {
    /// Substitutes variables in `text`. `location` is where the scalar starts; errors point at the `${`.
    /// `${VAR:-default}` uses the default when VAR is unset or empty, as the shell does.
    public static func apply(_ text: String, environment: [String: String],
                             location: SourceLocation = SourceLocation()) throws(NorqError) -> String {
        guard text.contains("$") else { return text }
        let chars = Array(text)
        var out = ""
        var i = 0
        var line = location.line, column = location.column
        func here() -> SourceLocation { SourceLocation(file: location.file, line: line, column: column) }
        func advance(_ n: Int) {
            for k in 0..<n where i + k < chars.count {
                if chars[i + k] == "\n" { line += 1; column = 1 } else if column > 0 { column += 1 }
            }
            i += n
        }
        while i < chars.count {
            let c = chars[i]
            if c == "$", i + 2 < chars.count, chars[i + 1] == "$", chars[i + 2] == "{" {
                out += "${"
                advance(3)
                continue
            }
            guard c == "$", i + 1 < chars.count, chars[i + 1] == "{" else {
                out.append(c)
                advance(1)
                continue
            }
            let start = here()
            var j = i + 2
            while j < chars.count, chars[j] != "}" { j += 1 }
            guard j < chars.count else {
                throw NorqError(.configInvalidInterpolation, "unterminated \"${\": missing \"}\"", at: start)
            }
            let inner = String(chars[(i + 2)..<j])
            let name: String
            let fallback: String?
            if let range = inner.range(of: ":-") {
                name = String(inner[..<range.lowerBound])
                fallback = String(inner[range.upperBound...])
            } else {
                name = inner
                fallback = nil
            }
            guard isVariableName(name) else {
                throw NorqError(.configInvalidInterpolation,
                                "\"${\(inner.prefix(40))}\" is not a variable reference (use ${NAME} or ${NAME:-default})",
                                at: start, hint: "write $${ for a literal ${")
            }
            if let value = environment[name], !(fallback != nil && value.isEmpty) {
                out += value
            } else if let fallback {
                out += fallback
            } else {
                throw NorqError(.configUnsetVariable, "environment variable \(name) is not set (line \(start.line))",
                                at: start, hint: "set \(name) or write ${\(name):-default}")
            }
            advance(j + 1 - i)
        }
        return out
    }

    static func isVariableName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first == "_" || (first.isASCII && first.properties.isAlphabetic) else {
            return false
        }
        return name.unicodeScalars.allSatisfy { $0 == "_" || ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) }
    }

    /// Interpolates every scalar value of `node` (mapping keys are left as written).
    static func apply(to node: ConfigNode, environment: [String: String]) throws(NorqError) -> ConfigNode {
        var node = node
        switch node.value {
        case .null: break
        case .scalar(let text, let quoted):
            var start = node.location
            if quoted, start.column > 0 { start.column += 1 }
            node.value = .scalar(try apply(text, environment: environment, location: start), quoted: quoted)
        case .sequence(let items):
            var result: [ConfigNode] = []
            for item in items { result.append(try apply(to: item, environment: environment)) }
            node.value = .sequence(result)
        case .mapping(let pairs):
            var result: [(key: ConfigNode, value: ConfigNode)] = []
            for pair in pairs { result.append((pair.key, try apply(to: pair.value, environment: environment))) }
            node.value = .mapping(result)
        }
        return node
    }
}
