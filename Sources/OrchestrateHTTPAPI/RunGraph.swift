import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateLock
import OrchestrateModel
import OrchestrateStore

/// The declared step graph of a run (`graph` in `GET /api/runs/{id}`), for the dashboard to
/// draw: each declared step with what it uses and what it needs, in the workflow's order.
/// Read from the workflow text stored with the run, so it does not depend on the file.
enum RunGraph {
    static func json(_ run: RunRecord) -> JSONValue? {
        // No catalog: the graph does not depend on the plugins being (still) installed.
        guard let workflow = try? WorkflowLoader.parse(source: run.workflowSource, file: run.workflowFile, catalog: nil,
                                                           remotes: RemotesFile()) else {
            return nil
        }
        return .array(workflow.steps.map { step in
            ["id": .string(step.id), "uses": .string(step.uses), "needs": .array(step.needs.map { .string($0) }),
             "for_each": .bool(step.forEach != nil)]
        })
    }

    /// Graphs by workflow text, as JSON text: parsing a workflow of hundreds of steps at every
    /// request for a run's detail cost more than reading the run, and so did parsing it once per
    /// run when a batch of runs shares one workflow (bench/api: 32 runs, one parse instead of
    /// 32); encoding it at every request was a third of writing the detail. The graph depends
    /// on nothing else, and a run's workflow text never changes.
    final class Cache: @unchecked Sendable {
        private let lock = Lock()
        private var graphs: [String: String?] = [:]  // by workflow source; guarded by lock
        private let capacity = 512

        /// The graph's compact JSON text (`jsonText`), nil when the workflow cannot be read.
        func graphText(_ run: RunRecord) -> String? {
            if let known = lock.withLock({ graphs[run.workflowSource] }) { return known }
            let graph = RunGraph.json(run)?.jsonText
            lock.withLock {
                if graphs.count >= capacity { graphs.removeAll() }
                graphs[run.workflowSource] = graph
            }
            return graph
        }
    }
}
