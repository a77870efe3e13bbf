// The JSON Schema subset of step inputs, checked in one place for both moments it matters:
// `orchestrate validate` (a YAML `with:` whose expressions are not evaluated yet) and the host,
// just before a plugin runs (the resolved object).

/// What a value being checked looks like to the checker. `Node` is the checked thing itself
/// (a YAML node, or a `JSONValue`), so errors can point back at where a member came from.
public enum SchemaShape<Node: SchemaCheckable> {
    case object([SchemaMember<Node>])
    case array([Node])
    case value(JSONValue)
    /// A string with an expression inside (`"a-${{ x }}"`): its type is known, its text is not.
    case interpolatedString
    /// Known only at run time (a whole `${{ … }}`): matches any schema.
    case unknown
}

/// One member of an object being checked.
public struct SchemaMember<Node: SchemaCheckable> {
    public let name: String
    public let keyLocation: Node.Location
    public let value: Node

    public init(name: String, keyLocation: Node.Location, value: Node) {
        self.name = name
        self.keyLocation = keyLocation
        self.value = value
    }
}

/// Something `SchemaCheck` can check: a YAML node in the model, a resolved `JSONValue` in the host.
public protocol SchemaCheckable {
    /// Where errors about this value are reported (a line and column; nothing for resolved JSON).
    associatedtype Location
    var schemaLocation: Location { get }
    var schemaShape: SchemaShape<Self> { get }
}

/// The JSON Schema subset plugins can rely on being checked: `type` (a name or a list),
/// `properties`, `required`, `additionalProperties` (bool or schema), `items`, `enum`, `const`,
/// `minimum`, `maximum`, `minLength`, `pattern`, `allOf`, and `if`/`then`/`else` (one input that needs
/// another: `{"if": {"required": ["metadata"]}, "then": {"required": ["create"]}}`). Other
/// keywords are ignored.
///
/// A `then`/`else` schema's `description`, when it has one, is added to its errors: it is where a
/// plugin says why the inputs go together and what to change. Its errors about a missing input
/// point at the first input the `if` requires (the one that brought the condition in).
public struct SchemaCheck<Node: SchemaCheckable> {
    public struct Problem {
        public let message: String
        public let location: Node.Location
    }

    let stepType: String
    /// Names a value by its path (`with.url`): `'with.url'` in a workflow file, `input 'url'` at run time.
    let describe: (String) -> String
    /// Appended to "unknown input 'x'" (a "did you mean …?"), given the known names.
    let suggest: (String, [String]) -> String
    /// Whether type errors quote the offending value (at run time, where it is not on screen).
    let quoteValues: Bool

    public init(stepType: String, describe: @escaping (String) -> String, quoteValues: Bool = false,
                suggest: @escaping (String, [String]) -> String = { _, _ in "" })
    {
        self.stepType = stepType
        self.describe = describe
        self.quoteValues = quoteValues
        self.suggest = suggest
    }

    /// The problems of `node` (nil: absent, checked as `{}`) against `schema`; `anchor` is where
    /// to report fields missing from the top-level object.
    public func problems(_ node: Node?, schema: JSONValue, anchor: Node.Location) -> [Problem] {
        var found: [Problem] = []
        check(node, schema: schema, path: "with", anchor: anchor, into: &found)
        return found
    }

    private func typeName(of shape: SchemaShape<Node>) -> String? {
        switch shape {
        case .object: return "object"
        case .array: return "array"
        case .interpolatedString: return "string"
        case .value(let v): return v.typeName
        case .unknown: return nil
        }
    }

    private func matches(_ actual: String, _ expected: String, _ shape: SchemaShape<Node>) -> Bool {
        if actual == expected { return true }
        if expected == "number", actual == "integer" { return true }
        if expected == "integer", actual == "number", case .value(let v) = shape, v.intValue != nil { return true }
        return false
    }

    private func check(_ node: Node?, schema: JSONValue, path: String, anchor: Node.Location, into found: inout [Problem]) {
        let location = node?.schemaLocation ?? anchor
        func report(_ message: String, at where: Node.Location? = nil) {
            found.append(Problem(message: message, location: `where` ?? location))
        }
        if case .bool(false) = schema {
            report("\(describe(path)) is not allowed for step type '\(stepType)'")
            return
        }
        guard case .object(let s) = schema else { return }
        let shape = node?.schemaShape ?? .object([])
        guard let actual = typeName(of: shape) else { return }

        if let typeSpec = s["type"] {
            let expected = typeSpec.stringValue.map { [$0] } ?? typeSpec.arrayValue?.compactMap { $0.stringValue } ?? []
            if !expected.isEmpty, !expected.contains(where: { matches(actual, $0, shape) }) {
                let names = expected.map { article($0) }.joined(separator: " or ")
                report("\(describe(path)) must be \(names), not \(article(actual))\(quotedScalar(shape))")
                return
            }
        }
        if case .value(let v) = shape {
            if let options = s["enum"]?.arrayValue, !options.contains(where: { JSONValue.sameValue($0, v) }) {
                let list = options.map(quoted).joined(separator: ", ")
                report("\(describe(path)) must be one of \(list), not \(quoted(v))")
            }
            if let constant = s["const"], !JSONValue.sameValue(constant, v) {
                report("\(describe(path)) must be \(quoted(constant)), not \(quoted(v))")
            }
            if let n = v.doubleValue {
                if let min = s["minimum"]?.doubleValue, n < min {
                    report("\(describe(path)) must be at least \(plain(min)), not \(v.jsonText)")
                }
                if let max = s["maximum"]?.doubleValue, n > max {
                    report("\(describe(path)) must be at most \(plain(max)), not \(v.jsonText)")
                }
            }
            if case .string(let text) = v, let minLength = s["minLength"]?.intValue, text.count < minLength {
                report(minLength == 1 ? "\(describe(path)) must not be empty"
                       : "\(describe(path)) must be at least \(minLength) characters long")
            }
            if case .string(let text) = v, let pattern = s["pattern"]?.stringValue, !matchesPattern(text, pattern) {
                // The schema's description says what the value is, which the pattern alone hides.
                let what = s["description"]?.stringValue.map { ": \($0)" } ?? ""
                report("\(describe(path)) must match \(pattern), not \(quoted(v))\(what)")
            }
        }
        switch shape {
        case .object(let members):
            let properties = s["properties"]?.objectValue ?? [:]
            // Closures, not key paths: in this generic function a key path is built at run time
            // on every call (swift_getKeyPath: most of the cost of checking a no-op step's inputs).
            // Words of messages, built only when there is something to report.
            func owner() -> String { path == "with" ? "for step type '\(stepType)'" : "in \(describe(path))" }
            if let required = s["required"]?.arrayValue, !required.isEmpty {
                let present = Set(members.map { $0.name })
                for case .string(let name) in required where !present.contains(name) {
                    found.append(Problem(message: "missing required \(path == "with" ? "input" : "field") '\(name)' \(owner())",
                                         location: anchor))
                }
            }
            for member in members {
                let childPath = "\(path).\(member.name)"
                if let propertySchema = properties[member.name] {
                    check(member.value, schema: propertySchema, path: childPath, anchor: member.keyLocation, into: &found)
                    continue
                }
                switch s["additionalProperties"] {
                case .bool(false)?:
                    let noun = path == "with" ? "input" : "field"
                    report("unknown \(noun) '\(member.name)' \(owner())\(suggest(member.name, properties.keys.sorted()))",
                           at: member.keyLocation)
                case .object?:
                    check(member.value, schema: s["additionalProperties"]!, path: childPath, anchor: member.keyLocation,
                          into: &found)
                default:
                    break
                }
            }
        case .array(let items):
            if let itemSchema = s["items"] {
                for (i, item) in items.enumerated() {
                    check(item, schema: itemSchema, path: "\(path)[\(i)]", anchor: item.schemaLocation, into: &found)
                }
            }
        default:
            break
        }
        for part in s["allOf"]?.arrayValue ?? [] {
            check(node, schema: part, path: path, anchor: anchor, into: &found)
        }
        if let condition = s["if"] {
            checkConditional(node, shape, condition: condition, then: s["then"], else: s["else"], path: path, anchor: anchor,
                             into: &found)
        }
    }

    /// `if`/`then`/`else`: the value is checked against `then` when it satisfies `if` (a value
    /// known only at run time satisfies it), else against `else`.
    private func checkConditional(_ node: Node?, _ shape: SchemaShape<Node>, condition: JSONValue, then: JSONValue?,
                                  else otherwise: JSONValue?, path: String, anchor: Node.Location, into found: inout [Problem])
    {
        var test: [Problem] = []
        check(node, schema: condition, path: path, anchor: anchor, into: &test)
        guard let branch = test.isEmpty ? then : otherwise else { return }
        // Inputs missing by the branch are reported where the condition's first required input is.
        var branchAnchor = anchor
        if case .object(let members) = shape,
           let trigger = condition["required"]?.arrayValue?.first?.stringValue,
           let member = members.first(where: { $0.name == trigger })
        {
            branchAnchor = member.keyLocation
        }
        var branchProblems: [Problem] = []
        check(node, schema: branch, path: path, anchor: branchAnchor, into: &branchProblems)
        let why = branch["description"]?.stringValue.map { ": \($0)" } ?? ""
        for p in branchProblems { found.append(Problem(message: p.message + why, location: p.location)) }
    }

    /// JSON Schema `pattern`: a regular expression found anywhere in the text (anchor it with
    /// `^…$` to match the whole). A pattern that does not compile matches everything: the
    /// plugin's mistake is not the workflow's.
    private func matchesPattern(_ text: String, _ pattern: String) -> Bool {
        guard let regex = try? Regex(pattern) else { return true }
        return (try? regex.firstMatch(in: text)) != nil
    }

    private func quoted(_ value: JSONValue) -> String { value.stringValue.map { "'\($0)'" } ?? value.jsonText }

    /// ` ("abc")` after a type error at run time, for a scalar (cut to 60 characters).
    private func quotedScalar(_ shape: SchemaShape<Node>) -> String {
        guard quoteValues, case .value(let v) = shape else { return "" }
        let text = v.jsonText
        return " (" + (text.count > 60 ? String(text.prefix(57)) + "…" : text) + ")"
    }

    private func plain(_ number: Double) -> String {
        number.rounded() == number && abs(number) < 1e15 ? String(Int64(number)) : String(number)
    }
}

extension JSONValue {
    /// JSON equality with 1 == 1.0, as expressions and schemas compare.
    public static func sameValue(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a, b) {
        case (.int(let x), .int(let y)): return x == y
        case (.int, .double), (.double, .int), (.double, .double): return a.doubleValue == b.doubleValue
        case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy { sameValue($0, $1) }
        case (.object(let x), .object(let y)):
            return x.count == y.count && x.allSatisfy { key, value in y[key].map { sameValue(value, $0) } ?? false }
        default: return a == b
        }
    }
}

/// "a string", "an integer", "null".
public func article(_ typeName: String) -> String {
    if typeName == "null" { return "null" }
    return (["a", "e", "i", "o", "u"].contains(typeName.first.map(String.init) ?? "") ? "an " : "a ") + typeName
}

/// A resolved value, as the host checks it before the plugin runs: its members in name order,
/// no locations (errors name the input instead).
extension JSONValue: SchemaCheckable {
    public var schemaLocation: Void { () }

    public var schemaShape: SchemaShape<JSONValue> {
        switch self {
        case .object(let members):
            return .object(members.sorted { $0.key < $1.key }.map { SchemaMember(name: $0.key, keyLocation: (), value: $0.value) })
        case .array(let items):
            return .array(items)
        default:
            return .value(self)
        }
    }
}
