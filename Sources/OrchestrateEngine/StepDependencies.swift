import OrchestrateModel

/// Which declared steps wait for which, kept as counts so that a step finishing costs its own
/// dependents and no scan of the workflow: for each step, the steps that list it in `needs:`;
/// for each step still to finish, how many of its needs have not finished yet.
///
/// Invariants: a step is reported ready once, when the count of its unfinished needs reaches
/// zero; only steps registered with `track` (unfinished when the run was loaded) are counted and
/// reported; `allFinished` holds once every tracked step has finished.
struct StepDependencies {
    /// Declared step id → the ids of the steps that need it, in workflow order.
    private let dependents: [String: [String]]
    private var unfinishedNeeds: [String: Int] = [:]
    private var unfinishedSteps = 0

    init(workflow: Workflow) {
        var dependents: [String: [String]] = [:]
        for step in workflow.steps {
            for need in step.needs { dependents[need, default: []].append(step.id) }
        }
        self.dependents = dependents
    }

    /// The steps that need `stepID`.
    func dependents(of stepID: String) -> [String] { dependents[stepID] ?? [] }

    /// Registers an unfinished step and how many of its needs are unfinished.
    mutating func track(_ stepID: String, unfinishedNeeds count: Int) {
        unfinishedNeeds[stepID] = count
        unfinishedSteps += 1
    }

    /// Whether every need of `stepID` has finished (true for a step not tracked).
    func needsMet(_ stepID: String) -> Bool { unfinishedNeeds[stepID, default: 0] == 0 }

    /// True once every tracked step has finished.
    var allFinished: Bool { unfinishedSteps == 0 }

    /// `stepID`, tracked, reached a final status: appends to `ready` each dependent whose last
    /// unfinished need it was.
    mutating func finished(_ stepID: String, ready: inout [String]) {
        unfinishedSteps -= 1
        for dependent in dependents[stepID] ?? [] {
            guard let count = unfinishedNeeds[dependent], count > 0 else { continue }
            unfinishedNeeds[dependent] = count - 1
            if count == 1 { ready.append(dependent) }
        }
    }
}
