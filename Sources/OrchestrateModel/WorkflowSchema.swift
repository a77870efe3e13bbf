// The workflow language as a JSON Schema (draft-07) for editors (yaml-language-server gives
// completion and checking from it) and for CI: schemas/workflow.schema.json. The objects and their
// fields are the decoder's own lists of allowed fields (`WorkflowDecoder.stepFields`, ...), each
// field typed in `fieldTypes` below; `with:` is each step type's input schema, chosen by `uses`.
// A field the decoder gains appears at the next `orchestrate schema workflow`; until it is typed
// here it accepts anything, and `WorkflowSchemaTests` names it.
//
// The schema is looser than `orchestrate validate` where a schema cannot say more: references
// between steps, expressions, cycles, cron syntax and input types checked at run time.
import OrchestrateJSON

public enum WorkflowSchema {
    /// One kind of mapping in the language: the decoder's allowed fields and those it requires.
    struct Shape {
        let name: String
        let fields: [String]
        let required: [String]
        let types: [String: JSONValue]
        /// `on:` may be written empty (null).
        var nullable = false
    }

    /// Every mapping the decoder reads with a fixed list of fields.
    static var shapes: [Shape] {
        [
            Shape(name: "workflow", fields: WorkflowDecoder.topLevelFields, required: ["name", "steps"], types: topLevelTypes),
            Shape(name: "step", fields: WorkflowDecoder.stepFields, required: ["uses"], types: stepTypes),
            Shape(name: "retry", fields: WorkflowDecoder.retryFields, required: [], types: retryTypes),
            Shape(name: "input", fields: WorkflowDecoder.inputFields, required: [], types: inputTypes),
            Shape(name: "secret", fields: WorkflowDecoder.secretFields, required: [], types: secretTypes),
            Shape(name: "defaults", fields: WorkflowDecoder.defaultsFields, required: [], types: defaultsTypes),
            Shape(name: "concurrency_limit", fields: WorkflowDecoder.concurrencyFields, required: ["key", "limit"],
                  types: concurrencyTypes),
            Shape(name: "compensate", fields: WorkflowDecoder.compensateFields, required: ["uses"], types: compensateTypes),
            Shape(name: "on_finish_entry", fields: WorkflowDecoder.hookFields, required: ["uses"], types: hookTypes),
            Shape(name: "on", fields: WorkflowDecoder.triggerFields, required: [], types: triggerTypes, nullable: true),
            Shape(name: "schedule", fields: WorkflowDecoder.scheduleFields, required: ["cron"], types: scheduleTypes),
            Shape(name: "watch", fields: WorkflowDecoder.watchFields, required: ["path"], types: watchTypes),
        ]
    }

    /// Fields the decoder accepts that have no type here yet (`step.hold_timeout`): the schema
    /// lets them hold anything.
    public static var untypedFields: [String] {
        shapes.flatMap { shape in shape.fields.filter { shape.types[$0] == nil }.map { "\(shape.name).\($0)" } }
    }

    /// The whole schema; `stepTypes` gives `uses` its known values and `with:` its schema per type.
    public static func document(stepTypes: [StepInfo]) -> JSONValue {
        var definitions: [String: JSONValue] = [
            "duration": object([
                "type": "string",
                "pattern": .string(durationPattern),
                "description": "a duration: a number and a unit (ms, s, m, h, d), as in 500ms, 30s, 10m or 1h30m",
            ]),
            "expression": object([
                "type": "string",
                "pattern": "\\$\\{\\{",
                "description": "a value computed when the step runs: ${{ inputs.name }}, ${{ steps.id.outputs.x }}",
            ]),
            "identifier": object(["type": "string", "pattern": .string(identifierPattern)]),
            "with": object([
                "type": ["object", "null"],
                "description": "the step type's inputs (orchestrate plugins inspect TYPE)",
            ]),
        ]
        for shape in shapes { definitions[shape.name] = shapeSchema(shape) }
        definitions["remote"] = remoteSchema
        if case .object(var secret)? = definitions["secret"] {
            secret["minProperties"] = 1  // env or file
            definitions["secret"] = .object(secret)
        }
        var conditionals: [JSONValue] = []
        for type in stepTypes.sorted(by: { $0.id < $1.id }) {
            definitions["with:" + type.id] = withSchema(type.inputSchema, stepType: type.id)
            let required = type.inputSchema["required"]?.arrayValue ?? []
            var then: [String: JSONValue] = ["properties": object(["with": ref("with:" + type.id)])]
            if !required.isEmpty { then["required"] = ["with"] }
            conditionals.append(object([
                "if": object(["properties": object(["uses": object(["const": .string(type.id)])]), "required": ["uses"]]),
                "then": .object(then),
            ]))
        }
        // `uses` and `with` in a step, a compensation and an on_finish entry: per step type.
        let known = JSONValue.array(stepTypes.map(\.id).sorted().map(JSONValue.string))
        for name in ["step", "compensate", "on_finish_entry"] {
            guard case .object(var shape)? = definitions[name] else { continue }
            if !conditionals.isEmpty { shape["allOf"] = .array(conditionals) }
            if case .object(var properties)? = shape["properties"], case .object(var uses)? = properties["uses"] {
                uses["examples"] = known
                properties["uses"] = .object(uses)
                shape["properties"] = .object(properties)
            }
            definitions[name] = .object(shape)
        }
        guard case .object(var root)? = definitions.removeValue(forKey: "workflow") else { return .null }
        root["$schema"] = "http://json-schema.org/draft-07/schema#"
        root["title"] = "orchestrate workflow (version 1)"
        root["description"] = "A workflow file for orchestrate: run with `orchestrate run FILE`, check with `orchestrate validate FILE`."
        root["definitions"] = .object(definitions)
        return .object(root)
    }

    // MARK: the objects' fields

    static let topLevelTypes: [String: JSONValue] = [
        "version": object(["const": 1, "description": "the language version; 1"]),
        "name": object(["type": ["string", "number", "boolean"], "description": "the workflow's name"]),
        "description": object(["type": ["string", "number", "boolean", "null"]]),
        "inputs": object([
            "type": ["object", "null"],
            "description": "what a run is given: --input NAME=VALUE, inputs.NAME in expressions",
            "propertyNames": ref("identifier"),
            "additionalProperties": object(["anyOf": [
                object(["enum": .array(InputType.allCases.map { .string($0.rawValue) })]), ref("input"),
            ]]),
        ]),
        "secrets": object([
            "type": ["object", "null"],
            "description": "secrets read from the environment at each attempt: secrets.NAME in expressions",
            "propertyNames": ref("identifier"),
            "additionalProperties": ref("secret"),
        ]),
        "defaults": ref("defaults"),
        "concurrency": concurrencySchema,
        "remotes": object([
            "type": ["object", "null"],
            "description": "named connections steps use as with: { remote: NAME } (docs/remotes.md)",
            "propertyNames": ref("identifier"),
            "additionalProperties": ref("remote"),
        ]),
        "steps": object([
            "type": "object",
            "description": "the steps, by id; they run as soon as the steps they need have succeeded",
            "minProperties": 1,
            "propertyNames": ref("identifier"),
            "additionalProperties": ref("step"),
        ]),
        "outputs": object(["type": ["object", "null"], "description": "the run's outputs, usually ${{ }} expressions"]),
        "on_finish": object([
            "type": "array",
            "description": "step calls made when the run ends (notify, clean up)",
            "items": ref("on_finish_entry"),
        ]),
        "on": ref("on"),
        "retention": object([
            "description": "how long finished runs are kept, or off",
            "anyOf": [ref("duration"), object(["const": "off"])],
        ]),
    ]

    static let stepTypes: [String: JSONValue] = [
        "uses": object(["type": "string", "minLength": 1, "description": "the step type (orchestrate plugins list)"]),
        "with": ref("with"),
        "needs": object([
            "description": "steps that must succeed before this one",
            "anyOf": [ref("identifier"), object(["type": "array", "items": ref("identifier"), "uniqueItems": true])],
        ]),
        "if": object(["type": ["string", "boolean"], "description": "run only when this expression is true"]),
        "retry": ref("retry"),
        "timeout": ref("duration"),
        "concurrency": concurrencySchema,
        "idempotency_key": object(["type": "string"]),
        "compensate": ref("compensate"),
        "for_each": object([
            "description": "run the step once per item (item in expressions): a list or one ${{ }} expression",
            "anyOf": [object(["type": "array"]), object(["type": "string", "pattern": "^\\s*\\$\\{\\{.*\\}\\}\\s*$"])],
        ]),
        "max_parallel": object(["type": "integer", "minimum": 1, "maximum": .int(Int64(Int32.max)),
                                "description": "with for_each: items run at once"]),
        "continue_on_error": object(["type": "boolean"]),
        "isolation": object(["enum": .array(StepIsolation.allCases.map { .string($0.rawValue) })]),
        "hold_timeout": ref("duration"),
    ]

    static let retryTypes: [String: JSONValue] = [
        "max_attempts": object(["type": "integer", "minimum": 1, "maximum": .int(Int64(Int32.max)),
                                "description": "attempts in all, the first included"]),
        "initial_interval": ref("duration"),
        "backoff": object(["type": "number", "minimum": 1]),
        "max_interval": ref("duration"),
        "jitter": object(["enum": .array(Jitter.allCases.map { .string($0.rawValue) })]),
        "non_retryable": object(["type": "array", "items": object(["type": "string"]),
                                 "description": "error kinds or codes never retried"]),
    ]

    static let inputTypes: [String: JSONValue] = [
        "type": object(["enum": .array(InputType.allCases.map { .string($0.rawValue) })]),
        "required": object(["type": "boolean"]),
        "default": object([:]),
        "description": object(["type": ["string", "number", "boolean"]]),
    ]

    static let secretTypes: [String: JSONValue] = [
        "env": object(["type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
                       "description": "the environment variable holding the secret"]),
        "file": object(["type": "string", "pattern": "^(/|~/)", "description": "a file holding the secret (absolute path)"]),
    ]

    /// A remote: its `type` and that type's connection fields; a secret field by reference.
    static var remoteSchema: JSONValue {
        let reference = object([
            "type": "object", "additionalProperties": false, "minProperties": 1, "maxProperties": 1,
            "properties": object(["env": secretTypes["env"]!, "file": secretTypes["file"]!]),
        ])
        let fields = Set(RemoteType.allCases.flatMap(\.fields))
        var properties: [String: JSONValue] = [
            "type": object(["enum": .array(RemoteType.allCases.map { .string($0.rawValue) })]),
        ]
        for field in fields { properties[field] = object(["description": "as the step input of that name; or { env: VAR } / { file: PATH }"]) }
        for type in RemoteType.allCases {
            for field in type.secretFields { properties[field] = reference }
        }
        return object(["type": "object", "required": ["type"], "additionalProperties": false, "properties": .object(properties)])
    }

    static let defaultsTypes: [String: JSONValue] = [
        "timeout": ref("duration"),
        "retry": ref("retry"),
        "hold_timeout": ref("duration"),
    ]

    static let concurrencyTypes: [String: JSONValue] = [
        "key": object(["type": "string"]),
        "limit": object(["type": "integer", "minimum": 1, "maximum": .int(Int64(Int32.max))]),
    ]

    static let compensateTypes: [String: JSONValue] = [
        "uses": object(["type": "string", "minLength": 1]),
        "with": ref("with"),
        "retry": ref("retry"),
        "timeout": ref("duration"),
    ]

    static let hookTypes: [String: JSONValue] = [
        "when": object(["anyOf": [hookStatus, object(["type": "array", "items": hookStatus])]]),
        "uses": object(["type": "string", "minLength": 1]),
        "with": ref("with"),
        "timeout": ref("duration"),
    ]

    static let triggerTypes: [String: JSONValue] = [
        "schedule": object(["anyOf": [ref("schedule"), object(["type": "array", "items": ref("schedule")])]]),
        "watch": ref("watch"),
    ]

    static let scheduleTypes: [String: JSONValue] = [
        "cron": object(["type": "string", "description": "five fields: minute hour day-of-month month day-of-week"]),
        "timezone": object(["type": "string", "description": "an IANA name such as Europe/Berlin"]),
        "inputs": object(["type": ["object", "null"]]),
        "overlap": object(["enum": .array(ScheduleOverlap.allCases.map { .string($0.rawValue) })]),
        "catchup": ref("duration"),
    ]

    static let watchTypes: [String: JSONValue] = [
        "path": object(["type": "string", "minLength": 1, "description": "the folder to watch"]),
        "recursive": object(["type": "boolean"]),
        "include": globs,
        "exclude": globs,
        "settle": ref("duration"),
        "inputs": object(["type": "object"]),
        "feed": object(["type": "string"]),
        "destination": object(["type": "string"]),
        "after": object(["type": "string", "pattern": "^\\s*(keep|delete|move-to\\s+\\S.*)\\s*$",
                         "description": "keep, delete or move-to DIR"]),
    ]

    static let concurrencySchema = object([
        "description": "a { key, limit } or a list of them: at most limit steps with that key at once",
        "anyOf": [ref("concurrency_limit"), object(["type": "array", "items": ref("concurrency_limit")])],
    ])
    static let hookStatus = object(["enum": .array(WorkflowDecoder.hookStatuses.map(JSONValue.string))])
    static let globs = object(["anyOf": [object(["type": "string"]), object(["type": "array", "items": object(["type": "string"])])]])

    /// `[A-Za-z_][A-Za-z0-9_-]*`, as `FieldReader.isIdentifier`.
    static let identifierPattern = "^[A-Za-z_][A-Za-z0-9_-]*$"
    /// What `parseDuration` reads: number-unit parts from the largest unit to the smallest.
    static let durationPattern = #"^(?=.)(\d*\.?\d+d)?(\d*\.?\d+h)?(\d*\.?\d+m)?(\d*\.?\d+s)?(\d*\.?\d+ms)?$"#

    // MARK: building

    private static func shapeSchema(_ shape: Shape) -> JSONValue {
        var properties: [String: JSONValue] = [:]
        for field in shape.fields { properties[field] = shape.types[field] ?? object([:]) }
        var schema: [String: JSONValue] = [
            "type": shape.nullable ? ["object", "null"] : "object",
            "additionalProperties": false,
            "properties": .object(properties),
        ]
        if !shape.required.isEmpty { schema["required"] = .array(shape.required.map(JSONValue.string)) }
        return .object(schema)
    }

    /// A step type's input schema where every value may also be a `${{ }}` expression (its value
    /// is known only when the step runs), as `orchestrate validate` takes them.
    /// A step type that takes a remote gets `remote`, and its required inputs are required only
    /// without one (the remote may give them).
    static func withSchema(_ inputSchema: JSONValue, stepType: String) -> JSONValue {
        guard case .object(var schema) = inputSchema else { return inputSchema }
        if case .object(var properties)? = schema["properties"] {
            properties = properties.mapValues(allowingExpression)
            if RemoteType(stepType: stepType) != nil {
                properties["remote"] = object(["type": "string", "description": "a remote's name: its connection fields are this step's inputs"])
                if let required = schema.removeValue(forKey: "required") {
                    // In allOf, beside the type's own if/then (http.upload's metadata needs create).
                    let withoutRemote = object(["if": object(["not": object(["required": ["remote"]])]),
                                                "then": object(["required": required])])
                    schema["allOf"] = .array((schema["allOf"]?.arrayValue ?? []) + [withoutRemote])
                }
            }
            schema["properties"] = .object(properties)
        }
        if case .object = schema["additionalProperties"] {
            schema["additionalProperties"] = allowingExpression(schema["additionalProperties"]!)
        }
        schema["type"] = ["object", "null"]
        return .object(schema)
    }

    /// `schema`, or an expression string. Annotations stay outside so editors show them.
    private static func allowingExpression(_ schema: JSONValue) -> JSONValue {
        guard case .object(var inner) = schema else { return schema }
        if case .object(let properties)? = inner["properties"] {
            inner["properties"] = .object(properties.mapValues(allowingExpression))
        }
        if let items = inner["items"] { inner["items"] = allowingExpression(items) }
        if case .object? = inner["additionalProperties"] {
            inner["additionalProperties"] = allowingExpression(inner["additionalProperties"]!)
        }
        var outer: [String: JSONValue] = [:]
        for key in ["description", "default", "deprecated", "title"] {
            if let value = inner.removeValue(forKey: key) { outer[key] = value }
        }
        // Nothing to check, or any string is fine already: no alternative needed.
        let constraints = Set(inner.keys)
        if constraints.isEmpty || (inner["type"] == "string" && constraints == ["type"]) {
            return .object(inner.merging(outer) { a, _ in a })
        }
        outer["anyOf"] = [.object(inner), ref("expression")]
        return .object(outer)
    }

    private static func ref(_ name: String) -> JSONValue { object(["$ref": .string("#/definitions/" + name)]) }
    private static func object(_ members: [String: JSONValue]) -> JSONValue { .object(members) }
}
