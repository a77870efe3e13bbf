// Checks a step's `with:` against its type's input JSON Schema before anything runs.
import OrchestrateJSON

/// The JSON Schema subset plugins can rely on being checked at validation time: `type` (a name
/// or a list), `properties`, `required`, `additionalProperties` (bool or schema), `items`,
/// `enum`, `const`, `minimum`, `maximum`, `minLength`, `allOf`, and `if`/`then`/`else` (one input
/// that needs another: `{"if": {"required": ["metadata"]}, "then": {"required": ["create"]}}`).
/// Other keywords are ignored (the plugin checks its inputs again at run time).
///
/// A `then`/`else` schema's `description`, when it has one, is added to its errors: it is where a
/// plugin says why the inputs go together and what to change. Its errors about a missing input
/// point at the first input the `if` requires (the one that brought the condition in).
///
/// Values not known until run time are taken on trust: a string that is one whole `${{ … }}`
/// matches any schema, and an interpolated string (`"a-${{ x }}"`) is a string of unknown text
/// (only its type is checked). Errors point at the offending key or value.
struct SchemaValidator {
    let stepType: String
    let source: SourceText

    /// Checks `node` (nil: `with:` absent, checked as `{}`) against `schema`; `anchor` is where
    /// to report fields missing from the top-level object.
    func check(_ node: YAMLNode?, schema: JSONValue, anchor: SourceLocation, bag: inout DiagnosticBag) {
        check(node, schema: schema, path: "with", anchor: anchor, bag: &bag)
    }

    private enum Shape {
        case object([(String, YAMLPair)])
        case array([YAMLNode])
        case value(JSONValue)
        case interpolatedString
        case unknown  // a whole expression, or a string whose expression had an error
    }

    private func shape(of node: YAMLNode?) -> Shape {
        guard let node else { return .object([]) }
        switch node.kind {
        case .mapping:
            var scratch = DiagnosticBag()  // duplicates were reported when the template was built
            return .object(TemplateBuilder.uniquePairs(node, bag: &scratch))
        case .sequence(let items):
            return .array(items)
        case .scalar(let scalar):
            let value = scalar.jsonValue
            guard case .string(let text) = value, text.contains("${{") else { return .value(value) }
            var scratch = DiagnosticBag()
            switch TemplateBuilder.string(text, locate: { _ in node.location }, bag: &scratch) {
            case .interpolation: return .interpolatedString
            case .literal(let v) where scratch.isEmpty: return .value(v)
            default: return .unknown
            }
        }
    }

    private func typeName(of shape: Shape) -> String? {
        switch shape {
        case .object: return "object"
        case .array: return "array"
        case .interpolatedString: return "string"
        case .value(let v): return v.typeName
        case .unknown: return nil
        }
    }

    private func matches(_ actual: String, _ expected: String, _ shape: Shape) -> Bool {
        if actual == expected { return true }
        if expected == "number", actual == "integer" { return true }
        if expected == "integer", actual == "number", case .value(let v) = shape, v.intValue != nil { return true }
        return false
    }

    private func describe(_ path: String) -> String { "'\(path)'" }

    private func check(_ node: YAMLNode?, schema: JSONValue, path: String, anchor: SourceLocation,
                       bag: inout DiagnosticBag)
    {
        let location = node?.location ?? anchor
        if case .bool(false) = schema {
            bag.error("\(describe(path)) is not allowed for step type '\(stepType)'", at: location)
            return
        }
        guard case .object(let s) = schema else { return }
        let shape = shape(of: node)
        guard let actual = typeName(of: shape) else { return }

        if let typeSpec = s["type"] {
            let expected = typeSpec.stringValue.map { [$0] } ?? typeSpec.arrayValue?.compactMap(\.stringValue) ?? []
            if !expected.isEmpty, !expected.contains(where: { matches(actual, $0, shape) }) {
                let names = expected.map { article($0) }.joined(separator: " or ")
                bag.error("\(describe(path)) must be \(names), not \(article(actual))", at: location)
                return
            }
        }
        if case .value(let v) = shape {
            if let options = s["enum"]?.arrayValue, !options.contains(where: { ExpressionEvaluator.equal($0, v) }) {
                let list = options.map(quoted).joined(separator: ", ")
                bag.error("\(describe(path)) must be one of \(list), not \(quoted(v))", at: location)
            }
            if let constant = s["const"], !ExpressionEvaluator.equal(constant, v) {
                bag.error("\(describe(path)) must be \(quoted(constant)), not \(quoted(v))", at: location)
            }
            if let n = v.doubleValue {
                if let min = s["minimum"]?.doubleValue, n < min {
                    bag.error("\(describe(path)) must be at least \(min.formatted), not \(v.jsonText)", at: location)
                }
                if let max = s["maximum"]?.doubleValue, n > max {
                    bag.error("\(describe(path)) must be at most \(max.formatted), not \(v.jsonText)", at: location)
                }
            }
            if case .string(let text) = v, let minLength = s["minLength"]?.intValue, text.count < minLength {
                bag.error(minLength == 1 ? "\(describe(path)) must not be empty"
                          : "\(describe(path)) must be at least \(minLength) characters long", at: location)
            }
        }
        switch shape {
        case .object(let pairs):
            let properties = s["properties"]?.objectValue ?? [:]
            let present = Set(pairs.map(\.0))
            let owner = path == "with" ? "for step type '\(stepType)'" : "in \(describe(path))"
            for case .string(let name) in s["required"]?.arrayValue ?? [] where !present.contains(name) {
                bag.error("missing required \(path == "with" ? "input" : "field") '\(name)' \(owner)", at: anchor)
            }
            for (name, pair) in pairs {
                let childPath = "\(path).\(name)"
                if let propertySchema = properties[name] {
                    check(pair.value, schema: propertySchema, path: childPath, anchor: pair.key.location, bag: &bag)
                    continue
                }
                switch s["additionalProperties"] {
                case .bool(false)?:
                    let noun = path == "with" ? "input" : "field"
                    bag.error("unknown \(noun) '\(name)' \(owner)\(didYouMean(name, properties.keys.sorted()))",
                              at: pair.key.location)
                case .object?:
                    check(pair.value, schema: s["additionalProperties"]!, path: childPath, anchor: pair.key.location, bag: &bag)
                default:
                    break
                }
            }
        case .array(let items):
            if let itemSchema = s["items"] {
                for (i, item) in items.enumerated() {
                    check(item, schema: itemSchema, path: "\(path)[\(i)]", anchor: item.location, bag: &bag)
                }
            }
        default:
            break
        }
        for part in s["allOf"]?.arrayValue ?? [] {
            check(node, schema: part, path: path, anchor: anchor, bag: &bag)
        }
        if let condition = s["if"] {
            checkConditional(node, condition: condition, then: s["then"], else: s["else"], path: path, anchor: anchor, bag: &bag)
        }
    }

    /// `if`/`then`/`else`: the value is checked against `then` when it satisfies `if` (a value
    /// known only at run time satisfies it), else against `else`.
    private func checkConditional(_ node: YAMLNode?, condition: JSONValue, then: JSONValue?, else otherwise: JSONValue?,
                                  path: String, anchor: SourceLocation, bag: inout DiagnosticBag)
    {
        var test = DiagnosticBag()
        check(node, schema: condition, path: path, anchor: anchor, bag: &test)
        guard let branch = test.isEmpty ? then : otherwise else { return }
        // Inputs missing by the branch are reported where the condition's first required input is.
        var branchAnchor = anchor
        if case .object(let pairs) = shape(of: node),
           let trigger = condition["required"]?.arrayValue?.first?.stringValue,
           let pair = pairs.first(where: { $0.0 == trigger })
        {
            branchAnchor = pair.1.key.location
        }
        var found = DiagnosticBag()
        check(node, schema: branch, path: path, anchor: branchAnchor, bag: &found)
        let why = branch["description"]?.stringValue.map { ": \($0)" } ?? ""
        for d in found.diagnostics { bag.error(d.message + why, at: d.location) }
    }

    private func quoted(_ value: JSONValue) -> String { value.stringValue.map { "'\($0)'" } ?? value.jsonText }
}
