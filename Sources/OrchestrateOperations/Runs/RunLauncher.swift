import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateLock
import OrchestrateModel
import OrchestrateStore
import OrchestrateTokenBucket

/// Creates runs: an id and the journaled run record.
///
/// ```swift
/// let launcher = RunLauncher(store: store)
/// let run = try launcher.create(workflow, inputs: inputs)
/// let final = try RunExecutor(...).execute()
/// ```
public struct RunLauncher: Sendable {
    public let store: any StateStore

    public init(store: any StateStore) {
        self.store = store
    }

    /// Journals a new run of `workflow` with already validated `inputs`. `status` is `.queued`
    /// for `submit`, `.running` for `run` (which then executes it at once).
    public func create(_ workflow: Workflow, inputs: JSONValue, status: RunStatus = .running, id: String? = nil,
                       labels: [String: String] = [:], priority: Int = 0, maxRate: RateTimetable? = nil,
                       queue: String = "default") throws -> RunRecord
    {
        let (run, events) = try Self.record(workflow, inputs: inputs, status: status, id: id, labels: labels, priority: priority,
                                            maxRate: maxRate, queue: queue)
        try store.createRun(run, events: events)
        return run
    }

    /// Journals one run per element of `inputs`, all in one transaction (`submit --batch`):
    /// a thousand runs cost one commit, and a failure queues none.
    public func createAll(_ workflow: Workflow, inputs: [JSONValue], status: RunStatus = .queued,
                          labels: [String: String] = [:], priority: Int = 0, maxRate: RateTimetable? = nil,
                          queue: String = "default") throws -> [RunRecord]
    {
        let records = try inputs.map {
            try Self.record(workflow, inputs: $0, status: status, id: nil, labels: labels, priority: priority, maxRate: maxRate,
                        queue: queue)
        }
        try store.createRuns(records.map { (run: $0.0, events: $0.1) })
        return records.map(\.0)
    }

    /// A new run's record and its `run.added` event. Throws `RunID.Invalid` for an id that
    /// breaks the run id rule (every entry checks it before; this is the last line).
    static func record(_ workflow: Workflow, inputs: JSONValue, status: RunStatus, id: String?, labels: [String: String],
                       priority: Int, maxRate: RateTimetable?, queue: String) throws(RunID.Invalid) -> (RunRecord, [EventRecord])
    {
        let runID = id ?? RunIDs.make()
        try RunID.check(runID)
        // The directory itself is made by the node that executes the run (RunExecutor).
        let now = Date().timeIntervalSince1970
        var run = RunRecord(id: runID, workflowName: workflow.name, workflowFile: workflow.file,
                            workflowSource: workflow.source, inputs: inputs, status: status, createdAt: now,
                            runDir: RunRecord.runDirectory(for: runID), priority: priority, labels: labels)
        run.rateCap = maxRate
        run.queue = queue
        run.retention = workflow.retention
        let added = EventRecord(runID: runID, time: now, type: .runAdded,
                                data: ["workflow": .string(workflow.name), "file": .string(workflow.file)])
        return (run, [added])
    }
}
