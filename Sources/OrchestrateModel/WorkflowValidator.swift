// Cross-checks over a decoded workflow: the step graph (unknown needs, cycles), what each
// expression may reference where it stands, and step types and their `with:` schemas.
import OrchestrateJSON

struct WorkflowValidator {
    let workflow: DecodedWorkflow
    let catalog: (any StepCatalog)?
    let source: SourceText
    var bag = DiagnosticBag()

    private var stepIDs: Set<String> { Set(workflow.steps.map(\.id)) }

    init(workflow: DecodedWorkflow, catalog: (any StepCatalog)?, source: SourceText) {
        self.workflow = workflow
        self.catalog = catalog
        self.source = source
    }

    mutating func validate() {
        checkNeeds()
        checkCycles()
        let ancestors = transitiveNeeds()
        for (step, syntax) in zip(workflow.steps, workflow.syntax) {
            checkStep(step, syntax, ancestors: ancestors[step.id] ?? [])
        }
        let workflowKeys = Scope(
            stepID: nil, allowedSteps: [], stepsForbidden: "workflow concurrency keys cannot read steps: they apply to every step, before any has run",
            item: "'item' is only available in a for_each step",
            secrets: "secrets cannot be used in concurrency keys: keys are stored in the state store")
        for limit in workflow.concurrency { check(limit.key, workflowKeys) }
        let outputs = Scope(stepID: nil, allowedSteps: nil, stepsForbidden: nil,
                            item: "'item' is only available in a for_each step",
                            secrets: "secrets cannot be used in outputs: outputs are stored and shown")
        for output in workflow.outputs { check(output.value, outputs) }
    }

    // MARK: graph

    private mutating func checkNeeds() {
        for syntax in workflow.syntax {
            var seen: Set<String> = []
            for (name, location) in syntax.needs where seen.insert(name).inserted {
                if name == syntax.id {
                    bag.error("step '\(name)' needs itself", at: location)
                } else if !stepIDs.contains(name) {
                    let others = workflow.steps.map(\.id).filter { $0 != syntax.id }
                    bag.error("step '\(syntax.id)' needs unknown step '\(name)'\(didYouMean(name, others))", at: location)
                }
            }
        }
    }

    /// Depth-first over `needs` in file order. A need that leads back to a step still on the
    /// path closes a cycle; it is reported there, naming the whole cycle.
    private mutating func checkCycles() {
        var state: [String: Int] = [:]  // 1 on the path, 2 done
        var path: [String] = []
        let syntaxByID = Dictionary(workflow.syntax.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        func visit(_ id: String, _ bag: inout DiagnosticBag) {
            state[id] = 1
            path.append(id)
            var seen: Set<String> = []
            for (need, location) in syntaxByID[id]?.needs ?? [] where need != id && seen.insert(need).inserted {
                guard syntaxByID[need] != nil else { continue }
                switch state[need] {
                case 1?:
                    let cycle = path.drop { $0 != need } + [need]
                    bag.error("dependency cycle: \(cycle.joined(separator: " -> ")) (each step needs the next)", at: location)
                case nil:
                    visit(need, &bag)
                default:
                    break
                }
            }
            path.removeLast()
            state[id] = 2
        }
        for step in workflow.steps where state[step.id] == nil { visit(step.id, &bag) }
    }

    /// Every step each step depends on, directly or not.
    private func transitiveNeeds() -> [String: Set<String>] {
        var memo: [String: Set<String>] = [:]
        let needs = Dictionary(workflow.steps.map { ($0.id, $0.needs) }, uniquingKeysWith: { a, _ in a })
        func ancestors(_ id: String, _ visiting: inout Set<String>) -> Set<String> {
            if let known = memo[id] { return known }
            guard visiting.insert(id).inserted else { return [] }  // a cycle, reported elsewhere
            var out: Set<String> = []
            for need in needs[id] ?? [] where needs[need] != nil {
                out.insert(need)
                out.formUnion(ancestors(need, &visiting))
            }
            visiting.remove(id)
            memo[id] = out
            return out
        }
        for step in workflow.steps {
            var visiting: Set<String> = []
            _ = ancestors(step.id, &visiting)
        }
        return memo
    }

    // MARK: steps

    private mutating func checkStep(_ step: Step, _ syntax: StepSyntax, ancestors: Set<String>) {
        let fanOut = step.forEach != nil
        let noItem = "'item' is only available in a for_each step"
        let base = Scope(stepID: step.id, allowedSteps: ancestors, stepsForbidden: nil,
                         item: fanOut ? nil : noItem, secrets: nil)
        check(step.with, base)
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
            s.allowedSteps = nil  // it runs after the run failed: any step's outputs, its own too
            check(compensation.with, s)
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

    private mutating func checkType(_ type: String, at location: SourceLocation, with node: YAMLNode?,
                                    withKey: SourceLocation?, catalog: any StepCatalog)
    {
        guard let info = catalog.stepInfo(for: type) else {
            bag.error("unknown step type '\(type)'\(didYouMean(type, catalog.stepTypeIDs))", at: location)
            return
        }
        // Missing inputs are reported at the `with` key, or at the `uses` value when there is none.
        let anchor = withKey ?? location
        SchemaValidator(stepType: type, source: source).check(node, schema: info.inputSchema, anchor: anchor, bag: &bag)
    }

    // MARK: expression references

    /// What expressions may read at one place of the workflow. A nil reason means allowed.
    struct Scope {
        var stepID: String?
        /// nil: every step.
        var allowedSteps: Set<String>?
        var stepsForbidden: String?
        var item: String?
        var secrets: String?
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
                let fields = ["id", "dir", "attempt"]
                if let name = ref.name, !fields.contains(name) {
                    bag.error("unknown run field '\(name)' (run has id, dir and attempt)\(didYouMean(name, fields))",
                              at: ref.nameLocation)
                }
            case .item:
                if let reason = scope.item { bag.error(reason, at: ref.location) }
            case .env:
                break
            }
        }
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
        guard stepIDs.contains(name) else {
            bag.error("unknown step '\(name)'\(didYouMean(name, workflow.steps.map(\.id)))", at: ref.nameLocation)
            return
        }
        if let member = ref.member, member != "outputs", member != "status" {
            bag.error("steps.\(name) has 'outputs' and 'status', not '\(member)'\(didYouMean(member, ["outputs", "status"]))",
                      at: ref.memberLocation ?? ref.nameLocation)
        }
        guard let allowed = scope.allowedSteps, let me = scope.stepID, !allowed.contains(name) else { return }
        if name == me {
            bag.error("step '\(me)' cannot read its own steps.\(name) (only its 'compensate' can)", at: ref.location)
        } else {
            bag.error("step '\(me)' uses steps.\(name) but does not depend on it; add it to needs", at: ref.location)
        }
    }
}
