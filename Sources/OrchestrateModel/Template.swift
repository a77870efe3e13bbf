// Values whose strings may hold `${{ … }}`: step `with:` trees, keys, outputs.
import OrchestrateJSON

/// A YAML value tree in which strings may contain expressions.
///
/// - `"${{ steps.a.outputs.size }}"` alone is `.expression` and keeps the value's type (an
///   integer stays an integer, an object stays an object).
/// - `"bytes=${{ inputs.offset }}-"` is `.interpolation`: always a string, each value inserted
///   as text (strings as themselves, anything else as compact JSON).
/// - Subtrees without any expression collapse to `.literal`.
///
///     let t = try Template(parsing: "${{ inputs.api }}/me/videos")
///     try t.evaluate(in: EvaluationContext(inputs: ["api": "https://x"]))   // "https://x/me/videos"
public indirect enum Template: Sendable {
    case literal(JSONValue)
    case expression(Expression)
    case interpolation([TemplatePart])
    case array([Template])
    case object([String: Template])

    /// Parses one string (not YAML): the template a YAML string scalar with this text would give.
    public init(parsing text: String, file: String = "<template>") throws(Diagnostic) {
        let start = SourceLocation(file: file, line: 1, column: 1)
        var bag = DiagnosticBag()
        self = TemplateBuilder.string(text, locate: { start.advanced(by: $0) }, bag: &bag)
        if let first = bag.diagnostics.first { throw first }
    }

    /// The value with every expression evaluated.
    public func evaluate(in context: EvaluationContext) throws(EvaluationError) -> JSONValue {
        switch self {
        case .literal(let v): return v
        case .expression(let e): return try e.evaluate(in: context)
        case .interpolation(let parts):
            var out = ""
            for part in parts {
                switch part {
                case .text(let s): out += s
                case .expression(let e): out += try e.evaluate(in: context).interpolated
                }
            }
            return .string(out)
        case .array(let items):
            var out: [JSONValue] = []
            out.reserveCapacity(items.count)
            for item in items { out.append(try item.evaluate(in: context)) }
            return .array(out)
        case .object(let fields):
            var out: [String: JSONValue] = [:]
            for (key, value) in fields { out[key] = try value.evaluate(in: context) }
            return .object(out)
        }
    }

    /// True when the template holds no expression (its value is known before the run).
    public var isLiteral: Bool {
        if case .literal = self { return true }
        return expressions.isEmpty
    }

    /// The literal value, when `isLiteral`.
    public var literalValue: JSONValue? {
        isLiteral ? try? evaluate(in: EvaluationContext()) : nil
    }

    /// Every expression in the template, in no particular order.
    /// Whether any expression in the template may read `run.dir`.
    public var readsRunDirectory: Bool { expressions.contains(where: \.readsRunDirectory) }

    public var expressions: [Expression] {
        switch self {
        case .literal: return []
        case .expression(let e): return [e]
        case .interpolation(let parts):
            return parts.compactMap { if case .expression(let e) = $0 { return e }; return nil }
        case .array(let items): return items.flatMap(\.expressions)
        case .object(let fields): return fields.values.flatMap(\.expressions)
        }
    }

    /// The step ids referenced anywhere in the template.
    public var referencedSteps: Set<String> {
        expressions.reduce(into: Set()) { $0.formUnion($1.referencedSteps) }
    }
}

/// A piece of an interpolated string.
public enum TemplatePart: Sendable {
    case text(String)
    case expression(Expression)
}

/// Builds templates from YAML nodes, reporting expression errors at their exact columns and
/// duplicate keys in any mapping.
enum TemplateBuilder {
    static func build(_ node: YAMLNode, source: SourceText, bag: inout DiagnosticBag) -> Template {
        switch node.kind {
        case .scalar(let scalar):
            let value = scalar.jsonValue
            guard case .string(let text) = value else { return .literal(value) }
            return string(text, locate: { source.location(ofValueOffset: $0, in: node) }, bag: &bag)
        case .sequence(let items):
            let templates = items.map { build($0, source: source, bag: &bag) }
            if let values = literals(templates) { return .literal(.array(values)) }
            return .array(templates)
        case .mapping:
            var fields: [String: Template] = [:]
            for (name, pair) in uniquePairs(node, bag: &bag) {
                fields[name] = build(pair.value, source: source, bag: &bag)
            }
            if let values = literals(Array(fields.values)) {
                return .literal(.object(Dictionary(uniqueKeysWithValues: zip(fields.keys, values))))
            }
            return .object(fields)
        }
    }

    private static func literals(_ templates: [Template]) -> [JSONValue]? {
        var out: [JSONValue] = []
        for t in templates {
            guard case .literal(let v) = t else { return nil }
            out.append(v)
        }
        return out
    }

    /// The pairs of a mapping with string keys, first occurrence of each key only; reports
    /// duplicate and non-scalar keys.
    static func uniquePairs(_ node: YAMLNode, noun: String = "key", bag: inout DiagnosticBag) -> [(String, YAMLPair)] {
        let pairs = node.pairs ?? []
        var out: [(String, YAMLPair)] = []
        out.reserveCapacity(pairs.count)
        // Small mappings (most of a workflow's) are searched; large ones (`steps:`) hashed.
        var seen: [String: SourceLocation]? = pairs.count > 16 ? Dictionary(minimumCapacity: pairs.count) : nil
        for pair in pairs {
            guard let key = pair.key.scalar else {
                bag.error("a mapping key must be a plain string, not \(pair.key.kindDescription)", at: pair.key.location)
                continue
            }
            let first = seen != nil ? seen![key.text] : out.first { $0.0 == key.text }?.1.key.location
            if let first {
                bag.error("duplicate \(noun) '\(key.text)' (first defined at \(first.line):\(first.column))",
                          at: pair.key.location)
                continue
            }
            seen?[key.text] = pair.key.location
            out.append((key.text, pair))
        }
        return out
    }

    /// Splits a string into text and `${{ … }}` parts; `locate` maps an offset in `text` to the file.
    static func string(_ text: String, locate: @escaping (Int) -> SourceLocation, bag: inout DiagnosticBag) -> Template {
        let s = Array(text.unicodeScalars)
        var parts: [TemplatePart] = []
        var literal = String.UnicodeScalarView()
        var i = 0
        var failed = false
        while i < s.count {
            guard s[i] == "$", i + 2 < s.count, s[i + 1] == "{", s[i + 2] == "{" else {
                literal.append(s[i])
                i += 1
                continue
            }
            // Find the closing "}}", skipping quoted strings inside the expression.
            var j = i + 3
            var quote: Unicode.Scalar?
            var close: Int?
            while j < s.count {
                if let q = quote {
                    if s[j] == "\\", q == "\"" { j += 2; continue }
                    if s[j] == q { quote = nil }
                } else if s[j] == "'" || s[j] == "\"" {
                    quote = s[j]
                } else if s[j] == "}", j + 1 < s.count, s[j + 1] == "}" {
                    close = j
                    break
                }
                j += 1
            }
            guard let end = close else {
                bag.error("unclosed '${{': expected '}}' to end the expression", at: locate(i))
                failed = true
                break
            }
            if !literal.isEmpty { parts.append(.text(String(literal))); literal = String.UnicodeScalarView() }
            let inner = String(String.UnicodeScalarView(s[(i + 3)..<end]))
            let base = i + 3
            do {
                let e = try ExpressionParser.parse(inner, locate: { locate(base + $0) })
                parts.append(.expression(e))
            } catch {
                bag.append(error)
                failed = true
            }
            i = end + 2
        }
        if !literal.isEmpty { parts.append(.text(String(literal))) }
        if failed { return .literal(.string(text)) }
        switch parts.count {
        case 0: return .literal(.string(""))
        case 1:
            switch parts[0] {
            case .text(let t): return .literal(.string(t))
            case .expression(let e): return .expression(e)
            }
        default: return .interpolation(parts)
        }
    }
}
