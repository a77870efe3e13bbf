import OrchestrateJSON

/// One output of a step, declared once: its name, type, help and constraints. The step's output
/// schema is generated from these declarations and `StepContext.setOutputs` writes the values
/// set, so the schema cannot list an output the step does not write, nor miss one it does. See
/// `StepOutputs` for a whole example.
///
/// ```swift
/// @Output(help: "bytes copied", minimum: 0) var size: Int64                        // always written
/// @Output(help: "when copied: SHA-256 (hex)", pattern: "^[0-9a-f]{64}$") var sha256: String?  // absent when nil
/// @Output(help: "the ETag, or null", nullable: true) var etag: String?           // always written, null when nil
/// ```
///
/// The output's name is the property's, in snake_case (`resumedFrom` → `resumed_from`), unless
/// `name:` says otherwise. Its type is any type an `@Input` can have (`InputValue`). A non-Optional
/// output is `required` in the schema: `setOutputs` refuses to write the outputs while one is
/// unset. An `Optional` one is left out while nil, unless it is `nullable` (then it is required,
/// with `null` among its types, and nil is written as `null`). `minimum`, `pattern` and `schema`
/// (more JSON Schema keywords) document what the values are.
@propertyWrapper
public struct Output<Value: InputValue>: @unchecked Sendable {
    let explicitName: String?
    let help: String
    let nullable: Bool
    let constraints: [String: JSONValue]
    /// nil until the step sets it.
    var value: Value?

    public init(name: String? = nil, help: String, minimum: Int64? = nil, pattern: String? = nil, nullable: Bool = false,
                schema: [String: JSONValue] = [:])
    {
        precondition(!nullable || Value.whenAbsent != nil, "nullable: true is for Optional outputs")
        explicitName = name
        self.help = help
        self.nullable = nullable
        var constraints = schema
        if let minimum { constraints["minimum"] = .int(minimum) }
        if let pattern { constraints["pattern"] = .string(pattern) }
        self.constraints = constraints
    }

    /// The value set; nil for an `Optional` output not set. Reading a non-Optional output before
    /// setting it is a programming error.
    public var wrappedValue: Value {
        get {
            guard let current = value ?? Value.whenAbsent else { preconditionFailure("output read before it was set") }
            return current
        }
        set { value = newValue }
    }
}

/// What `StepOutputs` needs from an `Output` without knowing its type.
protocol DeclaredOutput {
    func name(forProperty label: String) -> String
    /// The property's schema, and whether the output is always written.
    var schema: (property: JSONValue, required: Bool) { get }
    /// The JSON to write: nil to leave it out; throws when a required output was not set.
    func json(name: String) throws(StepError) -> JSONValue?
}

extension Output: DeclaredOutput {
    func name(forProperty label: String) -> String {
        explicitName ?? snakeCase(label.hasPrefix("_") ? String(label.dropFirst()) : label)
    }

    var schema: (property: JSONValue, required: Bool) {
        var property = Value.inputSchema.objectValue ?? [:]
        if nullable {
            switch property["type"] {
            case .string(let type)?: property["type"] = [.string(type), "null"]
            case .array(var types)? where !types.contains("null"): types.append("null"); property["type"] = .array(types)
            default: break  // no type: null is already allowed
            }
        }
        property["description"] = .string(help)
        property.merge(constraints) { _, new in new }
        return (.object(property), Value.whenAbsent == nil || nullable)
    }

    func json(name: String) throws(StepError) -> JSONValue? {
        guard let current = value ?? Value.whenAbsent else {
            throw .permanent("the step did not set its output '\(name)' (a bug in the step type)", code: "missing_output")
        }
        let json = current.inputJSON
        let optional = Value.whenAbsent != nil
        if optional && json.isNull && !nullable { return .none }  // not `nil`: that would be JSONValue's null
        return json
    }
}
