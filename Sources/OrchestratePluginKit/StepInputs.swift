import OrchestrateJSON

/// A step's inputs as a struct: each `@Input` property is one declared input, the step's JSON
/// Schema is generated from them, and `read` gives the struct filled from the resolved `with:`.
///
/// ```swift
/// struct CopyInputs: StepInputs {
///     @Input(help: "file to copy", minLength: 1) var source: String
///     @Input(help: "path of the copy", minLength: 1) var destination: String
///     @Input(help: "replace an existing destination") var overwrite = false
///     @Input(help: "expected SHA-256 (hex)", minLength: 64) var sha256: String?
/// }
///
/// struct Copy: StepDefinition {
///     static let inputSchema = CopyInputs.schemaText
///     static func run(_ step: StepContext) throws {
///         let inputs = try step.read(CopyInputs.self)
///         if inputs.overwrite { … }
///     }
/// }
/// ```
///
/// Inputs several steps share go in a struct of their own, adopted as a plain stored property
/// (`var transfer = TransferInputs()`): its inputs are flattened into the step's. A group can
/// take parameters for step-specific defaults (`TransferInputs(connections: 1)`), as long as
/// `init()` exists for the group itself.
///
/// Why property wrappers: one line per input holds everything about it (name from the
/// property, type from its Swift type, default from its initial value), as swift-argument-parser
/// declares options, and the step reads typed fields instead of strings. Reading builds a fresh
/// value with `init()` and fills each `@Input`'s slot in place (found by reflection), so a
/// struct read once is immutable afterwards and safe to share between the step's threads.
///
/// Constraints (`minimum`, `minLength`, enums, `schema:`) are enforced by the host, which checks
/// the resolved object against the schema and fills in defaults before the plugin runs; `read`
/// checks types and presence again, so a step never sees a value of the wrong type.
public protocol StepInputs {
    init()
    /// More top-level JSON Schema keywords, e.g. an `if`/`then` between two inputs; none by default.
    static var schemaRules: [String: JSONValue] { get }
}

extension StepInputs {
    public static var schemaRules: [String: JSONValue] { [:] }

    /// The generated JSON Schema of the `with:` object: every declared input, no others.
    public static var schema: JSONValue {
        var properties: [String: JSONValue] = [:]
        var required: [JSONValue] = []
        for (name, input) in Self().declaredInputs() {
            let (property, isRequired) = input.schema
            properties[name] = property
            if isRequired { required.append(.string(name)) }
        }
        var schema: [String: JSONValue] = ["type": "object", "additionalProperties": false, "properties": .object(properties)]
        if !required.isEmpty { schema["required"] = .array(required) }
        schema.merge(schemaRules) { _, rule in rule }
        return .object(schema)
    }

    /// `schema` as JSON text, for `StepDefinition.inputSchema`.
    public static var schemaText: String { schema.jsonText }

    /// The inputs read from `with` (a JSON object); throws invalid-input naming the first input
    /// that is missing or of the wrong type.
    public static func read(from with: JSONValue) throws(StepError) -> Self {
        let inputs = Self()
        for (name, input) in inputs.declaredInputs() {
            try input.fill(name: name, from: with[name])
        }
        return inputs
    }

    /// Every `@Input` of this struct and of the groups it holds, by input name, in declaration order.
    func declaredInputs() -> [(String, any DeclaredInput)] {
        Mirror(reflecting: self).children.flatMap { child -> [(String, any DeclaredInput)] in
            if let input = child.value as? any DeclaredInput {
                return [(input.name(forProperty: child.label ?? ""), input)]
            }
            if let group = child.value as? any StepInputs { return group.declaredInputs() }
            return []
        }
    }
}

extension StepContext {
    /// The step's inputs as `type` (see `StepInputs`).
    public func read<T: StepInputs>(_ type: T.Type) throws(StepError) -> T {
        try T.read(from: inputs)
    }
}
