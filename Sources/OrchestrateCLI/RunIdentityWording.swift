import Foundation
import OrchestrateJSON
import OrchestrateModel
import OrchestrateOperations
import OrchestrateStore

/// How `run` and `submit` word `RunIdentity`'s decisions about an id that exists already.
extension RunIdentity {
    /// What `run --id` does with the run of that id: create it, continue it, or stop here.
    enum RunVerdict {
        case create
        case resume(RunRecord)
    }

    static func verdictForRun(id: String, workflow: Workflow, inputs: JSONValue, rerun: Bool,
                              store: any StateStore, global: GlobalOptions) throws -> RunVerdict
    {
        switch try decide(id: id, workflow: workflow, inputs: inputs, rerun: rerun, store: store,
                          stateDirectory: global.resolvedStateDirectory()) {
        case .create(let replaced):
            if let replaced { announceReplaced(id, replaced) }
            return .create
        case .resume(let run):
            return .resume(run)
        case .executing(let run, let owner):
            throw CLIFailure.usage("run \(id) is \(run.status.rawValue) in process \(owner.pid) on node \(owner.node); "
                + "not started twice (follow it with: \(NextCommands.command("status", id, global)) --watch)")
        case .settled(let run):
            throw settled(run, global: global)
        case .otherJob(let run):
            throw otherJob(run, workflow: workflow)
        }
    }

    static func announceReplaced(_ id: String, _ status: RunStatus) {
        Terminal.line("run \(id) (\(status.rawValue)) is replaced by a new run of the same id", to: .standardError)
    }

    /// The job of that id is done, or waits for a person: the exit status and what to do.
    static func settled(_ run: RunRecord, global: GlobalOptions) -> CLIFailure {
        switch run.status {
        case .succeeded:
            return CLIFailure(status: ExitStatus.success,
                              message: "run \(run.id) already succeeded; not run again (--rerun runs it again from the start)")
        case .paused:
            return CLIFailure.usage("run \(run.id) is paused; continue it with: \(NextCommands.command("unpause", run.id, global))")
        default:
            return CLIFailure(status: ExitStatus.runFailed, message: "run \(run.id) already finished: \(run.status.rawValue); "
                + "to run again what did not succeed: \(NextCommands.command("retry", run.id, global)) (or --rerun to start from zero)")
        }
    }

    static func otherJob(_ run: RunRecord, workflow: Workflow) -> CLIFailure {
        CLIFailure.usage("run \(run.id) exists for another job (workflow \(run.workflowName), "
            + (run.workflowName == workflow.name ? "other inputs" : "its own inputs") + "); choose another id"
            + (run.status.isFinished ? ", or replace it with --rerun" : ""))
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
