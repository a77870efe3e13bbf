// YAML tree → workflow model: fields, types, required fields, durations, retry, templates.
// Cross-references (needs, cycles, expression references, step types, schemas) are checked
// afterwards by `WorkflowValidator`, on what this produced.
import OrchestrateJSON

/// What the validator needs to know about a step beyond the public `Step`: where things were.
struct StepSyntax {
    let id: String
    let keyLocation: SourceLocation
    /// As written, with locations (duplicates included).
    let needs: [(String, SourceLocation)]
    let hasUses: Bool
    let withNode: YAMLNode?
    /// The `with` key, where inputs missing from it are reported.
    let withKeyLocation: SourceLocation?
    let compensateWithNode: YAMLNode?
    let compensateWithKeyLocation: SourceLocation?
    let maxParallelLocation: SourceLocation?
}

/// The decoded pieces, before cross-checks.
struct DecodedWorkflow {
    var name = ""
    var description: String?
    var inputs: [InputDeclaration] = []
    var secrets: [SecretDeclaration] = []
    var defaults = StepDefaults()
    var concurrency: [ConcurrencyLimit] = []
    var steps: [Step] = []
    var syntax: [StepSyntax] = []
    var outputs: [(name: String, value: Template)] = []
    var onFinish: [(hook: FinishHook, withNode: YAMLNode?, withKey: SourceLocation?)] = []
    var triggers = WorkflowTriggers()
    var watchSyntax: WatchSyntax?
    var retention: Double?
    /// The `with:` mappings (by location) naming a remote that could not be merged in.
    var unexpandedRemotes: Set<SourceLocation> = []
}

struct WorkflowDecoder {
    static let topLevelFields = ["version", "name", "description", "inputs", "secrets", "defaults", "concurrency",
                                 "steps", "outputs", "on_finish", "on", "retention", "remotes"]
    static let stepFields = ["uses", "with", "needs", "if", "retry", "timeout", "concurrency", "idempotency_key",
                             "compensate", "for_each", "max_parallel", "continue_on_error", "isolation", "hold_timeout"]
    static let retryFields = ["max_attempts", "initial_interval", "backoff", "max_interval", "jitter", "non_retryable"]
    static let inputFields = ["type", "required", "default", "description"]
    // Every list of allowed fields is also where schemas/workflow.schema.json comes from
    // (WorkflowSchema.swift types each field; `orchestrate schema workflow` writes it).
    static let secretFields = ["env", "file"]
    static let defaultsFields = ["timeout", "retry", "hold_timeout"]
    static let concurrencyFields = ["key", "limit"]
    static let compensateFields = ["uses", "with", "retry", "timeout"]
    static let hookFields = ["when", "uses", "with", "timeout"]

    var reader: FieldReader
    var remoteScope: RemoteScope

    init(source: SourceText, remotes: (any RemoteDefinitions)? = nil, catalog: (any StepCatalog)? = nil) {
        reader = FieldReader(source: source)
        remoteScope = RemoteScope(user: remotes, catalog: catalog)
    }

    var diagnostics: [Diagnostic] { reader.bag.diagnostics }

    mutating func decode(_ root: YAMLNode?) -> DecodedWorkflow {
        var w = DecodedWorkflow()
        guard let root else {
            reader.bag.error("the workflow file is empty; it needs at least 'name' and 'steps'",
                             at: reader.source.location(line: 1, column: 1))
            return w
        }
        guard let fields = reader.fields(of: root, place: "at the top level", allowed: Self.topLevelFields,
                                         what: "a workflow")
        else { return w }

        if let pair = fields["version"] {
            switch pair.value.scalar?.jsonValue {
            case .int(1)?: break
            case .int(let v)?:
                reader.bag.error("unsupported workflow version \(v); this orchestrate reads version 1", at: pair.value.location)
            default:
                reader.bag.error("'version' must be the integer 1, not \(pair.value.kindDescription)", at: pair.value.location)
            }
        }
        if let pair = fields["name"] {
            if let name = reader.string(pair, lenient: true) {
                if name.trimmingWhitespace.isEmpty { reader.bag.error("'name' must not be empty", at: pair.value.location) }
                w.name = name
            }
        } else {
            reader.bag.error("missing required field 'name'", at: root.location)
        }
        if let pair = fields["description"], !(pair.value.scalar?.jsonValue.isNull ?? false) {
            w.description = reader.string(pair, lenient: true)
        }
        if let pair = fields["inputs"] { w.inputs = decodeInputs(pair.value) }
        if let pair = fields["secrets"] { w.secrets = decodeSecrets(pair.value) }
        if let pair = fields["defaults"] { w.defaults = decodeDefaults(pair.value) }
        if let pair = fields["remotes"] {
            var remoteDecoder = RemoteDecoder(reader: reader)
            remoteScope.workflow = RemoteCatalog(remotes: remoteDecoder.decode(pair.value))
            reader = remoteDecoder.reader
        }
        if let pair = fields["concurrency"] { w.concurrency = decodeConcurrency(pair, place: "in workflow concurrency") }
        if let pair = fields["steps"] {
            decodeSteps(pair, defaults: w.defaults, into: &w)
        } else {
            reader.bag.error("missing required field 'steps'", at: root.location)
        }
        if let pair = fields["outputs"], !(pair.value.scalar?.jsonValue.isNull ?? false) {
            if pair.value.pairs == nil {
                reader.bag.error("'outputs' must be a mapping from output name to value, not \(pair.value.kindDescription)",
                                 at: pair.value.location)
            }
            for (name, output) in TemplateBuilder.uniquePairs(pair.value, noun: "output", bag: &reader.bag) {
                w.outputs.append((name: name, value: reader.template(output.value)))
            }
        }
        if let pair = fields["on_finish"] { decodeHooks(pair, defaults: w.defaults, into: &w) }
        if let pair = fields["on"] { decodeTriggers(pair, into: &w) }
        addRemoteSecrets(into: &w)
        w.unexpandedRemotes = remoteScope.unexpanded
        if let pair = fields["retention"] {
            // A duration, or `off`: kept until pruned by hand.
            if pair.value.scalar?.text == "off" {
                w.retention = .infinity
            } else if let period = reader.duration(pair, positive: true) {
                let parts = period.components
                w.retention = Double(parts.seconds) + Double(parts.attoseconds) * 1e-18
            }
        }
        return w
    }

    static let hookStatuses = ["succeeded", "failed", "cancelled"]

    private mutating func decodeHooks(_ pair: YAMLPair, defaults: StepDefaults, into w: inout DecodedWorkflow) {
        guard let entries = pair.value.items else {
            reader.bag.error("'on_finish' must be a list of { when, uses, with }, not \(pair.value.kindDescription)",
                             at: pair.value.location)
            return
        }
        for entry in entries {
            guard let f = reader.fields(of: entry, place: "in on_finish", allowed: Self.hookFields,
                                        what: "an on_finish entry")
            else { continue }
            guard let u = f["uses"] else {
                reader.bag.error("on_finish entry is missing required field 'uses'", at: entry.location)
                continue
            }
            var when = Set(Self.hookStatuses)
            if let w = f["when"] {
                let values = w.value.items ?? [w.value]
                when = []
                for value in values {
                    guard let status = value.scalar?.jsonValue.stringValue, Self.hookStatuses.contains(status) else {
                        reader.bag.error("'when' takes succeeded, failed or cancelled (one or a list)", at: value.location)
                        continue
                    }
                    when.insert(status)
                }
            }
            let (with, withNode) = decodeWith(f["with"], uses: reader.string(u) ?? "")
            let timeout = f["timeout"].flatMap { reader.duration($0, positive: true) } ?? defaults.timeout
            let hook = FinishHook(uses: reader.string(u) ?? "", usesLocation: u.value.location, with: with, when: when,
                                  timeout: timeout, location: entry.location)
            w.onFinish.append((hook, withNode, f["with"]?.key.location))
        }
    }

    // MARK: inputs and secrets

    private mutating func decodeInputs(_ node: YAMLNode) -> [InputDeclaration] {
        if node.scalar?.jsonValue.isNull == true { return [] }
        guard node.pairs != nil else {
            reader.bag.error("'inputs' must be a mapping from input name to declaration, not \(node.kindDescription)",
                             at: node.location)
            return []
        }
        var out: [InputDeclaration] = []
        for (name, pair) in TemplateBuilder.uniquePairs(node, noun: "input", bag: &reader.bag) {
            if !FieldReader.isIdentifier(name) {
                reader.bag.error("invalid input name '\(name)': use letters, digits, '_' and '-', starting with a letter or '_'",
                                 at: pair.key.location)
            }
            // Shorthand: `title: string`.
            if let typeName = pair.value.stringValue {
                guard let type = InputType(rawValue: typeName) else {
                    reportBadType(typeName, at: pair.value.location)
                    continue
                }
                out.append(InputDeclaration(name: name, type: type, required: false, defaultValue: nil, description: nil,
                                            location: pair.key.location))
                continue
            }
            guard let fields = reader.fields(of: pair.value, place: "in input '\(name)'", allowed: Self.inputFields,
                                             what: "input '\(name)'")
            else { continue }
            var type = InputType.string
            if let t = fields["type"] {
                if let typeName = reader.string(t) {
                    if let parsed = InputType(rawValue: typeName) { type = parsed } else { reportBadType(typeName, at: t.value.location) }
                }
            }
            let required = fields["required"].flatMap { reader.bool($0) } ?? false
            var defaultValue: JSONValue?
            if let d = fields["default"] {
                let value = plainValue(d.value)
                if required {
                    reader.bag.error("input '\(name)' is required, so its default would never be used; drop one of them",
                                     at: d.key.location)
                } else if !type.accepts(value) {
                    reader.bag.error("default of input '\(name)' must be \(article(type.rawValue)), not \(d.value.kindDescription)",
                                     at: d.value.location)
                } else {
                    defaultValue = type == .integer ? value.intValue.map(JSONValue.int) : value
                }
            }
            let description = fields["description"].flatMap { reader.string($0, lenient: true) }
            out.append(InputDeclaration(name: name, type: type, required: required, defaultValue: defaultValue,
                                        description: description, location: pair.key.location))
        }
        return out
    }

    private mutating func reportBadType(_ name: String, at location: SourceLocation) {
        let names = InputType.allCases.map(\.rawValue)
        reader.bag.error("unknown input type '\(name)' (types are \(quotedList(names)))\(didYouMean(name, names))",
                         at: location)
    }

    /// A YAML value as plain JSON (no expressions: input defaults are taken literally).
    private mutating func plainValue(_ node: YAMLNode) -> JSONValue {
        switch node.kind {
        case .scalar(let s): return s.jsonValue
        case .sequence(let items): return .array(items.map { plainValue($0) })
        case .mapping:
            var o: [String: JSONValue] = [:]
            for (name, p) in TemplateBuilder.uniquePairs(node, bag: &reader.bag) { o[name] = plainValue(p.value) }
            return .object(o)
        }
    }

    private mutating func decodeSecrets(_ node: YAMLNode) -> [SecretDeclaration] {
        if node.scalar?.jsonValue.isNull == true { return [] }
        guard node.pairs != nil else {
            reader.bag.error("'secrets' must be a mapping from secret name to { env: VARIABLE }, not \(node.kindDescription)",
                             at: node.location)
            return []
        }
        var out: [SecretDeclaration] = []
        for (name, pair) in TemplateBuilder.uniquePairs(node, noun: "secret", bag: &reader.bag) {
            if !FieldReader.isIdentifier(name) {
                reader.bag.error("invalid secret name '\(name)': use letters, digits, '_' and '-', starting with a letter or '_'",
                                 at: pair.key.location)
            }
            guard let fields = reader.fields(of: pair.value, place: "in secret '\(name)'", allowed: Self.secretFields,
                                             what: "secret '\(name)'")
            else { continue }
            switch (fields["env"], fields["file"]) {
            case (let envPair?, nil):
                guard let env = reader.string(envPair) else { continue }
                guard RemoteDecoder.isEnvironmentName(env) else {
                    reader.bag.error("invalid environment variable name '\(env)'", at: envPair.value.location)
                    continue
                }
                out.append(SecretDeclaration(name: name, env: env, location: pair.key.location))
            case (nil, let filePair?):
                guard let path = reader.string(filePair) else { continue }
                guard path.hasPrefix("/") || path.hasPrefix("~/") else {
                    reader.bag.error("'file' must be an absolute path (or start with ~/), not '\(path)'", at: filePair.value.location)
                    continue
                }
                out.append(SecretDeclaration(name: name, source: .file(path), location: pair.key.location))
            case (_?, _?):
                reader.bag.error("secret '\(name)' takes 'env' or 'file', not both", at: pair.key.location)
            case (nil, nil):
                reader.bag.error("secret '\(name)' is missing required field 'env' (the environment variable to read it from) "
                    + "or 'file' (a file holding it)", at: pair.key.location)
            }
        }
        return out
    }

    // MARK: defaults, retry, concurrency

    private mutating func decodeDefaults(_ node: YAMLNode) -> StepDefaults {
        guard let fields = reader.fields(of: node, place: "in defaults", allowed: Self.defaultsFields, what: "'defaults'")
        else { return StepDefaults() }
        let timeout = fields["timeout"].flatMap { reader.duration($0, positive: true) }
        let retry = fields["retry"].map { decodeRetry($0.value, place: "in defaults.retry") } ?? RetryOverrides()
        let holdTimeout = fields["hold_timeout"].flatMap { reader.duration($0, positive: true) } ?? Step.defaultHoldTimeout
        return StepDefaults(timeout: timeout, retry: retry.applied(to: .default), holdTimeout: holdTimeout)
    }

    private mutating func decodeRetry(_ node: YAMLNode, place: String) -> RetryOverrides {
        var r = RetryOverrides()
        guard let fields = reader.fields(of: node, place: place, allowed: Self.retryFields, what: "'retry'") else { return r }
        r.maxAttempts = fields["max_attempts"].flatMap { reader.integer($0, minimum: 1) }
        r.initialInterval = fields["initial_interval"].flatMap { reader.duration($0, positive: false) }
        r.backoff = fields["backoff"].flatMap { reader.number($0, minimum: 1) }
        r.maxInterval = fields["max_interval"].flatMap { reader.duration($0, positive: false) }
        if let pair = fields["jitter"] {
            if let text = pair.value.scalar?.text, let j = Jitter(rawValue: text), pair.value.stringValue != nil {
                r.jitter = j
            } else {
                let text = pair.value.scalar?.text ?? ""
                reader.bag.error("'jitter' must be 'full' or 'none', not \(pair.value.scalar != nil ? "'\(text)'" : pair.value.kindDescription)",
                                 at: pair.value.location)
            }
        }
        if let pair = fields["non_retryable"] {
            r.nonRetryable = reader.stringList(pair, single: false, what: "a list of error kinds or codes")?.map(\.0)
        }
        if let i = r.initialInterval, let m = r.maxInterval, m < i, let pair = fields["max_interval"] {
            reader.bag.error("'max_interval' (\(m.workflowText)) is shorter than 'initial_interval' (\(i.workflowText))",
                             at: pair.value.location)
        }
        return r
    }

    private mutating func decodeConcurrency(_ pair: YAMLPair, place: String) -> [ConcurrencyLimit] {
        let node = pair.value
        let entries: [YAMLNode]
        if node.pairs != nil { entries = [node] }
        else if let items = node.items { entries = items }
        else {
            reader.bag.error("'concurrency' must be a list of { key, limit }, not \(node.kindDescription)", at: node.location)
            return []
        }
        var out: [ConcurrencyLimit] = []
        for entry in entries {
            guard let fields = reader.fields(of: entry, place: place, allowed: Self.concurrencyFields, what: "a concurrency limit")
            else { continue }
            let key = fields["key"].map { reader.template($0.value) }
            let limit = fields["limit"].flatMap { reader.integer($0, minimum: 1) }
            if fields["key"] == nil { reader.bag.error("concurrency limit is missing required field 'key'", at: entry.location) }
            if fields["limit"] == nil { reader.bag.error("concurrency limit is missing required field 'limit'", at: entry.location) }
            if let keyPair = fields["key"], let key, case .literal(let v) = key, v.stringValue == nil {
                reader.bag.error("concurrency 'key' must be a string, not \(keyPair.value.kindDescription)", at: keyPair.value.location)
                continue
            }
            if let key, let limit { out.append(ConcurrencyLimit(key: key, limit: limit, location: entry.location)) }
        }
        return out
    }

    // MARK: steps

    private mutating func decodeSteps(_ pair: YAMLPair, defaults: StepDefaults, into w: inout DecodedWorkflow) {
        let node = pair.value
        guard node.pairs != nil else {
            reader.bag.error("'steps' must be a mapping from step id to step, not \(node.kindDescription)", at: node.location)
            return
        }
        let steps = TemplateBuilder.uniquePairs(node, noun: "step id", bag: &reader.bag)
        if steps.isEmpty && node.pairs?.isEmpty ?? true {
            reader.bag.error("'steps' must hold at least one step", at: node.location)
        }
        for (id, stepPair) in steps {
            if !FieldReader.isIdentifier(id) {
                reader.bag.error("invalid step id '\(id)': use letters, digits, '_' and '-', starting with a letter or '_'",
                                 at: stepPair.key.location)
            }
            decodeStep(id: id, stepPair, defaults: defaults, into: &w)
        }
    }

    private mutating func decodeStep(id: String, _ pair: YAMLPair, defaults: StepDefaults, into w: inout DecodedWorkflow) {
        guard let f = reader.fields(of: pair.value, place: "in step '\(id)'", allowed: Self.stepFields, what: "step '\(id)'")
        else { return }

        var uses = ""
        var usesLocation = pair.key.location
        if let u = f["uses"] {
            usesLocation = u.value.location
            if let s = reader.string(u) {
                if s.isEmpty { reader.bag.error("'uses' must name a step type", at: u.value.location) }
                uses = s
            }
        } else {
            reader.bag.error("step '\(id)' is missing required field 'uses' (the step type to run)", at: pair.key.location)
        }

        let (with, withNode) = decodeWith(f["with"], uses: uses)

        var needs: [(String, SourceLocation)] = []
        if let n = f["needs"] {
            needs = reader.stringList(n, single: true, what: "a step id or a list of step ids") ?? []
        }
        var uniqueNeeds: [String] = []
        for (name, location) in needs {
            if uniqueNeeds.contains(name) {
                reader.bag.error("step '\(id)' lists '\(name)' twice in 'needs'", at: location)
            } else {
                uniqueNeeds.append(name)
            }
        }

        let condition = f["if"].flatMap { decodeCondition($0) }
        let retry = f["retry"].map { decodeRetry($0.value, place: "in retry of step '\(id)'") } ?? RetryOverrides()
        let timeout = f["timeout"].flatMap { reader.duration($0, positive: true) } ?? defaults.timeout
        let holdTimeout = f["hold_timeout"].flatMap { reader.duration($0, positive: true) } ?? defaults.holdTimeout
        let concurrency = f["concurrency"].map { decodeConcurrency($0, place: "in concurrency of step '\(id)'") } ?? []
        let idempotencyKey = f["idempotency_key"].map { p -> Template in
            let t = reader.template(p.value)
            if case .literal(let v) = t, v.stringValue == nil {
                reader.bag.error("'idempotency_key' must be a string, not \(p.value.kindDescription)", at: p.value.location)
            }
            return t
        }

        var compensation: Compensation?
        var compensateWithNode: YAMLNode?
        var compensateWithKeyLocation: SourceLocation?
        if let c = f["compensate"] {
            (compensation, compensateWithNode) = decodeCompensation(c, stepID: id, defaults: defaults)
            compensateWithKeyLocation = c.value.pairs?.first { $0.name == "with" }?.key.location
        }

        var forEach: Template?
        if let p = f["for_each"] {
            let t = reader.template(p.value)
            switch t {
            case .literal(.array), .expression, .array: forEach = t
            case .literal, .interpolation, .object:
                reader.bag.error("'for_each' must be a list or a single ${{ }} expression giving one, not \(p.value.kindDescription)",
                                 at: p.value.location)
            }
        }
        let maxParallel = f["max_parallel"].flatMap { reader.integer($0, minimum: 1) }
        let continueOnError = f["continue_on_error"].flatMap { reader.bool($0) } ?? false
        var isolation: StepIsolation?
        if let p = f["isolation"] {
            isolation = reader.string(p).flatMap(StepIsolation.init(rawValue:))
            if isolation == nil && reader.string(p) != nil {
                reader.bag.error("'isolation' is 'process' or 'in-process'", at: p.value.location)
            }
        }

        var step = Step(
            id: id, location: pair.key.location, uses: uses, usesLocation: usesLocation, with: with,
            needs: uniqueNeeds, condition: condition, retry: retry.applied(to: defaults.retry), timeout: timeout,
            concurrency: concurrency, idempotencyKey: idempotencyKey, compensate: compensation,
            forEach: f["for_each"] != nil ? (forEach ?? .literal(.array([]))) : nil,
            maxParallel: maxParallel, continueOnError: continueOnError, isolation: isolation)
        step.holdTimeout = holdTimeout
        w.steps.append(step)
        w.syntax.append(StepSyntax(
            id: id, keyLocation: pair.key.location, needs: needs, hasUses: !uses.isEmpty, withNode: withNode,
            withKeyLocation: f["with"]?.key.location, compensateWithNode: compensateWithNode,
            compensateWithKeyLocation: compensateWithKeyLocation, maxParallelLocation: f["max_parallel"]?.key.location))
    }

    /// `with:` as an object template, a named remote merged in; null or absent means `{}`.
    private mutating func decodeWith(_ pair: YAMLPair?, uses: String) -> (Template, YAMLNode?) {
        guard let pair else { return (.literal(.object([:])), nil) }
        if pair.value.scalar?.jsonValue.isNull == true { return (.literal(.object([:])), nil) }
        guard pair.value.pairs != nil else {
            reader.bag.error("'with' must be a mapping of step inputs, not \(pair.value.kindDescription)", at: pair.value.location)
            return (.literal(.object([:])), nil)
        }
        let node = expandRemote(pair.value, uses: uses)
        return (reader.template(node), node)
    }

    /// `if:` written bare (`inputs.dry_run == false`) or as one `${{ … }}`; `true`/`false` allowed.
    private mutating func decodeCondition(_ pair: YAMLPair) -> Expression? {
        let node = pair.value
        guard let scalar = node.scalar else {
            reader.bag.error("'if' must be an expression, not \(node.kindDescription)", at: node.location)
            return nil
        }
        switch scalar.jsonValue {
        case .bool(let b):
            return Expression(source: b ? "true" : "false", location: node.location,
                              root: ExprNode(kind: .literal(.bool(b)), location: node.location))
        case .string(let text):
            if text.contains("${{") {
                switch reader.template(node) {
                case .expression(let e): return e
                case .literal: return nil  // the expression had an error, already reported
                default:
                    reader.bag.error("'if' must be one expression: write it bare or as a single ${{ … }}", at: node.location)
                    return nil
                }
            }
            let source = reader.source
            do {
                return try ExpressionParser.parse(text, locate: { source.location(ofValueOffset: $0, in: node) })
            } catch {
                reader.bag.append(error)
                return nil
            }
        default:
            reader.bag.error("'if' must be an expression, not \(node.kindDescription)", at: node.location)
            return nil
        }
    }

    private mutating func decodeCompensation(_ pair: YAMLPair, stepID: String,
                                             defaults: StepDefaults) -> (Compensation?, YAMLNode?)
    {
        guard let f = reader.fields(of: pair.value, place: "in compensate of step '\(stepID)'",
                                    allowed: Self.compensateFields, what: "'compensate'")
        else { return (nil, nil) }
        guard let u = f["uses"] else {
            reader.bag.error("'compensate' of step '\(stepID)' is missing required field 'uses'", at: pair.key.location)
            return (nil, nil)
        }
        let uses = reader.string(u) ?? ""
        let (with, withNode) = decodeWith(f["with"], uses: uses)
        let retry = f["retry"].map { decodeRetry($0.value, place: "in compensate retry of step '\(stepID)'") } ?? RetryOverrides()
        let timeout = f["timeout"].flatMap { reader.duration($0, positive: true) } ?? defaults.timeout
        var compensation = Compensation(uses: uses, usesLocation: u.value.location, with: with,
                                        retry: retry.applied(to: defaults.retry), timeout: timeout, location: pair.key.location)
        compensation.holdTimeout = defaults.holdTimeout
        return (compensation, withNode)
    }
}
