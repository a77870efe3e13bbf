/// A JSON value: what flows between workflow expressions, the store, and plugins.
///
/// Integers and floating-point numbers are kept apart so that a byte offset or a count survives
/// a round trip exactly (`"${{ steps.a.outputs.size }}"` stays the integer the step set).
///
/// ```swift
/// let v = try JSONValue(parsing: #"{"size": 42, "name": "a.mov"}"#)
/// v["size"]?.intValue      // 42
/// v.jsonText               // {"name":"a.mov","size":42}   (keys sorted)
/// ```
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}

extension JSONValue {
    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public subscript(index: Int) -> JSONValue? {
        if case .array(let a) = self, a.indices.contains(index) { return a[index] }
        return nil
    }

    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }
    public var boolValue: Bool? { if case .bool(let b) = self { return b }; return nil }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a }; return nil }
    public var objectValue: [String: JSONValue]? { if case .object(let o) = self { return o }; return nil }

    /// The value as an integer: an `.int`, or a `.double` with no fractional part.
    public var intValue: Int64? {
        switch self {
        case .int(let i): return i
        case .double(let d) where d.rounded() == d && abs(d) < 9.2e18: return Int64(d)
        default: return nil
        }
    }

    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    public var isNull: Bool { if case .null = self { return true }; return false }

    /// The JSON type name as JSON Schema spells it ("integer" for `.int`).
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .int: return "integer"
        case .double: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }

    /// Truthiness for `if:` conditions: false, null, 0, "" and empty collections are false.
    public var isTruthy: Bool {
        switch self {
        case .null: return false
        case .bool(let b): return b
        case .int(let i): return i != 0
        case .double(let d): return d != 0 && !d.isNaN
        case .string(let s): return !s.isEmpty
        case .array(let a): return !a.isEmpty
        case .object(let o): return !o.isEmpty
        }
    }

    /// How the value reads when interpolated into a string: strings as themselves, everything
    /// else as compact JSON.
    public var interpolated: String {
        if case .string(let s) = self { return s }
        return jsonText
    }

    /// Replaces every string (keys excepted) by `transform(string)`, recursively.
    public func mapStrings(_ transform: (String) -> String) -> JSONValue {
        switch self {
        case .string(let s): return .string(transform(s))
        case .array(let a): return .array(a.map { $0.mapStrings(transform) })
        case .object(let o): return .object(o.mapValues { $0.mapStrings(transform) })
        default: return self
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
}

extension JSONValue: CustomStringConvertible {
    public var description: String { jsonText }
}
