import Foundation
import OrchestrateJSON
import OrchestrateModel
import OrchestrateStore

/// What becomes of a request for run `id` when a run of that id exists already, after
/// Temporal's workflow ids: an id names one job. An unfinished run of that id is continued
/// (never started from zero over its partial files), a succeeded one is not run again unless
/// `rerun` asks (its record, events and run directory are then replaced by a new run of the
/// same id), a failed or cancelled one is for `retry`. An id already used for another workflow
/// or other inputs names another job.
///
/// `run --id`, `submit --id` and `copy` decide with it; the front end says what each case means
/// in its own words (`RunSubmission` queues, `run` executes).
public enum RunIdentity {
    public enum Decision: Sendable {
        /// No such run (any more): create it. `replaced` is the status of the finished run of
        /// that id that `rerun` deleted first, if any.
        case create(replaced: RunStatus?)
        /// Continue this unfinished run, which no process executes.
        case resume(RunRecord)
        /// The run is being executed by the live process `owner`.
        case executing(RunRecord, owner: OwnerIdentity)
        /// The job is done or waits for a person: succeeded, failed, cancelled, or paused.
        case settled(RunRecord)
        /// The id names another job: another workflow, or other inputs.
        case otherJob(RunRecord)
    }

    /// Decides what happens to run `id` of `workflow` with `inputs`; with `rerun`, a finished
    /// run of that id is deleted first (its run directory under `stateDirectory` with it).
    public static func decide(id: String, workflow: Workflow, inputs: JSONValue, rerun: Bool,
                              store: any StateStore, stateDirectory: String) throws -> Decision
    {
        guard let run = try store.run(id) else { return .create(replaced: nil) }
        if run.status.isFinished && rerun {
            _ = try QueueControl(store: store, stateDirectory: stateDirectory).apply(.delete, to: id)
            return .create(replaced: run.status)
        }
        guard run.workflowName == workflow.name && run.inputs == inputs else { return .otherJob(run) }
        switch run.status {
        case .succeeded, .failed, .cancelled, .paused:
            return .settled(run)
        case .queued, .running, .compensating, .interrupted:
            if run.ownerIsLive, let owner = run.owner { return .executing(run, owner: owner) }
            return .resume(run)
        }
    }

    /// The newest run of `workflow` (the same text) with the same `inputs` that was interrupted
    /// and that no process executes: what a `run` without `--id` continues instead of starting
    /// a new run over the old one's partial files.
    public static func interruptedTwin(of workflow: Workflow, inputs: JSONValue, store: any StateStore) throws -> RunRecord? {
        try store.listRuns(RunFilter(statuses: [.interrupted, .running], workflow: workflow.name))
            // A `running` run without an owner is one another `run` has just created and not yet
            // claimed: it is that process's, not an interrupted twin (two runs started together).
            .filter { ($0.status == .interrupted || $0.owner != nil) && !$0.ownerIsLive }
            .filter { $0.workflowName == workflow.name && $0.workflowSource == workflow.source && $0.inputs == inputs }
            .max { $0.createdAt < $1.createdAt }
    }
}
