// Turning `--input K=V` and `--inputs FILE.json` into the typed `inputs` object of a run.
import OrchestrateJSON

/// Why the given inputs do not fit the workflow: one human-readable message per problem.
public struct InputErrors: Error, Sendable, CustomStringConvertible {
    public let messages: [String]

    public init(messages: [String]) { self.messages = messages }

    public var description: String { messages.joined(separator: "\n") }
}

extension Workflow {
    /// Checks and converts the inputs given for a run.
    ///
    /// - `strings` (from `--input K=V`) are converted per declared type: `integer` and `number`
    ///   parsed, `boolean` from `true`/`false`, `object`/`array` parsed as JSON text, `path` made
    ///   absolute against `currentDirectory`.
    /// - `json` (from `--inputs FILE.json`) must already have the declared types (an integral
    ///   number is accepted for `integer`; `path` strings are made absolute too).
    /// - A name in both: the string wins. Absent inputs take their default; absent optional
    ///   inputs without a default are left out (expressions read them as null).
    ///
    ///     try wf.resolveInputs(strings: ["source": "a.mov"], json: [:], currentDirectory: "/tmp")
    ///     // {"api": "https://api.vimeo.com", "source": "/tmp/a.mov", "title": ""}
    public func resolveInputs(strings: [String: String], json: [String: JSONValue],
                              currentDirectory: String) throws(InputErrors) -> JSONValue
    {
        var messages: [String] = []
        var resolved: [String: JSONValue] = [:]
        let declared = Set(inputs.map(\.name))
        for name in Set(strings.keys).union(json.keys).sorted() where !declared.contains(name) {
            let known = inputs.isEmpty ? "this workflow declares no inputs"
                : "known inputs: \(inputs.map(\.name).joined(separator: ", "))"
            messages.append("unknown input '\(name)'\(didYouMean(name, inputs.map(\.name))) (\(known))")
        }
        for input in inputs {
            if let text = strings[input.name] {
                switch input.convert(text: text, currentDirectory: currentDirectory) {
                case .success(let v): resolved[input.name] = v
                case .failure(let p): messages.append(p.message)
                }
            } else if let value = json[input.name] {
                switch input.check(value, currentDirectory: currentDirectory) {
                case .success(let v): resolved[input.name] = v
                case .failure(let p): messages.append(p.message)
                }
            } else if let value = input.defaultValue {
                resolved[input.name] = input.type == .path ? input.absolutePath(value, currentDirectory) : value
            } else if input.required {
                messages.append("missing required input '\(input.name)' (\(input.type.rawValue)); "
                                + "give it with --input \(input.name)=VALUE")
            }
        }
        guard messages.isEmpty else { throw InputErrors(messages: messages) }
        return .object(resolved)
    }
}

extension InputDeclaration {
    /// A command-line string converted to the declared type.
    func convert(text: String, currentDirectory: String) -> Result<JSONValue, InputProblem> {
        let bad = { (expected: String) in
            Result<JSONValue, InputProblem>.failure(InputProblem("input '\(name)' must be \(expected), got '\(text)'"))
        }
        switch type {
        case .string: return .success(.string(text))
        case .path:
            guard !text.isEmpty else { return .failure(InputProblem("input '\(name)' must be a path, got an empty string")) }
            return .success(.string(PathText.absolute(text, against: currentDirectory)))
        case .integer:
            guard let i = Int64(text.trimmingWhitespace) else { return bad("an integer") }
            return .success(.int(i))
        case .number:
            let t = text.trimmingWhitespace
            if let i = Int64(t) { return .success(.int(i)) }
            guard let d = Double(t), d.isFinite, !t.lowercased().contains("n") else { return bad("a number") }
            return .success(.double(d))
        case .boolean:
            switch text.trimmingWhitespace {
            case "true": return .success(.bool(true))
            case "false": return .success(.bool(false))
            default: return bad("true or false")
            }
        case .object, .array:
            guard let v = try? JSONValue(parsing: text) else { return bad("\(article(type.rawValue)) as JSON text") }
            return check(v, currentDirectory: currentDirectory)
        }
    }

    /// A JSON value checked against the declared type (paths made absolute).
    func check(_ value: JSONValue, currentDirectory: String) -> Result<JSONValue, InputProblem> {
        guard type.accepts(value) else {
            return .failure(InputProblem("input '\(name)' must be \(article(type.rawValue)), got \(article(value.typeName))"))
        }
        if type == .integer, let i = value.intValue { return .success(.int(i)) }
        if type == .path {
            guard value.stringValue?.isEmpty == false else { return .failure(InputProblem("input '\(name)' must be a path, got an empty string")) }
            return .success(absolutePath(value, currentDirectory))
        }
        return .success(value)
    }

    func absolutePath(_ value: JSONValue, _ currentDirectory: String) -> JSONValue {
        guard case .string(let s) = value, !s.isEmpty else { return value }
        return .string(PathText.absolute(s, against: currentDirectory))
    }
}

extension InputType {
    /// Whether a JSON value has this type (`integer` takes integral numbers; `path` takes strings).
    func accepts(_ value: JSONValue) -> Bool {
        switch (self, value) {
        case (.string, .string), (.path, .string), (.boolean, .bool), (.object, .object), (.array, .array): return true
        case (.number, .int), (.number, .double): return true
        case (.integer, .int): return true
        case (.integer, .double(let d)): return d.isFinite && d.rounded() == d
        default: return false
        }
    }
}

/// One input problem, as a Result failure.
struct InputProblem: Error {
    let message: String
    init(_ message: String) { self.message = message }
}
