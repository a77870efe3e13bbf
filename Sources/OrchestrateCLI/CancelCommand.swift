import ArgumentParser
import OrchestrateStore

struct CancelCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel a run: its steps are interrupted and its compensations run.",
        discussion: "The process executing the run sees the request within its heartbeat (about 2 s).")

    @Argument(help: "The run id.")
    var runID: String

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let store = try global.openStore()
        guard let run = try store.run(runID) else { throw CLIFailure.usage("no run \(runID)") }
        guard !run.status.isFinished else { throw CLIFailure.usage("run \(runID) already finished (\(run.status.rawValue))") }
        try store.requestControl(runID, control: "cancel")
        Terminal.line("cancel requested for \(runID)")
    }
}
