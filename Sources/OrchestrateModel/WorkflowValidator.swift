// Cross-checks over a decoded workflow: the step graph (unknown needs, cycles), what each
// expression may reference where it stands, and step types and their `with:` schemas.
import OrchestrateJSON

struct WorkflowValidator {
    let workflow: DecodedWorkflow
    let catalog: (any StepCatalog)?
    let source: SourceText
    var bag = DiagnosticBag()

    /// Each step's position in `workflow.steps` (and `workflow.syntax`), by id.
    private let stepIndex: [String: Int]
    /// Built on the first `steps.X` reference that needs it.
    private lazy var reachability = NeedsReachability(workflow.steps)

    init(workflow: DecodedWorkflow, catalog: (any StepCatalog)?, source: SourceText) {
        self.workflow = workflow
        var stepIndex: [String: Int] = Dictionary(minimumCapacity: workflow.steps.count)
        for (i, step) in workflow.steps.enumerated() where stepIndex[step.id] == nil { stepIndex[step.id] = i }
        self.stepIndex = stepIndex
        self.catalog = catalog
        self.source = source
    }

    mutating func validate() {
        checkNeeds()
        checkCycles()
        for (step, syntax) in zip(workflow.steps, workflow.syntax) {
            checkStep(step, syntax)
        }
        let workflowKeys = Scope(
            stepID: nil, onlyNeeds: false, stepsForbidden: "workflow concurrency keys cannot read steps: they apply to every step, before any has run",
            item: "'item' is only available in a for_each step",
            secrets: "secrets cannot be used in concurrency keys: keys are stored in the state store")
        for limit in workflow.concurrency { check(limit.key, workflowKeys) }
        let outputs = Scope(stepID: nil, onlyNeeds: false, stepsForbidden: nil,
                            item: "'item' is only available in a for_each step",
                            secrets: "secrets cannot be used in outputs: outputs are stored and shown")
        for output in workflow.outputs { check(output.value, outputs) }
        // on_finish: after the run, any step; secrets are fine (nothing evaluated there is
        // stored); run.status and run.error say how it ended.
        var hooks = Scope(stepID: nil, onlyNeeds: false, stepsForbidden: nil,
                          item: "'item' is only available in a for_each step", secrets: nil)
        hooks.runFields = ["id", "dir", "attempt", "status", "error"]
        for (hook, withNode, withKey) in workflow.onFinish {
            check(hook.with, hooks)
            if let catalog, !hook.uses.isEmpty {
                checkType(hook.uses, at: hook.usesLocation, with: withNode, withKey: withKey, catalog: catalog)
            }
        }
        if let watch = workflow.triggers.watch { checkWatch(watch) }
    }

    // MARK: graph

    private mutating func checkNeeds() {
        for syntax in workflow.syntax {
            // A need listed twice was reported by the decoder; look at its first mention only.
            for (k, (name, location)) in syntax.needs.enumerated() where !syntax.needs[..<k].contains(where: { $0.0 == name }) {
                if name == syntax.id {
                    bag.error("step '\(name)' needs itself", at: location)
                } else if stepIndex[name] == nil {
                    let others = workflow.steps.map(\.id).filter { $0 != syntax.id }
                    bag.error("step '\(syntax.id)' needs unknown step '\(name)'\(didYouMean(name, others))", at: location)
                }
            }
        }
    }

    /// Depth-first over `needs` in file order, with an explicit stack (a 10,000-step chain
    /// must not exhaust the thread's stack). A need that leads back to a step still on the path
    /// closes a cycle; it is reported there, naming the whole cycle. Steps are array positions
    /// (`stepIndex`), so a step's id is hashed once, not at every visit.
    private mutating func checkCycles() {
        let syntax = workflow.syntax
        // Each step's needs as positions, in the order written; -1 for a need to skip (itself,
        // an unknown step, or one listed before: reported elsewhere).
        let needs: [[Int]] = syntax.enumerated().map { i, s in
            s.needs.enumerated().map { k, need in
                guard let j = stepIndex[need.0], j != i, !s.needs[..<k].contains(where: { $0.0 == need.0 }) else { return -1 }
                return j
            }
        }
        var state = [UInt8](repeating: 0, count: syntax.count)  // 1 on the path, 2 done
        for start in syntax.indices where state[start] == 0 {
            // Each frame: a step on the path and the index of its next need to look at.
            var path: [(step: Int, next: Int)] = [(start, 0)]
            state[start] = 1
            while let top = path.last {
                guard top.next < needs[top.step].count else {
                    state[top.step] = 2
                    path.removeLast()
                    continue
                }
                path[path.count - 1].next += 1
                let need = needs[top.step][top.next]
                guard need >= 0 else { continue }
                switch state[need] {
                case 1:
                    let cycle = path.map { syntax[$0.step].id }.drop { $0 != syntax[need].id } + [syntax[need].id]
                    bag.error("dependency cycle: \(cycle.joined(separator: " -> ")) (each step needs the next)",
                              at: syntax[top.step].needs[top.next].1)
                case 0:
                    state[need] = 1
                    path.append((need, 0))
                default:
                    break
                }
            }
        }
    }

    // MARK: steps

    private mutating func checkStep(_ step: Step, _ syntax: StepSyntax) {
        let fanOut = step.forEach != nil
        let noItem = "'item' is only available in a for_each step"
        let base = Scope(stepID: step.id, onlyNeeds: true, stepsForbidden: nil,
                         item: fanOut ? nil : noItem, secrets: nil)
        check(step.with, base)
        checkArgv(uses: step.uses, with: step.with, base)
        if let condition = step.condition {
            var s = base
            s.item = fanOut ? "'item' cannot be used in 'if': the condition is evaluated once for the whole step" : noItem
            check(condition, s)
        }
        if let forEach = step.forEach {
            var s = base
            s.item = "'for_each' cannot use 'item': it computes the items"
            check(forEach, s)
        }
        if let key = step.idempotencyKey {
            var s = base
            s.secrets = "secrets cannot be used in 'idempotency_key': keys are stored in the state store"
            check(key, s)
        }
        for limit in step.concurrency {
            var s = base
            s.secrets = "secrets cannot be used in concurrency keys: keys are stored in the state store"
            check(limit.key, s)
        }
        if let compensation = step.compensate {
            var s = base
            s.onlyNeeds = false  // it runs after the run failed: any step's outputs, its own too
            check(compensation.with, s)
            checkArgv(uses: compensation.uses, with: compensation.with, s)
        }
        if !fanOut, let location = syntax.maxParallelLocation {
            bag.error("'max_parallel' only applies to a for_each step; add 'for_each' or remove it", at: location)
        }
        guard let catalog else { return }
        if syntax.hasUses {
            checkType(step.uses, at: step.usesLocation, with: syntax.withNode, withKey: syntax.withKeyLocation,
                      catalog: catalog)
        }
        if let compensation = step.compensate, !compensation.uses.isEmpty {
            checkType(compensation.uses, at: compensation.usesLocation, with: syntax.compensateWithNode,
                      withKey: syntax.compensateWithKeyLocation, catalog: catalog)
        }
    }

    /// `exec`'s `command` becomes the child's argv, which every user of the machine can read
    /// (`ps`, /proc/PID/cmdline): a secret there is refused; `env` and `stdin` carry secrets.
    private mutating func checkArgv(uses: String, with: Template, _ scope: Scope) {
        guard uses == "exec", case .object(let fields) = with, let command = fields["command"] else { return }
        var s = scope
        s.secrets = "secrets cannot be used in exec's 'command': a command line is visible to every user "
            + "of the machine (ps); pass the secret in 'env' or 'stdin'"
        check(command, s)
    }

    private mutating func checkType(_ type: String, at location: SourceLocation, with node: YAMLNode?,
                                    withKey: SourceLocation?, catalog: any StepCatalog)
    {
        guard let info = catalog.stepInfo(for: type) else {
            bag.error("unknown step type '\(type)'\(didYouMean(type, catalog.stepTypeIDs))", at: location)
            return
        }
        // Missing inputs are reported at the `with` key, or at the `uses` value when there is none.
        let anchor = withKey ?? location
        // A `with:` whose remote could not be expanded was reported already; its missing inputs would only repeat it.
        if let node, workflow.unexpandedRemotes.contains(node.location) { return }
        SchemaValidator(stepType: type, source: source).check(node, schema: info.inputSchema, anchor: anchor, bag: &bag)
    }

    // MARK: expression references

    /// What expressions may read at one place of the workflow. A nil reason means allowed.
    struct Scope {
        var stepID: String?
        /// true: only steps `stepID` depends on, directly or not; false: every step.
        var onlyNeeds: Bool
        var stepsForbidden: String?
        var item: String?
        var secrets: String?
        var runFields = Scope.stepRunFields
        static let stepRunFields = ["id", "dir", "attempt"]
    }

    private mutating func check(_ template: Template, _ scope: Scope) {
        for e in template.expressions { check(e, scope) }
    }

    private mutating func check(_ expression: Expression, _ scope: Scope) {
        for ref in expression.contextReferences {
            switch ref.context {
            case .inputs:
                if let name = ref.name, !workflow.inputs.contains(where: { $0.name == name }) {
                    bag.error("unknown input '\(name)'\(didYouMean(name, workflow.inputs.map(\.name)))", at: ref.nameLocation)
                }
            case .secrets:
                if let reason = scope.secrets {
                    bag.error(reason, at: ref.location)
                } else if let name = ref.name {
                    if !workflow.secrets.contains(where: { $0.name == name }) {
                        bag.error("unknown secret '\(name)'\(didYouMean(name, workflow.secrets.map(\.name)))", at: ref.nameLocation)
                    }
                } else {
                    bag.error("read secrets one at a time, as secrets.<name>", at: ref.location)
                }
            case .steps:
                checkStepReference(ref, scope)
            case .run:
                let fields = scope.runFields
                if let name = ref.name, !fields.contains(name) {
                    let known = fields.dropLast().joined(separator: ", ") + " and " + fields.last!
                    let note = fields.contains("status") ? "" : "; status and error only in on_finish"
                    bag.error("unknown run field '\(name)' (run has \(known)\(note))\(didYouMean(name, fields))",
                              at: ref.nameLocation)
                }
            case .item:
                if let reason = scope.item { bag.error(reason, at: ref.location) }
            case .env:
                if let reason = scope.secrets, let problem = secretBehind(ref) { bag.error("\(problem): \(reason)", at: ref.location) }
            case .file:
                bag.error("'file' is only available in on.watch (its 'inputs' and 'destination')", at: ref.location)
            }
        }
    }

    /// When `ref` (into `env`) may read the variable a declared secret comes from, what it reads:
    /// such a variable is that secret, and goes only where a secret may. `env` read whole or with
    /// a computed name may read any of them.
    func secretBehind(_ ref: ContextReference) -> String? {
        guard !workflow.secrets.isEmpty else { return nil }
        guard let name = ref.name else {
            return "env read whole or with a computed name may read the variable behind a secret ("
                + workflow.secrets.compactMap { $0.env.map { "env.\($0)" } }.joined(separator: ", ") + ")"
        }
        guard let secret = workflow.secrets.first(where: { $0.env == name }) else { return nil }
        if let origin = secret.origin { return "env.\(name) is a secret: \(origin) reads it" }
        return "env.\(name) is the secret '\(secret.name)' (secrets: \(secret.name): { env: \(name) })"
    }

    private mutating func checkStepReference(_ ref: ContextReference, _ scope: Scope) {
        if let reason = scope.stepsForbidden {
            bag.error(reason, at: ref.location)
            return
        }
        guard let name = ref.name else {
            bag.error("name the step: steps.<id>.outputs or steps.<id>.status", at: ref.location)
            return
        }
        guard stepIndex[name] != nil else {
            bag.error("unknown step '\(name)'\(didYouMean(name, workflow.steps.map(\.id)))", at: ref.nameLocation)
            return
        }
        if let member = ref.member, member != "outputs", member != "status" {
            bag.error("steps.\(name) has 'outputs' and 'status', not '\(member)'\(didYouMean(member, ["outputs", "status"]))",
                      at: ref.memberLocation ?? ref.nameLocation)
        }
        if ref.member == "outputs", let i = stepIndex[name] { checkOutputName(ref, of: workflow.steps[i]) }
        guard scope.onlyNeeds, let me = scope.stepID, !reachability.step(me, dependsOn: name) else { return }
        if name == me {
            bag.error("step '\(me)' cannot read its own steps.\(name) (only its 'compensate' can)", at: ref.location)
        } else {
            bag.error("step '\(me)' uses steps.\(name) but does not depend on it; add it to needs", at: ref.location)
        }
    }

    /// `steps.X.outputs.Y`: when X's step type lists its outputs (an output schema with
    /// `properties` and no `additionalProperties`), Y must be one of them; a misspelt name would
    /// otherwise read `null` at run time. A `for_each` step's outputs are a list, one per item
    /// (`steps.X.outputs[0].Y`).
    private mutating func checkOutputName(_ ref: ContextReference, of step: Step) {
        guard let catalog, !step.uses.isEmpty, let info = catalog.stepInfo(for: step.uses),
              case .object(let schema)? = info.outputSchema, schema["additionalProperties"] == nil,
              let properties = schema["properties"]?.objectValue, let first = ref.rest.first
        else { return }
        let field: (name: String?, location: SourceLocation)
        if step.forEach != nil {
            if let name = first.name {
                bag.error("steps.\(step.id).outputs is a list, one per item ('\(step.id)' has for_each): "
                    + "read one item's as steps.\(step.id).outputs[0].\(name)", at: first.location)
                return
            }
            guard ref.rest.count > 1 else { return }
            field = ref.rest[1]
        } else {
            field = first
        }
        guard let name = field.name, properties[name] == nil else { return }
        let known = properties.keys.sorted()
        bag.error("step type '\(step.uses)' has no output '\(name)' (it has \(quotedList(known, conjunction: "and")))"
            + didYouMean(name, known), at: field.location)
    }
}

/// Answers "does step A depend on step B, directly or not?" on demand: a direct need is a
/// lookup; anything else is an iterative walk over `needs`, whose answers are remembered.
/// Cheaper than every step's ancestor set, which is quadratic on a long chain.
final class NeedsReachability {
    private let needs: [String: [String]]
    private var known: [String: Set<String>] = [:]  // step -> steps found to be its ancestors

    init(_ steps: [Step]) {
        needs = Dictionary(steps.map { ($0.id, $0.needs) }, uniquingKeysWith: { a, _ in a })
    }

    func step(_ step: String, dependsOn target: String) -> Bool {
        guard step != target else { return false }
        if needs[step]?.contains(target) == true || known[step]?.contains(target) == true { return true }
        var seen: Set<String> = [step]
        var stack = needs[step] ?? []
        while let next = stack.popLast() {
            guard seen.insert(next).inserted else { continue }
            if next == target {
                known[step, default: []].insert(target)
                return true
            }
            stack.append(contentsOf: needs[next] ?? [])
        }
        return false
    }
}
