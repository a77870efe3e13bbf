// Checks a step's `with:` against its type's input JSON Schema before anything runs.
import OrchestrateJSON

/// `orchestrate validate`'s side of the input check: the YAML `with:` against the subset
/// `SchemaCheck` describes (the host checks the resolved object again before the plugin runs).
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
        let checker = SchemaCheck<YAMLNode>(stepType: stepType, describe: { "'\($0)'" }, suggest: didYouMean)
        for problem in checker.problems(node, schema: schema, anchor: anchor) {
            bag.error(problem.message, at: problem.location)
        }
    }
}

extension YAMLNode: SchemaCheckable {
    var schemaLocation: SourceLocation { location }

    var schemaShape: SchemaShape<YAMLNode> {
        switch kind {
        case .mapping:
            var scratch = DiagnosticBag()  // duplicates were reported when the template was built
            return .object(TemplateBuilder.uniquePairs(self, bag: &scratch).map {
                SchemaMember(name: $0.0, keyLocation: $0.1.key.location, value: $0.1.value)
            })
        case .sequence(let items):
            return .array(items)
        case .scalar(let scalar):
            let value = scalar.jsonValue
            guard case .string(let text) = value, text.contains("${{") else { return .value(value) }
            var scratch = DiagnosticBag()
            switch TemplateBuilder.string(text, locate: { _ in self.location }, bag: &scratch) {
            case .interpolation: return .interpolatedString
            case .literal(let v) where scratch.isEmpty: return .value(v)
            default: return .unknown
            }
        }
    }
}
