import ArgumentParser
import OrchestrateEngine
import OrchestrateOperations
import OrchestrateStore

struct CancelCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel a run: interrupt it, run its compensations, and deactivate it.",
        discussion: """
            A cancelled run does not run again unless asked with `run-now` or `retry`. The process \
            executing the run acts within a second (`serve`) or two (`run`). A run that nobody \
            executes any more (interrupted by Ctrl-C, SIGTERM or a kill) has its compensations run \
            here, in the foreground; with --detach they are left to a `serve`.

            Examples:
              orchestrate cancel RUN
              orchestrate cancel RUN && orchestrate status RUN   # see what was undone
            """)

    @Argument(help: "The run id.") var runID: String

    @Flag(help: "Leave the compensations of a run nobody executes to a `serve` instead of running them here.")
    var detach = false

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let store = try global.openStore()
        if !detach, let run = try orphanToUndo(store) {
            let registry = global.loadPlugins()
            let workflow = try WorkflowLoading.parse(source: run.workflowSource, file: run.workflowFile, registry: registry)
            try InputParsing.checkSecrets(workflow)
            Terminal.line("cancelling \(runID): its process is gone, so its compensations run here", to: .standardError)
            try RunSession.execute(run: run, workflow: workflow, store: store, registry: registry, maxParallel: nil,
                                   global: global, options: try global.engineOptions(), purpose: .cancel)
        }
        try ControlVerb.run(.cancel, runID: runID, global: global)
    }

    /// The run, when this command undoes it itself: it was interrupted (stored so, or left
    /// running or compensating by a process that died) and a step of it succeeded, so there may
    /// be something to undo. Any other run is the verb's (`QueueControl`): a live owner is asked
    /// to cancel, a run with nothing done is cancelled in place.
    private func orphanToUndo(_ store: any StateStore) throws -> RunRecord? {
        guard let run = try store.run(runID), RunDocument.effectiveStatus(run) == "interrupted" else { return nil }
        return try store.steps(ofRun: runID).contains { $0.status == .succeeded } ? run : nil
    }
}
