import OrchestrateJSON

/// One input of a step, declared once: its name, type, help, default and constraints. The step's
/// JSON Schema is generated from these declarations and `StepInputs.read` fills them in from the
/// resolved `with:`, so nothing is written twice. See `StepInputs` for a whole example.
///
/// ```swift
/// @Input(help: "final path of the file", minLength: 1) var destination: String      // required
/// @Input(help: "bytes per PATCH", minimum: 1) var chunkSize: Int64 = 64 << 20        // default
/// @Input(help: "expected SHA-256 (hex)", pattern: "^[0-9a-fA-F]{64}$") var sha256: String?  // optional
/// ```
///
/// The input's name is the property's, in snake_case (`chunkSize` → `chunk_size`), unless
/// `name:` says otherwise. A property with an initial value has that `default` (the host fills it
/// in for absent inputs, C plugins included); an `Optional` without one is optional; anything
/// else is `required`. `minimum`, `maximum`, `minLength`, `pattern` (a regular expression the
/// text must contain; anchor it with `^…$`) and `schema` (more JSON Schema keywords)
/// are checked by the host before the step runs. `$name` gives `name` and `given` after reading.
@propertyWrapper
public struct Input<Value: InputValue>: @unchecked Sendable {
    let explicitName: String?
    let help: String
    let declaredDefault: Value?
    let constraints: [String: JSONValue]
    /// Filled once by `StepInputs.read`, before the inputs are handed to the step; shared by the
    /// copies of the struct (reading builds a fresh instance and fills it in place).
    let slot = InputSlot<Value>()

    /// An input with a default.
    public init(wrappedValue: Value, name: String? = nil, help: String, minimum: Int64? = nil, maximum: Int64? = nil,
                minLength: Int? = nil, pattern: String? = nil, deprecated: Bool = false, schema: [String: JSONValue] = [:])
    {
        self.init(name: name, help: help, default: wrappedValue, minimum: minimum, maximum: maximum, minLength: minLength,
                  pattern: pattern, deprecated: deprecated, schema: schema)
    }

    /// A required input, or an optional one when `Value` is an `Optional`.
    public init(name: String? = nil, help: String, minimum: Int64? = nil, maximum: Int64? = nil, minLength: Int? = nil,
                pattern: String? = nil, deprecated: Bool = false, schema: [String: JSONValue] = [:])
    {
        self.init(name: name, help: help, default: nil, minimum: minimum, maximum: maximum, minLength: minLength,
                  pattern: pattern, deprecated: deprecated, schema: schema)
    }

    private init(name: String?, help: String, default value: Value?, minimum: Int64?, maximum: Int64?, minLength: Int?,
                 pattern: String?, deprecated: Bool, schema: [String: JSONValue])
    {
        explicitName = name
        self.help = help
        declaredDefault = value
        var constraints = schema
        if let minimum { constraints["minimum"] = .int(minimum) }
        if let maximum { constraints["maximum"] = .int(maximum) }
        if let minLength { constraints["minLength"] = .int(Int64(minLength)) }
        if let pattern { constraints["pattern"] = .string(pattern) }
        if deprecated { constraints["deprecated"] = true }
        self.constraints = constraints
    }

    public var wrappedValue: Value {
        guard let value = slot.value ?? declaredDefault ?? Value.whenAbsent else {
            preconditionFailure("input '\(slot.name)' used before StepInputs.read filled it in")
        }
        return value
    }

    /// After reading: the input's name and whether the workflow gave it (or the default applies).
    public var projectedValue: InputSlot<Value> { slot }
}

/// Where `StepInputs.read` puts an input's value.
public final class InputSlot<Value>: @unchecked Sendable {
    /// The input's name in `with:`.
    public internal(set) var name = ""
    /// True when the resolved `with:` had a non-null value for it (not its default).
    public internal(set) var given = false
    var value: Value?
}

/// What `StepInputs` needs from an `Input` without knowing its type.
protocol DeclaredInput {
    func name(forProperty label: String) -> String
    /// The property's schema, and whether it must be given.
    var schema: (property: JSONValue, required: Bool) { get }
    func fill(name: String, from json: JSONValue?) throws(StepError)
}

extension Input: DeclaredInput {
    func name(forProperty label: String) -> String {
        explicitName ?? snakeCase(label.hasPrefix("_") ? String(label.dropFirst()) : label)
    }

    var schema: (property: JSONValue, required: Bool) {
        var property = Value.inputSchema.objectValue ?? [:]
        property["description"] = .string(help)
        if let declaredDefault { property["default"] = declaredDefault.inputJSON }
        property.merge(constraints) { _, new in new }
        return (.object(property), declaredDefault == nil && Value.whenAbsent == nil)
    }

    func fill(name: String, from json: JSONValue?) throws(StepError) {
        slot.name = name
        guard let json, !json.isNull else {
            guard let value = declaredDefault ?? Value.whenAbsent else {
                throw .invalidInput("input '\(name)' is required", code: "missing_input")
            }
            slot.value = value
            return
        }
        guard let value = Value(inputJSON: json) else {
            throw .invalidInput("input '\(name)' must be \(Value.expectation), not \(json.jsonText)", code: "invalid_input")
        }
        slot.value = value
        slot.given = true
    }
}

/// `chunkSize` → `chunk_size`, `caFile` → `ca_file`, `sha256` → `sha256`.
func snakeCase(_ name: String) -> String {
    var result = ""
    for character in name {
        if character.isUppercase {
            if !result.isEmpty { result.append("_") }
            result.append(contentsOf: character.lowercased())
        } else {
            result.append(character)
        }
    }
    return result
}
