import OrchestrateJSON

/// Typed access to the step's inputs. Each accessor throws `StepError` of kind invalid-input
/// naming the key, so a step can read its inputs in one line each:
///
/// ```swift
/// let source = try step.string("source")
/// let overwrite = try step.bool("overwrite", default: false)
/// let env = try step.optionalStringMap("env") ?? [:]
/// ```
///
/// An input that is absent or JSON `null` counts as missing.
extension StepContext {
    public func string(_ key: String) throws(StepError) -> String {
        try required(key, optionalString(key))
    }

    public func optionalString(_ key: String) throws(StepError) -> String? {
        try typed(key, "a string") { $0.stringValue }
    }

    public func int(_ key: String) throws(StepError) -> Int64 {
        try required(key, optionalInt(key))
    }

    public func optionalInt(_ key: String) throws(StepError) -> Int64? {
        try typed(key, "an integer") { $0.intValue }
    }

    public func bool(_ key: String) throws(StepError) -> Bool {
        try required(key, typed(key, "a boolean") { $0.boolValue })
    }

    public func bool(_ key: String, default fallback: Bool) throws(StepError) -> Bool {
        try typed(key, "a boolean") { $0.boolValue } ?? fallback
    }

    public func stringArray(_ key: String) throws(StepError) -> [String] {
        try required(key, optionalStringArray(key))
    }

    public func optionalStringArray(_ key: String) throws(StepError) -> [String]? {
        try typed(key, "an array of strings") { value in
            guard let array = value.arrayValue else { return nil }
            let strings = array.compactMap(\.stringValue)
            return strings.count == array.count ? strings : nil
        }
    }

    public func optionalIntArray(_ key: String) throws(StepError) -> [Int64]? {
        try typed(key, "an array of integers") { value in
            guard let array = value.arrayValue else { return nil }
            let ints = array.compactMap(\.intValue)
            return ints.count == array.count ? ints : nil
        }
    }

    public func object(_ key: String) throws(StepError) -> [String: JSONValue] {
        try required(key, optionalObject(key))
    }

    public func optionalObject(_ key: String) throws(StepError) -> [String: JSONValue]? {
        try typed(key, "an object") { $0.objectValue }
    }

    /// An object whose values are all strings (environment variables, headers).
    public func optionalStringMap(_ key: String) throws(StepError) -> [String: String]? {
        try typed(key, "an object of strings") { value in
            guard let object = value.objectValue else { return nil }
            let strings = object.compactMapValues(\.stringValue)
            return strings.count == object.count ? strings : nil
        }
    }

    // MARK: - Helpers

    private func typed<T>(_ key: String, _ description: String, _ convert: (JSONValue) -> T?) throws(StepError) -> T? {
        guard let value = inputs[key], !value.isNull else { return nil }
        guard let converted = convert(value) else {
            throw .invalidInput("input '\(key)' must be \(description), not \(value.typeName)", code: "invalid_input")
        }
        return converted
    }

    private func required<T>(_ key: String, _ value: T?) throws(StepError) -> T {
        guard let value else { throw .invalidInput("input '\(key)' is required", code: "missing_input") }
        return value
    }
}
