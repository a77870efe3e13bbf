import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateModel
import OrchestrateStore

/// What `run` and `submit` do when the run they are asked for exists already, after Temporal's
/// workflow ids: an id names one job. An unfinished run of that id is continued (never started
/// from zero over its partial files), a succeeded one is not run again unless `--rerun` asks
/// (its record, events and run directory are then replaced by a new run of the same id), a
/// failed or cancelled one points at `retry`. An id already used for another workflow or other
/// inputs is refused: it names another job.
enum RunIdentity {
    enum Decision {
        /// No such run (any more): create it.
        case create
        /// Continue this unfinished run, which no process executes.
        case resume(RunRecord)
        /// The run is being executed by the live process `owner`.
        case executing(RunRecord, owner: OwnerIdentity)
        /// Nothing to do, with the exit status and the message saying why.
        case done(status: Int32, message: String)
    }

    /// Decides what happens to run `id` of `workflow` with `inputs`; with `rerun`, a finished
    /// run of that id is deleted first (so `.create` follows).
    static func decide(id: String, workflow: Workflow, inputs: JSONValue, rerun: Bool,
                       store: any StateStore, global: GlobalOptions) throws -> Decision
    {
        guard let run = try store.run(id) else { return .create }
        let sameJob = run.workflowName == workflow.name && run.inputs == inputs
        if run.status.isFinished && rerun {
            _ = try QueueControl(store: store, stateDirectory: global.resolvedStateDirectory()).apply(.delete, to: id)
            Terminal.line("run \(id) (\(run.status.rawValue)) is replaced by a new run of the same id", to: .standardError)
            return .create
        }
        guard sameJob else {
            throw CLIFailure.usage("run \(id) exists for another job (workflow \(run.workflowName), "
                + (run.workflowName == workflow.name ? "other inputs" : "its own inputs") + "); choose another id"
                + (run.status.isFinished ? ", or replace it with --rerun" : ""))
        }
        switch run.status {
        case .succeeded:
            return .done(status: ExitStatus.success, message: "run \(id) already succeeded; not run again (--rerun runs it again from the start)")
        case .failed, .cancelled:
            return .done(status: ExitStatus.runFailed, message: "run \(id) already finished: \(run.status.rawValue); "
                + "to run again what did not succeed: \(NextCommands.command("retry", id, global)) (or --rerun to start from zero)")
        case .paused:
            throw CLIFailure.usage("run \(id) is paused; continue it with: \(NextCommands.command("unpause", id, global))")
        case .queued, .running, .compensating, .interrupted:
            if run.ownerIsLive, let owner = run.owner { return .executing(run, owner: owner) }
            return .resume(run)
        }
    }

    /// The newest run of `workflow` (the same text) with the same `inputs` that was interrupted
    /// and that no process executes: what a `run` without `--id` continues instead of starting
    /// a new run over the old one's partial files.
    static func interruptedTwin(of workflow: Workflow, inputs: JSONValue, store: any StateStore) throws -> RunRecord? {
        try store.listRuns(RunFilter(statuses: [.interrupted, .running], workflow: workflow.name))
            // A `running` run without an owner is one another `run` has just created and not yet
            // claimed: it is that process's, not an interrupted twin (two runs started together).
            .filter { ($0.status == .interrupted || $0.owner != nil) && !$0.ownerIsLive }
            .filter { $0.workflowName == workflow.name && $0.workflowSource == workflow.source && $0.inputs == inputs }
            .max { $0.createdAt < $1.createdAt }
    }

    /// Says that an existing run is continued rather than a new one started, and how it differs.
    static func announceResume(_ run: RunRecord, workflow: Workflow, reason: String) {
        Terminal.line("resuming run \(run.id) (\(RunDocument.effectiveStatus(run))), \(reason): "
            + "steps that finished are not run again, a transfer continues from its checkpoint", to: .standardError)
        if run.workflowSource != workflow.source {
            Terminal.warning("\(workflow.file) changed since run \(run.id) started; the run continues with the workflow it started with")
        }
    }
}
