/// Reduces inline Markdown to plain text at compile time: links keep their text (URLs are collected),
/// images are collected and dropped from the text, emphasis and code markers go, `{attrs}` go.
/// Template expressions are single placeholder scalars here, so data is never interpreted as Markdown.
enum MarkdownInline {
    struct Result {
        var text: String
        var links: [String]
        var images: [String]
    }

    static func reduce(_ chars: [Character]) -> Result {
        var result = Result(text: "", links: [], images: [])
        let removable = removableDelimiters(chars)
        var i = 0
        while i < chars.count {
            let c = chars[i]
            if c == "\\", i + 1 < chars.count, chars[i + 1].isPunctuation || chars[i + 1].isSymbol {
                result.text.append(chars[i + 1])
                i += 2
                continue
            }
            if c == "`" {
                if let close = chars[(i + 1)...].firstIndex(of: "`") {
                    result.text += String(chars[(i + 1)..<close])
                    i = close + 1
                    continue
                }
            }
            let isImage = c == "!" && i + 1 < chars.count && chars[i + 1] == "["
            if c == "[" || isImage {
                let open = isImage ? i + 1 : i
                if let (label, url, end) = linkAt(chars, open) {
                    let inner = reduce(label)
                    if isImage {
                        result.images.append(url)
                        result.images += inner.images
                    } else {
                        result.links.append(url)
                        result.links += inner.links
                        result.images += inner.images
                        result.text += inner.text
                    }
                    i = skipAttributes(chars, end)
                    continue
                }
            }
            if c == "<", let close = chars[(i + 1)...].firstIndex(of: ">") {
                let inside = String(chars[(i + 1)..<close])
                if inside.hasPrefix("http://") || inside.hasPrefix("https://") || inside.hasPrefix("mailto:") {
                    result.links.append(inside)
                    result.text += inside
                    i = close + 1
                    continue
                }
            }
            if removable.contains(i) {
                i += 1
                continue
            }
            result.text.append(c)
            i += 1
        }
        // collapse runs of spaces left by removed markers and trim
        var collapsed = ""
        var lastSpace = false
        for ch in result.text {
            if ch == " " {
                if lastSpace { continue }
                lastSpace = true
            } else {
                lastSpace = false
            }
            collapsed.append(ch)
        }
        result.text = collapsed.trimmingWhitespace()
        return result
    }

    /// `[label](url "title")` starting at `open` (the `[`): label, url, index after `)`.
    private static func linkAt(_ chars: [Character], _ open: Int) -> ([Character], String, Int)? {
        var depth = 0
        var j = open
        var closeBracket: Int? = nil
        while j < chars.count {
            if chars[j] == "\\" { j += 2; continue }
            if chars[j] == "[" { depth += 1 }
            if chars[j] == "]" {
                depth -= 1
                if depth == 0 { closeBracket = j; break }
            }
            j += 1
        }
        guard let closeBracket, closeBracket + 1 < chars.count, chars[closeBracket + 1] == "(" else { return nil }
        var k = closeBracket + 2
        var parens = 1
        while k < chars.count {
            if chars[k] == "(" { parens += 1 }
            if chars[k] == ")" {
                parens -= 1
                if parens == 0 { break }
            }
            k += 1
        }
        guard k < chars.count else { return nil }
        var url = String(chars[(closeBracket + 2)..<k]).trimmingWhitespace()
        if let space = url.firstIndex(of: " ") { url = String(url[..<space]) }  // drop a "title"
        if url.hasPrefix("<"), url.hasSuffix(">") { url = String(url.dropFirst().dropLast()) }
        return (Array(chars[(open + 1)..<closeBracket]), url, k + 1)
    }

    private static func skipAttributes(_ chars: [Character], _ i: Int) -> Int {
        guard i < chars.count, chars[i] == "{", let close = chars[i...].firstIndex(of: "}") else { return i }
        return close + 1
    }

    /// Indices of emphasis delimiters (`*`, `_`, `~~`) that pair up on this line.
    private static func removableDelimiters(_ chars: [Character]) -> Set<Int> {
        var candidates: [Character: [Range<Int>]] = [:]
        var i = 0
        while i < chars.count {
            let c = chars[i]
            guard c == "*" || c == "_" || c == "~" else {
                if c == "\\" { i += 1 }
                i += 1
                continue
            }
            var j = i
            while j < chars.count, chars[j] == c { j += 1 }
            let before: Character? = i > 0 ? chars[i - 1] : nil
            let after: Character? = j < chars.count ? chars[j] : nil
            let beforeSpace = before == nil || before!.isWhitespace
            let afterSpace = after == nil || after!.isWhitespace
            let opener = !afterSpace && (beforeSpace || before!.isPunctuation || c == "*")
            let closer = !beforeSpace && (afterSpace || after!.isPunctuation || c == "*")
            var ok = opener || closer
            if c == "_", let before, let after, (before.isLetter || before.isNumber), (after.isLetter || after.isNumber) {
                ok = false  // snake_case
            }
            if c == "~", j - i != 2 { ok = false }
            if ok { candidates[c, default: []].append(i..<j) }
            i = j
        }
        var result = Set<Int>()
        for (_, runs) in candidates where runs.count >= 2 {
            let usable = runs.count % 2 == 0 ? runs : Array(runs.dropLast())
            for r in usable { result.formUnion(r) }
        }
        return result
    }
}
