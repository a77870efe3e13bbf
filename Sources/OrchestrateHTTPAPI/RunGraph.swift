import OrchestrateJSON
import OrchestrateModel
import OrchestrateStore

/// The declared step graph of a run (`graph` in `GET /api/runs/{id}`), for the dashboard to
/// draw: each declared step with what it uses and what it needs, in the workflow's order.
/// Read from the workflow text stored with the run, so it does not depend on the file.
enum RunGraph {
    static func json(_ run: RunRecord) -> JSONValue? {
        // No catalog: the graph does not depend on the plugins being (still) installed.
        guard let workflow = try? WorkflowLoader.parse(source: run.workflowSource, file: run.workflowFile, catalog: nil) else {
            return nil
        }
        return .array(workflow.steps.map { step in
            ["id": .string(step.id), "uses": .string(step.uses), "needs": .array(step.needs.map { .string($0) }),
             "for_each": .bool(step.forEach != nil)]
        })
    }
}
