// Cross-checks of `on.watch` against the rest of the workflow: what its expressions may read,
// that its inputs are the workflow's, and that `feed` names a step that accepts items.
import OrchestrateJSON

extension WorkflowValidator {
    mutating func checkWatch(_ watch: WatchTrigger) {
        guard let syntax = workflow.watchSyntax else { return }
        switch watch.work {
        case .runs(let inputs):
            checkWatchExpressions(inputs, fileAllowed: true, place: "on.watch inputs")
        case .feed(let step, let inputs, let destination):
            checkWatchExpressions(inputs, fileAllowed: false, place: "on.watch inputs (with 'feed', the inputs of the one long run)")
            checkWatchExpressions(destination, fileAllowed: true, place: "on.watch destination")
            checkFeed(step, at: syntax.feedLocation ?? watch.location)
        }
        let declared = workflow.inputs.map(\.name)
        for (name, location) in syntax.inputKeys where !declared.contains(name) {
            bag.error("unknown input '\(name)' in on.watch inputs\(didYouMean(name, declared))", at: location)
        }
        let given = Set(syntax.inputKeys.map(\.0))
        for input in workflow.inputs where input.required && input.defaultValue == nil && !given.contains(input.name) {
            bag.error("on.watch inputs must give the required input '\(input.name)'", at: syntax.inputsAnchor)
        }
    }

    /// Only `file` (where a file is at hand) and `env` make sense when a watch hands a file over:
    /// no step has run, and what is evaluated is stored with the run (so no secrets).
    private mutating func checkWatchExpressions(_ template: Template, fileAllowed: Bool, place: String) {
        for expression in template.expressions {
            for ref in expression.contextReferences {
                switch ref.context {
                case .file where fileAllowed:
                    if let name = ref.name, !WatchTrigger.fileFields.contains(name) {
                        bag.error("unknown file field '\(name)' (file has \(WatchTrigger.fileFields.joined(separator: ", ")))"
                                  + didYouMean(name, WatchTrigger.fileFields), at: ref.nameLocation)
                    }
                case .file:
                    bag.error("\(place) cannot read 'file': one run takes every file; use 'destination' for the item's path",
                              at: ref.location)
                case .env:
                    if let problem = secretBehind(ref) {
                        bag.error("\(problem): secrets cannot be used in \(place): inputs are stored with the run", at: ref.location)
                    }
                case .secrets:
                    bag.error("secrets cannot be used in \(place): inputs are stored with the run", at: ref.location)
                default:
                    bag.error("\(place) can read only \(fileAllowed ? "'file' and " : "")'env' (nothing has run yet), "
                              + "not '\(ref.context.rawValue)'", at: ref.location)
                }
            }
        }
    }

    private mutating func checkFeed(_ step: String, at location: SourceLocation) {
        guard let target = workflow.steps.first(where: { $0.id == step }) else {
            bag.error("'feed' names unknown step '\(step)'\(didYouMean(step, workflow.steps.map(\.id)))", at: location)
            return
        }
        guard let catalog, let info = catalog.stepInfo(for: target.uses) else { return }
        if !info.acceptsItems {
            let accepting = workflow.steps.filter { catalog.stepInfo(for: $0.uses)?.acceptsItems == true }.map(\.id)
            bag.error("'feed' needs a step that accepts paths (a persistent session such as sftp.accept-paths); "
                      + "'\(step)' uses \(target.uses)"
                      + (accepting.isEmpty ? "" : " (steps that do: \(accepting.joined(separator: ", ")))"), at: location)
        }
    }
}
