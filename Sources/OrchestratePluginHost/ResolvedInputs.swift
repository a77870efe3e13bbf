import OrchestrateJSON

/// What the host promises every plugin about the `with:` object it receives (plugin.h): the
/// schema's `default`s are filled in for absent inputs, and the object was checked against the
/// step type's input schema after its expressions were evaluated, at this very attempt.
///
/// `orchestrate validate` can only check what is written; a `${{ steps.x.outputs.y }}` that
/// resolves to a string where an integer is required is caught here, before the plugin runs,
/// as an invalid-input failure (never retried) that names the step and the input.
enum ResolvedInputs {
    /// `inputs` with the defaults of `schema`'s top-level `properties` filled in, or the failure
    /// that says which inputs are wrong. A top-level input that resolved to `null` where its
    /// schema's `type` does not allow null counts as absent (it gets its default, or is dropped):
    /// an optional input fed by an expression that found nothing is simply not given.
    static func prepare(_ inputs: JSONValue, schema: JSONValue, stepType: String, stepID: String) -> Result<JSONValue, StepFailure> {
        guard case .object(var object) = inputs else {
            return .failure(StepFailure(kind: .invalidInput, code: "invalid_input",
                                        message: "step '\(stepID)': the inputs must be a JSON object, not \(inputs.typeName)"))
        }
        for (name, property) in schema["properties"]?.objectValue ?? [:] {
            if let value = object[name], !(value.isNull && !allowsNull(property)) { continue }
            object[name] = property["default"]
        }
        let check = SchemaCheck<JSONValue>(stepType: stepType, describe: describe, quoteValues: true)
        let problems = check.problems(.object(object), schema: schema, anchor: ())
        guard problems.isEmpty else {
            let list = problems.map(\.message).joined(separator: "; ")
            return .failure(StepFailure(kind: .invalidInput, code: "invalid_input", message: "step '\(stepID)': \(list)"))
        }
        return .success(.object(object))
    }

    /// A property schema without a `type`, or whose type lists "null", takes null as a value.
    private static func allowsNull(_ property: JSONValue) -> Bool {
        guard let type = property["type"] else { return true }
        return type.stringValue == "null" || type.arrayValue?.contains(.string("null")) == true
    }

    /// `with.chunk_size` → `input 'chunk_size'`; `with` → `the inputs`.
    private static func describe(_ path: String) -> String {
        path == "with" ? "the inputs" : "input '\(path.dropFirst("with.".count))'"
    }
}
