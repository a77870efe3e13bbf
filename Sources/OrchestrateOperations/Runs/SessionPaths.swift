import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateModel
import OrchestratePluginHost
import OrchestrateStore

/// Adding files to a running persistent session (`add-path`, `POST /api/runs/{id}/paths`):
/// each path goes durably into the step's item queue, whether or not the run executes right
/// now; the node that holds the run transfers it.
public struct SessionPaths: Sendable {
    public struct Refusal: Error, CustomStringConvertible {
        public let description: String
    }

    let store: any StateStore
    let registry: PluginRegistry

    public init(store: any StateStore, registry: PluginRegistry) {
        self.store = store
        self.registry = registry
    }

    /// The unfinished run `runID` and the step to add to: the one named, else the run's only
    /// step whose type accepts items.
    public func target(runID: String, step: String?) throws -> (run: RunRecord, step: String) {
        guard RunID.isValid(runID) else {
            throw Refusal(description: RunID.Invalid(id: runID, stored: try store.run(runID) != nil).description)
        }
        guard let run = try store.run(runID) else { throw Refusal(description: "no run \(runID)") }
        guard !run.status.isFinished else { throw Refusal(description: "run \(runID) already finished (\(run.status.rawValue))") }
        let workflow: Workflow
        do {
            workflow = try WorkflowLoader.parse(source: run.workflowSource, file: run.workflowFile,
                                                catalog: RegistryStepCatalog(registry: registry), remotes: RemotesFile())
        } catch {
            throw Refusal(description: "run \(runID)'s workflow no longer loads with these plugins:\n\(error)")
        }
        let accepting = workflow.steps.filter { registry.stepType($0.uses)?.acceptsItems == true }.map(\.id)
        if let step {
            guard workflow.step(step) != nil else { throw Refusal(description: "run \(runID) has no step '\(step)'") }
            guard accepting.contains(step) else {
                throw Refusal(description: "step '\(step)' does not accept paths (steps that do: \(accepting.joined(separator: ", ")))")
            }
            return (run, step)
        }
        guard accepting.count == 1 else {
            throw Refusal(description: accepting.isEmpty
                ? "run \(runID) has no step that accepts paths"
                : "run \(runID) has several steps that accept paths (\(accepting.joined(separator: ", "))): choose one with step")
        }
        return (run, accepting[0])
    }

    /// How many paths `add-path --from` and the API journal in one transaction: each batch is
    /// one commit (its items visible to the session together), instead of one per path.
    public static let batchSize = 1000

    /// Journals one path (SOURCE as the holding node reads it) with its `item.added` event;
    /// returns the item.
    @discardableResult
    public func add(runID: String, step: String, source: String, destination: String) throws -> JSONValue {
        try add(runID: runID, step: step, [(source, destination)])[0]
    }

    /// Journals paths, in order, with their `item.added` events in one transaction (all or
    /// none); returns the items.
    @discardableResult
    public func add(runID: String, step: String, _ paths: [(source: String, destination: String)]) throws -> [JSONValue] {
        let now = Date().timeIntervalSince1970
        let items = paths.map { path -> (id: String, value: JSONValue) in
            ("p-" + String(UInt64.random(in: 0...UInt64.max), radix: 36),
             ["source": .string(path.source), "destination": .string(path.destination)])
        }
        try store.addItems(runID: runID, stepID: step, items.map { item in
            NewItem(id: item.id, json: item.value.jsonText,
                    event: EventRecord(runID: runID, time: now, type: .itemAdded, step: step,
                                       data: ["item": .string(item.id), "value": item.value]))
        })
        return items.map { ["id": .string($0.id), "step": .string(step), "item": $0.value] }
    }
}
