@testable import OrchestrateEngine
import OrchestrateModel
import OrchestrateStore

/// Workflows and step instances for the unit tests of the executor's state values
/// (`StepDependencies`, `AttemptsInFlight`, `ActiveFanOuts`): no run, no store, no plugin.
enum ExecutorStateFixtures {
    /// A workflow of `steps` (the YAML under `steps:`, each line indented by two spaces).
    static func workflow(_ steps: String) -> Workflow {
        let source = "version: 1\nname: fixture\nsteps:\n" + steps
        do {
            return try WorkflowLoader.parse(source: source, file: "fixture.yaml", catalog: nil)
        } catch {
            fatalError("the fixture workflow does not parse: \(error)\n\(source)")
        }
    }

    /// An instance `id` of the one step (`a`) of a one-step workflow.
    static func instance(_ id: String, kind: StepKind, status: StepStatus = .pending) -> Instance {
        let oneStep = workflow("  a: { uses: test.noop }\n")
        return Instance(record: StepRecord(runID: "r", id: id, step: "a", kind: kind, status: status),
                        spec: Runnable(step: oneStep.steps[0], workflow: oneStep))
    }
}
