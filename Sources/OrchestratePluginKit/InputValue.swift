import OrchestrateJSON

/// A type an `@Input` can have: its JSON Schema, and how it is read from the resolved `with:`.
///
/// Provided: `String`, `Int`, `Int64`, `Bool`, `[String]`, `[Int64]`, `[String: String]`,
/// `[String: JSONValue]`, `JSONValue` (anything), `ByteRate`, any `Optional` of them, and
/// `String`-backed enums that adopt `InputEnum`.
public protocol InputValue {
    /// The schema of the type (`{"type":"integer"}`); `@Input` adds description, default and
    /// constraints.
    static var inputSchema: JSONValue { get }
    /// What a value must be, for errors: "an integer", "one of tus, put".
    static var expectation: String { get }
    /// The value, or nil when `json` is not one of this type.
    init?(inputJSON json: JSONValue)
    /// The value as JSON (for `default` in the schema).
    var inputJSON: JSONValue { get }
    /// The value an absent input has when it has no default: nil for optionals, none otherwise
    /// (the input is then required).
    static var whenAbsent: Self? { get }
}

extension InputValue {
    public static var whenAbsent: Self? { nil }
    /// "an integer", from the schema's `type`.
    public static var expectation: String { inputSchema["type"]?.stringValue.map(article) ?? "any JSON value" }
}

extension String: InputValue {
    public static var inputSchema: JSONValue { ["type": "string"] }
    public init?(inputJSON json: JSONValue) { guard let value = json.stringValue else { return nil }; self = value }
    public var inputJSON: JSONValue { .string(self) }
}

extension Int64: InputValue {
    public static var inputSchema: JSONValue { ["type": "integer"] }
    public init?(inputJSON json: JSONValue) { guard let value = json.intValue else { return nil }; self = value }
    public var inputJSON: JSONValue { .int(self) }
}

extension Int: InputValue {
    public static var inputSchema: JSONValue { ["type": "integer"] }
    public init?(inputJSON json: JSONValue) { guard let value = json.intValue.flatMap(Int.init(exactly:)) else { return nil }; self = value }
    public var inputJSON: JSONValue { .int(Int64(self)) }
}

extension Bool: InputValue {
    public static var inputSchema: JSONValue { ["type": "boolean"] }
    public init?(inputJSON json: JSONValue) { guard let value = json.boolValue else { return nil }; self = value }
    public var inputJSON: JSONValue { .bool(self) }
}

extension JSONValue: InputValue {
    /// Any JSON value (`{}`: no `type`).
    public static var inputSchema: JSONValue { [:] }
    public init?(inputJSON json: JSONValue) { self = json }
    public var inputJSON: JSONValue { self }
}

extension Array: InputValue where Element: InputValue {
    public static var inputSchema: JSONValue { ["type": "array", "items": Element.inputSchema] }
    public static var expectation: String { "an array of \(pluralNoun(Element.expectation))" }
    public init?(inputJSON json: JSONValue) {
        guard let array = json.arrayValue else { return nil }
        let elements = array.compactMap(Element.init(inputJSON:))
        guard elements.count == array.count else { return nil }
        self = elements
    }
    public var inputJSON: JSONValue { .array(map(\.inputJSON)) }
}

extension Dictionary: InputValue where Key == String, Value: InputValue {
    /// An object whose values are all of one type (headers, environment variables).
    public static var inputSchema: JSONValue { ["type": "object", "additionalProperties": Value.inputSchema] }
    public static var expectation: String { "an object of \(pluralNoun(Value.expectation))" }
    public init?(inputJSON json: JSONValue) {
        guard let object = json.objectValue else { return nil }
        let values = object.compactMapValues(Value.init(inputJSON:))
        guard values.count == object.count else { return nil }
        self = values
    }
    public var inputJSON: JSONValue { .object(mapValues(\.inputJSON)) }
}

extension Optional: InputValue where Wrapped: InputValue {
    public static var inputSchema: JSONValue { Wrapped.inputSchema }
    public static var expectation: String { Wrapped.expectation }
    public init?(inputJSON json: JSONValue) {
        guard let value = Wrapped(inputJSON: json) else { return nil }
        self = .some(value)
    }
    public var inputJSON: JSONValue { self?.inputJSON ?? .null }
    /// Absent is a value: nil.
    public static var whenAbsent: Self? { .some(.none) }
}

/// A closed set of strings (`protocol: tus | put | …`): the schema is an `enum` of the raw values.
///
/// ```swift
/// enum UploadProtocol: String, CaseIterable, InputEnum { case tus, put, post }
/// ```
public protocol InputEnum: InputValue, RawRepresentable<String>, CaseIterable {}

extension InputEnum {
    public static var inputSchema: JSONValue { ["type": "string", "enum": .array(allCases.map { .string($0.rawValue) })] }
    public static var expectation: String { "one of " + allCases.map(\.rawValue).joined(separator: ", ") }
    public init?(inputJSON json: JSONValue) {
        guard let text = json.stringValue, let value = Self(rawValue: text) else { return nil }
        self = value
    }
    public var inputJSON: JSONValue { .string(rawValue) }
}

/// "an integer" → "integers", for "an array of integers".
private func pluralNoun(_ expectation: String) -> String {
    (expectation.hasPrefix("an ") ? String(expectation.dropFirst(3)) : expectation.hasPrefix("a ") ? String(expectation.dropFirst(2)) : expectation) + "s"
}
