import OrchestrateJSON

/// A step's outputs as a struct: each `@Output` property is one declared output, the step's
/// output schema is generated from them, and `StepContext.setOutputs` writes the values the step
/// set (what `steps.ID.outputs.NAME` reads in a workflow).
///
/// ```swift
/// struct Copy: StepDefinition {
///     struct Outputs: StepOutputs {
///         @Output(help: "SHA-256 (hex) of the content", pattern: "^[0-9a-f]{64}$") var sha256: String
///         @Output(help: "bytes copied", minimum: 0) var size: Int64
///         @Output(help: "the destination") var path: String
///     }
///     static let outputSchema = Outputs.schemaText
///     static func run(_ step: StepContext) throws {
///         …
///         var outputs = Outputs()
///         outputs.sha256 = digest
///         outputs.size = size
///         outputs.path = destination
///         try step.setOutputs(outputs)
///     }
/// }
/// ```
///
/// Outputs several steps share go in a struct of their own, held as a plain stored property
/// (`var transfer = TransferOutputs()`): its outputs are flattened into the step's, as `StepInputs`
/// groups are. The schema has no `additionalProperties`, so `orchestrate validate` refuses a
/// `steps.X.outputs.Y` whose `Y` is not declared.
public protocol StepOutputs {
    init()
}

extension StepOutputs {
    /// The generated JSON Schema of the outputs object: every declared output.
    public static var schema: JSONValue {
        var properties: [String: JSONValue] = [:]
        var required: [JSONValue] = []
        for (name, output) in Self().declaredOutputs() {
            let (property, isRequired) = output.schema
            properties[name] = property
            if isRequired { required.append(.string(name)) }
        }
        var schema: [String: JSONValue] = ["type": "object", "properties": .object(properties)]
        if !required.isEmpty { schema["required"] = .array(required) }
        return .object(schema)
    }

    /// `schema` as JSON text, for `StepDefinition.outputSchema`.
    public static var schemaText: String { schema.jsonText }

    /// The outputs as they are written: every output set (and every `nullable` one), by name.
    /// Throws, naming it, when an output that is always written was not set.
    public func jsonObject() throws(StepError) -> [String: JSONValue] {
        var object: [String: JSONValue] = [:]
        for (name, output) in declaredOutputs() {
            if let value = try output.json(name: name) { object[name] = value }
        }
        return object
    }

    /// Every `@Output` of this struct and of the groups it holds, by output name, in declaration order.
    func declaredOutputs() -> [(String, any DeclaredOutput)] {
        Mirror(reflecting: self).children.flatMap { child -> [(String, any DeclaredOutput)] in
            if let output = child.value as? any DeclaredOutput {
                return [(output.name(forProperty: child.label ?? ""), output)]
            }
            if let group = child.value as? any StepOutputs { return group.declaredOutputs() }
            return []
        }
    }
}

extension StepContext {
    /// Writes `outputs` (see `StepOutputs`): all of them, or none when one that is always written
    /// was not set (a bug in the step: the attempt fails, permanent, code `missing_output`).
    public func setOutputs<T: StepOutputs>(_ outputs: T) throws(StepError) {
        for (name, value) in try outputs.jsonObject().sorted(by: { $0.key < $1.key }) {
            setOutput(name, value)
        }
    }
}
